package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// The secrets of TestTaskEnvSecretsEndToEnd: one in a file of
// --secrets-dir, one in the server's environment.
const (
	fileSecret = "pw-7f3a9c-from-a-file"
	envSecret  = "tok-51be0d-from-the-env"
)

// envPipeline writes the pipeline of TestTaskEnvSecretsEndToEnd and its
// secrets directory: load sees its env, secrets and working directory and
// writes them to record (outside the store); fail prints a secret and
// fails with it in its error text; missing takes a secret that is not
// there and must not run.
func envPipeline(t *testing.T) (dir, secrets, record string) {
	t.Helper()
	dir, secrets = t.TempDir(), t.TempDir()
	record = filepath.Join(t.TempDir(), "record.txt")
	if err := os.Mkdir(filepath.Join(dir, "jobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "db_password"), []byte(fileSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`pipeline: vault
timezone: UTC
schedule: none
env: {REGION: cn-north}
defaults: {timeout: 30s}
tasks:
  - name: load
    working_dir: jobs
    command: ["sh", "-c", "printf 'dir=%%s region=%%s day=%%s pw=%%s token=%%s\n' \"$(pwd)\" \"$REGION\" \"$DAY\" \"$DB_PASSWORD\" \"$API_TOKEN\" > %s; echo connecting with $DB_PASSWORD and $API_TOKEN"]
    env:
      DAY: "{{ .LogicalTime.Date }}"
      DB_PASSWORD: {secret: db_password}
      API_TOKEN: {secret: "env:TEST_API_TOKEN"}
  - name: fail
    depends_on: [load]
    command: ["sh", "-c", "echo login as etl:$DB_PASSWORD refused >&2; exit 3"]
    env: {DB_PASSWORD: {secret: db_password}}
  - name: missing
    command: ["touch", "ran"]
    env: {KEY: {secret: no_such_secret}}
`, record)
	if err := os.WriteFile(filepath.Join(dir, "vault.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, secrets, record
}

// axCmd runs the ax binary with args and returns its exit status and output.
func axCmd(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command(axBinary, args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// A task's env, secrets and working directory end to end, on the real
// binary and each store: the command sees them; the secrets' values are
// masked (***) in ax logs, the API's output endpoint and the error text,
// and appear nowhere in the store's bytes (its action log included), the
// API's answers, /metrics or the server's log. A missing secret fails its
// attempt naming it, runs nothing, and the server warned of it at start.
func TestTaskEnvSecretsEndToEnd(t *testing.T) {
	t.Parallel()
	for name, target := range e2eTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tgt := target(t)
			dir, secrets, record := envPipeline(t)
			addr := freeAddr(t)
			srv := startServerEnv(t, []string{"TEST_API_TOKEN=" + envSecret}, tgt, dir, "--listen", addr, "--secrets-dir", secrets)
			st := openStore(t, tgt)
			waitPrimary(t, addr)
			server := "http://" + addr
			for _, task := range []string{"vault.load", "vault.missing"} {
				args := []string{"trigger", task, "--server", server}
				if task == "vault.load" {
					args = append(args, "--downstream")
				}
				if code, out := axCmd(t, args...); code != 0 {
					t.Fatalf("ax %s: exit %d\n%s", strings.Join(args, " "), code, out)
				}
			}
			ended := map[string]axtype.Instance{}
			waitFor(t, func() bool {
				for _, task := range []string{"vault.load", "vault.fail", "vault.missing"} {
					ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: task})
					if len(ins) != 1 || !ins[0].State.Terminal() {
						return false
					}
					ended[task] = ins[0]
				}
				return true
			})
			if s := ended["vault.load"].State; s != axtype.Success {
				t.Errorf("vault.load %s: %s", s, ended["vault.load"].Error)
			}
			// The command's env and working directory.
			data, err := os.ReadFile(record)
			if err != nil {
				t.Fatalf("vault.load did not write its record: %v", err)
			}
			jobs, _ := filepath.EvalSymlinks(filepath.Join(dir, "jobs"))
			want := fmt.Sprintf("dir=%s region=cn-north day=%s pw=%s token=%s\n", jobs, ended["vault.load"].LogicalTime.UTC().Format("2006-01-02"), fileSecret, envSecret)
			if string(data) != want {
				t.Errorf("the command saw:\n%swant:\n%s", data, want)
			}
			// The error texts: masked, and naming the missing secret.
			if in := ended["vault.fail"]; in.State != axtype.Failed || !strings.Contains(in.Error, "login as etl:*** refused") {
				t.Errorf("vault.fail %s %q, want failed with the secret masked", in.State, in.Error)
			}
			if in := ended["vault.missing"]; in.State != axtype.Failed || !strings.Contains(in.Error, "env KEY: secret no_such_secret: no file "+filepath.Join(secrets, "no_such_secret")) {
				t.Errorf("vault.missing %s %q, want failed naming the secret", in.State, in.Error)
			}
			if _, err := os.Stat(filepath.Join(dir, "ran")); !os.IsNotExist(err) {
				t.Errorf("vault.missing ran its command (%v)", err)
			}
			// ax logs, and every API answer read here.
			code, logs := axCmd(t, "logs", "vault.load", "--server", server)
			if code != 0 || !strings.Contains(logs, "connecting with *** and ***") {
				t.Errorf("ax logs vault.load: exit %d\n%s", code, logs)
			}
			code, failLogs := axCmd(t, "logs", "vault.fail", "--server", server)
			if code != 1 || !strings.Contains(failLogs, "login as etl:*** refused") {
				t.Errorf("ax logs vault.fail: exit %d\n%s", code, failLogs)
			}
			var answers bytes.Buffer
			answers.WriteString(logs + failLogs)
			get := func(path string) string {
				resp, err := http.Get(server + path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				answers.Write(body)
				return string(body)
			}
			if body := get(fmt.Sprintf("/api/v1/instances/%d/logs", ended["vault.load"].ID)); !strings.Contains(body, "connecting with *** and ***") {
				t.Errorf("the API's output of vault.load: %s", body)
			}
			get(fmt.Sprintf("/api/v1/instances/%d/logs", ended["vault.fail"].ID))
			for _, path := range []string{"/api/v1/instances", "/api/v1/history", "/api/v1/actions", "/api/v1/pipelines/vault", "/api/v1/pipelines/vault/runs",
				"/api/v1/pipelines/vault/tasks/load", "/api/v1/pipelines/vault/tasks/fail/explain", "/metrics"} {
				get(path)
			}
			srv.stop(t)
			serverLog, _ := os.ReadFile(srv.log.Name())
			if !bytes.Contains(serverLog, []byte("msg=secret_unresolved task=vault.missing")) || !bytes.Contains(serverLog, []byte("no_such_secret")) {
				t.Errorf("the server did not warn at start of the secret it cannot resolve:\n%s", serverLog)
			}
			for what, b := range map[string][]byte{"the API's answers and /metrics": answers.Bytes(), "the server's log": serverLog, "the store": storeBytes(t, tgt)} {
				for _, secret := range []string{fileSecret, envSecret} {
					if bytes.Contains(b, []byte(secret)) {
						t.Errorf("%s hold the secret %q", what, secret)
					}
				}
			}
		})
	}
}

// storeBytes returns storeBytesOf(target), checked to hold vault.load's
// masked output as written, so that looking for a secret in them means
// something.
func storeBytes(t *testing.T, target string) []byte {
	t.Helper()
	b := storeBytesOf(t, target)
	if !bytes.Contains(b, []byte("connecting with *** and ***")) {
		t.Error("the store's bytes do not hold vault.load's masked output as written")
	}
	return b
}

// storeBytesOf returns everything the store at target holds: the bytes of a
// SQLite file (with its WAL), or every row of every table of a MySQL or
// PostgreSQL database.
func storeBytesOf(t *testing.T, target string) []byte {
	t.Helper()
	if !store.IsServer(target) {
		var all []byte
		files, _ := filepath.Glob(target + "*")
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		return all
	}
	db := openStore(t, target).DB()
	list := "SHOW TABLES"
	if !strings.HasPrefix(target, "mysql://") {
		list = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
	}
	tables, err := db.Query(list)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tables.Next() {
		var n string
		if err := tables.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	tables.Close()
	var all bytes.Buffer
	for _, n := range names {
		rows, err := db.Query("SELECT * FROM " + n) // ax's own tables: plain lowercase names
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				all.Write(v)
				all.WriteByte(0)
			}
		}
		rows.Close()
	}
	return all.Bytes()
}

// An HTTP task's dispatch carries its env, with secret_env naming the
// secret variables; a result posted by an executor that did not mask them
// (one not built on the SDK) has them masked before the server stores it:
// in the inbox, the instance's error and the attempt's output alike.
func TestForeignExecutorResultIsMasked(t *testing.T) {
	t.Parallel()
	for name, target := range e2eTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tgt := target(t)
			url, dispatched := acceptingExecutor(t)
			dir, secrets := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(secrets, "db_password"), []byte(fileSecret), 0o600); err != nil {
				t.Fatal(err)
			}
			src := fmt.Sprintf("pipeline: remote\ntimezone: UTC\nschedule: none\ntasks:\n  - name: pull\n    http: %q\n    timeout: 10m\n    env: {REGION: cn, DB_PASSWORD: {secret: db_password}}\n", url)
			if err := os.WriteFile(filepath.Join(dir, "remote.yaml"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			addr := freeAddr(t)
			srv := startServer(t, tgt, dir, "--listen", addr, "--secrets-dir", secrets)
			st := openStore(t, tgt)
			waitPrimary(t, addr)
			if code, out := axCmd(t, "trigger", "remote.pull", "--server", "http://"+addr); code != 0 {
				t.Fatalf("trigger: exit %d\n%s", code, out)
			}
			d := <-dispatched
			if d.Env["REGION"] != "cn" || d.Env["DB_PASSWORD"] != fileSecret || len(d.SecretEnv) != 1 || d.SecretEnv[0] != "DB_PASSWORD" {
				t.Errorf("dispatch env %v, secret_env %v", d.Env, d.SecretEnv)
			}
			token := testExecutorToken
			if !store.IsServer(tgt) {
				b, err := os.ReadFile(tokenFileOf(tgt))
				if err != nil {
					t.Fatal(err)
				}
				token = strings.TrimSpace(string(b))
			}
			body := fmt.Sprintf(`{"ticket":%q,"status":"failed","error":"login with %s refused","output":"connecting with %s\n","instance_id":%d}`,
				d.Ticket, fileSecret, fileSecret, d.InstanceID)
			if code, out := postResultWith(t, addr, token, body); code != http.StatusOK {
				t.Fatalf("result: %d %s", code, out)
			}
			var in axtype.Instance
			waitFor(t, func() bool {
				ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "remote.pull"})
				if len(ins) == 1 && ins[0].State.Terminal() {
					in = ins[0]
					return true
				}
				return false
			})
			if in.State != axtype.Failed || in.Error != "login with *** refused" {
				t.Errorf("instance %s %q, want failed with the secret masked", in.State, in.Error)
			}
			code, logs := axCmd(t, "logs", "remote.pull", "--server", "http://"+addr)
			if code != 1 || !strings.Contains(logs, "connecting with ***") {
				t.Errorf("ax logs: exit %d\n%s", code, logs)
			}
			srv.stop(t)
			if all := storeBytesOf(t, tgt); bytes.Contains(all, []byte(fileSecret)) || !bytes.Contains(all, []byte("login with *** refused")) {
				t.Errorf("the store holds the secret, or not the masked error (%d bytes)", len(all))
			}
		})
	}
}

// A reload that brings a reference to a secret the server cannot resolve
// is taken (the secret may be added before the task runs) with a warning
// naming the task and the secret; a secret the server can resolve gets none.
func TestReloadWarnsOfUnresolvedSecrets(t *testing.T) {
	t.Parallel()
	dir, secrets := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, "present"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "later.yaml")
	src := "pipeline: later\ntimezone: UTC\nschedule: none\ntasks:\n  - {name: a, command: [\"true\"], env: {P: {secret: present}}}\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, filepath.Join(t.TempDir(), "ax.db"), dir, "--secrets-dir", secrets, "--watch", "200ms")
	logHas := func(s string) bool { b, _ := os.ReadFile(srv.log.Name()); return strings.Contains(string(b), s) }
	waitFor(t, func() bool { return logHas("msg=server_starting") })
	src += "  - {name: b, command: [\"true\"], env: {K: {secret: added_later}}}\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return logHas("msg=reload ") })
	srv.stop(t)
	if !logHas("msg=secret_unresolved task=later.b") || !logHas("secret added_later: no file "+filepath.Join(secrets, "added_later")) {
		b, _ := os.ReadFile(srv.log.Name())
		t.Errorf("no warning of the reload's unresolved secret:\n%s", b)
	}
	if logHas("task=later.a") {
		t.Error("a warning for a secret the server resolves")
	}
}

// A --secrets-dir that is not a directory is refused before anything is
// created: by ax server (no store), ax run (no store, no run) and a
// standalone backfill (no backfill); a backfill without --standalone has no
// engine here to give it to, and is refused too.
func TestBadSecretsDirRefused(t *testing.T) {
	t.Parallel()
	dir, _, _ := envPipeline(t)
	missing := filepath.Join(t.TempDir(), "no-secrets")
	db := filepath.Join(t.TempDir(), "ax.db")
	file := filepath.Join(dir, "vault.yaml")
	for _, args := range [][]string{
		{"server", "--store", db, "--pipelines", dir, "--listen", "", "--secrets-dir", missing},
		{"run", file, "--store", db, "--select", "missing", "--secrets-dir", missing},
		{"backfill", "vault", "--from", "2026-01-01", "--to", "2026-01-01", "--pipelines", dir, "--store", db, "--standalone", "--secrets-dir", missing},
		{"backfill", "vault", "--from", "2026-01-01", "--to", "2026-01-01", "--pipelines", dir, "--store", db, "--secrets-dir", dir},
	} {
		code, out := axCmd(t, args...)
		if code != 2 || !strings.Contains(out, "--secrets-dir") {
			t.Errorf("ax %s: exit %d, want 2 naming --secrets-dir\n%s", strings.Join(args, " "), code, out)
		}
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Fatalf("ax %s created the store (%v)", strings.Join(args, " "), err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); !os.IsNotExist(err) {
		t.Errorf("a task ran (%v)", err)
	}
}
