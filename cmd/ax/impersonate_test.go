package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// TestImpersonatorCannotTakeAnExecutorsAddress runs a real server with its
// default executor credential (made on first start beside the store, mode
// 0600) and an SDK executor that reads it, with an attempt in flight on
// the executor. A process of the same host registers the executor's
// address under another boot id: without a token, with the admin token,
// and with the executor credential itself (a rogue holder of it). Each is
// refused (401, 401, 409: the executor answers /status with its own boot
// id), the registry is unchanged, and the attempt in flight is neither
// failed as "restarted" nor run twice: it succeeds at attempt 1.
func TestImpersonatorCannotTakeAnExecutorsAddress(t *testing.T) {
	t.Parallel()
	api, exAddr := freeAddr(t), freeAddr(t)
	dir := t.TempDir()
	src := "pipeline: imp\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: job, http: \"http://127.0.0.1:1/dispatch\", timeout: 1m, retry: {count: 2, interval: 1s}}\n"
	if err := os.WriteFile(filepath.Join(dir, "imp.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "ax.db")
	const admin = "admin-secret"
	srv := startServerEnv(t, []string{"AX_ADMIN_TOKEN=" + admin, "AX_EXECUTOR_TOKEN="}, db, dir, "--listen", api)
	st := openStore(t, db)
	started, release := make(chan string, 10), make(chan struct{})
	waitFor(t, func() bool { _, err := os.Stat(tokenFileOf(db)); return err == nil })
	if fi, err := os.Stat(tokenFileOf(db)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("executor credential file: %v %v, want mode 0600", fi.Mode(), err)
	}
	sdkOn(t, exAddr, api, tokenFileOf(db), "job", func(ctx context.Context, a runner.Attempt) error {
		started <- a.Ticket
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, nil)
	waitFor(t, func() bool { exs, _ := st.Executors(context.Background(), "imp.job"); return len(exs) == 1 })
	if code, out, errOut := runAx(t, "trigger", "imp.job", "--store", db); code != cli.ExitOK {
		t.Fatalf("trigger: %d %s %s", code, out, errOut)
	}
	first := <-started
	before, _ := st.Executors(context.Background(), "imp.job")
	tok, err := runner.ReadTokenFile(tokenFileOf(db))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"address": "http://" + exAddr, "protocol": "http", "tasks": []string{"job"}, "boot": "impostor"})
	for _, tc := range []struct {
		name, token string
		code        int
		want        string
	}{
		{"no token", "", 401, "AX_EXECUTOR_TOKEN"},
		{"the admin token", admin, 401, "AX_EXECUTOR_TOKEN"},
		{"the executor credential", tok, 409, "answers there as boot " + before[0].Boot},
	} {
		req, _ := http.NewRequest("POST", "http://"+api+"/api/v1/executors/register", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(out), tc.want) {
			t.Errorf("registration of the executor's address with %s: %d %s; want %d saying %q", tc.name, resp.StatusCode, out, tc.code, tc.want)
		}
		if after, _ := st.Executors(context.Background(), "imp.job"); len(after) != 1 || after[0].Boot != before[0].Boot {
			t.Fatalf("registration with %s changed the registry: %+v, was %+v", tc.name, after, before)
		}
	}
	// Past a sweep of the registry (every 5 s): the attempt is still the
	// first one, running; then it succeeds.
	waitFor(t, func() bool {
		exs, _ := st.Executors(context.Background(), "imp.job")
		return len(exs) == 1 && exs[0].LastHeartbeat.Sub(before[0].LastHeartbeat) > 6e9
	})
	close(release)
	var in axtype.Instance
	waitFor(t, func() bool {
		ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "imp.job"})
		if len(ins) == 1 {
			in = ins[0]
		}
		return in.State == axtype.Success || in.State == axtype.Failed
	})
	if in.State != axtype.Success || in.Attempt != 1 || in.Ticket != first || len(started) != 0 {
		t.Errorf("instance %+v (%d more starts): want success at attempt 1 with ticket %s, run once", in, len(started), first)
	}
	srv.stop(t)
}
