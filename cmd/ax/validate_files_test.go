package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/cli"
)

// axUntil runs the ax binary with args; still running after d, it gets
// SIGTERM, and still running 5 s later it is killed and the test fails.
func axUntil(t *testing.T, d time.Duration, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(axBinary, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode(), out.String()
	case <-time.After(d):
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		t.Errorf("ax %s: still running after %s; it stopped on SIGTERM (exit %d)", strings.Join(args, " "), d, cmd.ProcessState.ExitCode())
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("ax %s: still running after %s and 5 s after SIGTERM: killed", strings.Join(args, " "), d)
	}
	return -1, out.String()
}

// ax validate (and the server's loading, through the same defs.ReadFile)
// reads only regular files, at most defs.MaxFileSize bytes each: a FIFO
// named *.yaml or a link to a device is refused at once with a clear error,
// so is a file too large, and a valid file beside them is still checked.
func TestValidateReadsOnlyRegularFiles(t *testing.T) {
	t.Parallel()
	good := "pipeline: p\ntimezone: UTC\ntasks:\n  - {name: a, function: noop}\n"
	for _, tc := range []struct {
		name, want string
		make       func(path string) error
	}{
		{"fifo", "not a regular file (a named pipe)", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"device", "not a regular file (a character device)", func(p string) error { return os.Symlink("/dev/zero", p) }},
		{"large", "larger than 16 MiB", func(p string) error {
			return os.WriteFile(p, append([]byte("# "), bytes.Repeat([]byte("x"), 17<<20)...), 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "good.yaml"), []byte(good), 0o644); err != nil {
				t.Fatal(err)
			}
			bad := filepath.Join(dir, "bad.yaml")
			if err := tc.make(bad); err != nil {
				t.Fatal(err)
			}
			for _, arg := range []string{dir, bad} {
				code, out := axUntil(t, 10*time.Second, "validate", arg)
				if code != cli.ExitFailed || !strings.Contains(out, bad+":1:1: cannot read file: "+tc.want) {
					t.Errorf("ax validate %s: exit %d, want %d and %q:\n%s", arg, code, cli.ExitFailed, tc.want, out)
				}
			}
		})
	}
}
