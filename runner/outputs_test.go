package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/ax-sched/ax/defs"
)

// A command's outputs are what it wrote to $AX_OUTPUT: key=value lines or
// one JSON object; the file is removed after.
func TestCommandOutputs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src string
		want      map[string]string
	}{
		{"lines", `printf 'rows=12\n# a comment\n\npath=s3://b/k?a=b\n' > "$AX_OUTPUT"`, map[string]string{"rows": "12", "path": "s3://b/k?a=b"}},
		{"json", `echo '{"rows": 12, "ok": true, "day": "2026-03-01"}' > "$AX_OUTPUT"`, map[string]string{"rows": "12", "ok": "true", "day": "2026-03-01"}},
		{"none", `true`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := script(tc.src, "out", mkdirs(t, "out")).Execute(context.Background(), attempt("tk-o"))
			if err != nil || r.Status != StatusSuccess {
				t.Fatalf("%+v %v", r, err)
			}
			if len(r.Outputs) != len(tc.want) {
				t.Fatalf("outputs %v, want %v", r.Outputs, tc.want)
			}
			for k, v := range tc.want {
				if r.Outputs[k] != v {
					t.Errorf("output %s = %q, want %q", k, r.Outputs[k], v)
				}
			}
		})
	}
}

// mkdirs returns a directory holding the directory sub.
func mkdirs(t *testing.T, sub string) string {
	base := t.TempDir()
	if err := os.Mkdir(filepath.Join(base, sub), 0o755); err != nil {
		t.Fatal(err)
	}
	return base
}

// Bad outputs fail a command that exited 0, with an error that says what
// is wrong, and keep none of them; a failed command's outputs are dropped.
func TestCommandOutputsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src, want string }{
		{"binary", `printf 'rows=1\n\377\376\000\001' > "$AX_OUTPUT"`, "outputs: the file $AX_OUTPUT is not text (it holds a NUL byte or bytes that are not UTF-8)"},
		{"10 MB", `head -c 10485760 /dev/zero | tr '\0' 'a' | sed 's/^/k=/' > "$AX_OUTPUT"`, "outputs: 10485762 bytes, over the cap of 65536 bytes (64 KiB)"},
		{"no =", `printf 'rows=1\njunk\n' > "$AX_OUTPUT"`, "outputs: line 2 of $AX_OUTPUT has no '=': write key=value"},
		{"bad key", `printf 'row s=1\n' > "$AX_OUTPUT"`, `line 1 of $AX_OUTPUT: outputs: key "row s" is not a name`},
		{"json key with newline", `printf '{"a\\nb": "x"}' > "$AX_OUTPUT"`, `outputs: key "a\nb" is not a name`},
		{"json key with =", `printf '{"a=b": "x"}' > "$AX_OUTPUT"`, `outputs: key "a=b" is not a name`},
		{"json list", `printf '{"a": [1]}' > "$AX_OUTPUT"`, `outputs: the value of "a" in $AX_OUTPUT is a list`},
		{"two objects", `printf '{"a": "1"} {}' > "$AX_OUTPUT"`, `outputs: $AX_OUTPUT starts with '{' but is not one JSON object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := script(tc.src, "", "").Execute(context.Background(), attempt("tk-bad"))
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != StatusFailed || r.Outputs != nil || !strings.Contains(r.Error, tc.want) {
				t.Errorf("status %s, outputs %v, error %q; want failed, none kept, %q", r.Status, r.Outputs, r.Error, tc.want)
			}
		})
	}
	r, _ := script(`echo rows=1 > "$AX_OUTPUT"; exit 3`, "", "").Execute(context.Background(), attempt("tk-f"))
	if r.Status != StatusFailed || r.Outputs != nil || !strings.HasPrefix(r.Error, "exit status 3") {
		t.Errorf("failed command: %+v; want its own failure and no outputs", r)
	}
}

// The file of $AX_OUTPUT is gone once the attempt is over.
func TestCommandOutputFileRemoved(t *testing.T) {
	t.Parallel()
	base := mkdirs(t, "w")
	r, err := script(`echo a=1 > "$AX_OUTPUT"; echo "$AX_OUTPUT" > ../name`, "w", base).Execute(context.Background(), attempt("tk-rm"))
	if err != nil || r.Status != StatusSuccess {
		t.Fatalf("%+v %v", r, err)
	}
	name, err := os.ReadFile(filepath.Join(base, "name"))
	if err != nil || len(strings.TrimSpace(string(name))) == 0 {
		t.Fatalf("the command saw no $AX_OUTPUT: %q %v", name, err)
	}
	if _, err := os.Stat(strings.TrimSpace(string(name))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is left behind: %v", name, err)
	}
}

// A function gives outputs with a.Output; a refused one fails the attempt
// even when the function ignores the error, and nothing is kept.
func TestFunctionOutputs(t *testing.T) {
	t.Parallel()
	f := NewFunctions(func(a Attempt) string { return a.Task })
	must(t, f.Register("ok", func(_ context.Context, a Attempt) error {
		_ = a.Output("rows", "1")
		return a.Output("rows", "12") // the last value of a key wins
	}))
	must(t, f.Register("big", func(_ context.Context, a Attempt) error {
		_ = a.Output("a", strings.Repeat("x", 40<<10))
		_ = a.Output("b", strings.Repeat("y", 40<<10)) // ignored error
		return nil
	}))
	must(t, f.Register("badkey", func(_ context.Context, a Attempt) error { return a.Output("a=b", "1") }))
	must(t, f.Register("fails", func(_ context.Context, a Attempt) error {
		_ = a.Output("rows", "1")
		return errors.New("boom")
	}))
	for task, want := range map[string]string{"ok": "", "big": "outputs: 81922 bytes, over the cap of 65536 bytes (64 KiB)",
		"badkey": `outputs: key "a=b" is not a name`, "fails": "boom"} {
		a := attempt("tk-" + task)
		a.Task = task
		r, err := f.Execute(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case want == "" && (r.Status != StatusSuccess || len(r.Outputs) != 1 || r.Outputs["rows"] != "12"):
			t.Errorf("%s: %+v, want success with rows=12", task, r)
		case want != "" && (r.Status != StatusFailed || r.Outputs != nil || !strings.Contains(r.Error, want)):
			t.Errorf("%s: status %s, outputs %v, error %q; want failed, none, %q", task, r.Status, r.Outputs, r.Error, want)
		}
	}
	if err := attempt("x").Output("a", "b"); err == nil || !strings.Contains(err.Error(), "takes no outputs") {
		t.Errorf("Output on an attempt no executor started: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A secret's value is masked in the outputs as in the output lines.
func TestOutputsMaskSecrets(t *testing.T) {
	t.Parallel()
	secrets, spec := envSetup(t)
	r, err := NewEnvExecutor(script(`echo "dsn=user:$DB_PASSWORD@db" > "$AX_OUTPUT"`, "", ""), func(Attempt) (EnvSpec, error) { return spec, nil }, secrets).
		Execute(context.Background(), attempt("tk-m"))
	if err != nil || r.Status != StatusSuccess {
		t.Fatalf("%+v %v", r, err)
	}
	if r.Outputs["dsn"] != "user:***@db" {
		t.Errorf("output dsn = %q, want the secret masked", r.Outputs["dsn"])
	}
	rep := MaskReport(Report{Outputs: map[string]string{"dsn": "x" + testSecret}}, testSecret)
	if rep.Outputs["dsn"] != "x***" {
		t.Errorf("a posted report's outputs: %q, want masked", rep.Outputs["dsn"])
	}
}

// An HTTP executor's outputs come in its report; bad ones fail the attempt.
func TestReportOutputs(t *testing.T) {
	t.Parallel()
	r := Report{Ticket: "t", Status: StatusSuccess, Outputs: map[string]string{"rows": "3"}}.Result()
	if r.Status != StatusSuccess || r.Outputs["rows"] != "3" {
		t.Errorf("%+v", r)
	}
	r = Report{Ticket: "t", Status: StatusSuccess, Outputs: map[string]string{"bad key": "3"}}.Result()
	if r.Status != StatusFailed || r.Outputs != nil || !strings.Contains(r.Error, `outputs: key "bad key" is not a name`) {
		t.Errorf("bad key: %+v", r)
	}
	r = Report{Ticket: "t", Status: StatusSuccess, Outputs: map[string]string{"v": "\x00"}}.Result()
	if r.Status != StatusFailed || !strings.Contains(r.Error, "outputs: the value of v is not text") {
		t.Errorf("NUL value: %+v", r)
	}
}

// Templates read the upstreams' outputs; a key the upstream did not give
// fails the attempt naming it.
func TestTemplatesReadUpstream(t *testing.T) {
	t.Parallel()
	c := commands("echo", "{{ .Upstream.extract.rows }}")
	a := attempt("tk-u")
	a.Upstream = map[string]map[string]string{"extract": {"rows": "12"}}
	r, err := c.Execute(context.Background(), a)
	if err != nil || r.Status != StatusSuccess || r.Argv[1] != "12" {
		t.Fatalf("%+v %v", r, err)
	}
	a.Upstream = map[string]map[string]string{"extract": {}}
	r, _ = c.Execute(context.Background(), a)
	const want = `map has no entry for key "rows": upstream extract gave no output "rows" in this run (it succeeded without writing it, or was marked success by hand with ax mark, which gives no outputs): rerun extract, or have it write rows`
	if r.Status != StatusFailed || !strings.HasSuffix(r.Error, want) {
		t.Errorf("missing key: %+v", r)
	}
}

// An output whose key holds a secret's value fails the attempt: keys are
// stored and shown in clear. The error names the rule with the key masked,
// and no output is kept; from a command, a function, or a posted report.
func TestOutputKeyHoldingASecretIsRefused(t *testing.T) {
	t.Parallel()
	const secret = "Sup3rS3cretValue42"
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "s"), []byte(secret), 0o600))
	spec := EnvSpec{Vars: []defs.EnvVar{{Name: "S", Secret: &defs.SecretRef{Provider: defs.SecretFile, Name: "s"}}}}
	specOf := func(Attempt) (EnvSpec, error) { return spec, nil }
	f := NewFunctions(func(a Attempt) string { return a.Task })
	must(t, f.Register("fn", func(_ context.Context, a Attempt) error { return a.Output("k_"+a.Env["S"], "2") }))
	const want = `outputs: key "***" holds the value of a secret`
	for name, x := range map[string]Executor{
		"command":  NewEnvExecutor(script(`echo "$S=2" >> "$AX_OUTPUT"`, "", ""), specOf, NewSecrets(dir)),
		"function": NewEnvExecutor(f, specOf, NewSecrets(dir)),
	} {
		a := attempt("tk-" + name)
		a.Task = "fn"
		r, err := x.Execute(context.Background(), a)
		if err != nil || r.Status != StatusFailed || r.Outputs != nil || !strings.Contains(r.Error, `outputs: key "`) ||
			!strings.Contains(r.Error, "holds the value of a secret") || strings.Contains(r.Error, secret) {
			t.Errorf("%s: %+v %v, want failed with %q and no outputs", name, r, err, want)
		}
	}
	rep := MaskReport(Report{Status: StatusSuccess, Outputs: map[string]string{secret: "2"}}, secret)
	if rep.Status != StatusFailed || rep.Outputs != nil || !strings.HasPrefix(rep.Error, want) {
		t.Errorf("a posted report: %+v, want failed with %q", rep, want)
	}
}

// A task that replaces its $AX_OUTPUT with something other than a regular
// file fails with an error that says so, at once (a named pipe is not
// waited on, a link not followed), and what it left there is removed.
func TestCommandOutputFileMustStayRegular(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src, want string }{
		{"fifo", `rm "$AX_OUTPUT"; mkfifo "$AX_OUTPUT"`, "outputs: $AX_OUTPUT was replaced by a named pipe (FIFO): write key=value lines into the file it names"},
		{"symlink", `rm "$AX_OUTPUT"; echo rows=1 > ../target; ln -s "$PWD/../target" "$AX_OUTPUT"`, "outputs: $AX_OUTPUT was replaced by a symbolic link"},
		{"directory", `rm "$AX_OUTPUT"; mkdir "$AX_OUTPUT"`, "outputs: $AX_OUTPUT was replaced by a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := mkdirs(t, "w")
			done := make(chan Result, 1)
			go func() {
				r, _ := script(tc.src+`; echo "$AX_OUTPUT" > ../name`, "w", base).Execute(context.Background(), attempt("tk-"+tc.name))
				done <- r
			}()
			var r Result
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the attempt is still running 20 s after its command exited")
			}
			if r.Status != StatusFailed || r.Outputs != nil || !strings.HasPrefix(r.Error, tc.want) {
				t.Errorf("status %s, outputs %v, error %q; want failed, none kept, %q", r.Status, r.Outputs, r.Error, tc.want)
			}
			name, err := os.ReadFile(filepath.Join(base, "name"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(strings.TrimSpace(string(name))); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s is left behind: %v", name, err)
			}
		})
	}
}

// The $AX_OUTPUT files of a process that is gone (a scheduler killed with
// attempts running) are removed; those of live processes, and files not
// named so, are left.
func TestSweepOutputFilesOfEndedProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]bool{ // name: removed
		"ax-output-4242-123": true, "ax-output-4343-9": false, "ax-output-77": false, "ax-output-x-1": false, "other-4242-1": false,
	}
	for name := range files {
		must(t, os.WriteFile(filepath.Join(dir, name), nil, 0o600))
	}
	must(t, syscall.Mkfifo(filepath.Join(dir, "ax-output-4242-fifo"), 0o600))
	files["ax-output-4242-fifo"] = true
	sweepOutputFiles(dir, func(pid int) bool { return pid == 4343 })
	for name, removed := range files {
		_, err := os.Lstat(filepath.Join(dir, name))
		if gone := errors.Is(err, os.ErrNotExist); gone != removed {
			t.Errorf("%s: removed %v, want %v (%v)", name, gone, removed, err)
		}
	}
}

// An env value reading an output its upstream did not give names the
// upstream and the key, as a command argument does.
func TestEnvTemplateNamesAMissingUpstreamOutput(t *testing.T) {
	t.Parallel()
	const v = "{{ .Upstream.extract.rows }}"
	spec := EnvSpec{Vars: []defs.EnvVar{{Name: "ROWS", Value: v, Template: template.Must(template.New("").Option("missingkey=error").Parse(v))}}}
	a := attempt("tk-ue")
	a.Upstream = map[string]map[string]string{"extract": {}}
	_, _, err := ResolveEnv(context.Background(), spec, a, nil)
	const want = `upstream extract gave no output "rows" in this run (it succeeded without writing it, or was marked success by hand with ax mark`
	if err == nil || !strings.HasPrefix(err.Error(), `env ROWS "{{ .Upstream.extract.rows }}": template:`) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want the variable, then %q", err, want)
	}
}
