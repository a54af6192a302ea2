package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMakeRunRefusesBusyPorts runs scripts/run.sh (what make run runs) as a
// newcomer would trip on it: a busy server port or a busy executor port
// (PORT+1010), a port that is no number or out of range, a server that
// cannot start. Each ends with a message that says what to do, and nothing
// is left half-started: no executor ran, no store was created.
func TestMakeRunRefusesBusyPorts(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("../../scripts/run.sh")
	if err != nil {
		t.Fatal(err)
	}
	// hold finds a free port p whose p+offset is free too and in 1..64525,
	// and listens on p (until the test ends) when keep is set.
	hold := func(t *testing.T, offset int, keep bool) (p, other int) {
		t.Helper()
		for range 50 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			p := l.Addr().(*net.TCPAddr).Port
			if o := p + offset; o >= 1 && o <= 64525 {
				if c, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(o)); err == nil {
					c.Close()
					if keep {
						t.Cleanup(func() { l.Close() })
					} else {
						l.Close()
					}
					return p, o
				}
			}
			l.Close()
		}
		t.Fatalf("no free port with a free one %d away", offset)
		return 0, 0
	}
	run := func(t *testing.T, env ...string) (dir string, code int, out string) {
		t.Helper()
		dir = t.TempDir()
		write(t, filepath.Join(dir, "p.yaml"), "pipeline: p\ntimezone: UTC\ntasks:\n  - {name: x, function: noop}\n")
		// The executor only leaves a mark: it must never start here.
		write(t, filepath.Join(dir, "executor"), "#!/bin/sh\ntouch \""+filepath.Join(dir, "executor-started")+"\"\nexec sleep 60\n")
		if err := os.Chmod(filepath.Join(dir, "executor"), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", script)
		cmd.Env = append(os.Environ(), append([]string{"BIN=" + axBinary, "EXECUTOR=" + filepath.Join(dir, "executor"),
			"STORE=" + filepath.Join(dir, "ax.db"), "PIPELINES=" + dir, "EXECUTOR_PORT="}, env...)...)
		b, err := cmd.CombinedOutput()
		code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return dir, code, string(b)
	}
	nothingStarted := func(t *testing.T, dir string) {
		t.Helper()
		if _, err := os.Stat(filepath.Join(dir, "executor-started")); err == nil {
			t.Error("the example executor was started")
		}
	}
	noStore := func(t *testing.T, dir string) {
		t.Helper()
		if _, err := os.Stat(filepath.Join(dir, "ax.db")); err == nil {
			t.Error("the server was started: its store exists")
		}
	}

	t.Run("server port busy", func(t *testing.T) {
		t.Parallel()
		p, _ := hold(t, 1010, true)
		dir, code, out := run(t, fmt.Sprintf("PORT=%d", p))
		want := fmt.Sprintf("make run: port %d on 127.0.0.1, needed by ax server (PORT), is busy", p)
		if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "nothing was started") || !strings.Contains(out, fmt.Sprintf("make run PORT=%d", p+1)) {
			t.Errorf("exit %d, output:\n%s\nwant exit 1 and %q, nothing was started, another PORT to try", code, out, want)
		}
		nothingStarted(t, dir)
		noStore(t, dir)
	})
	t.Run("executor port busy", func(t *testing.T) {
		t.Parallel()
		held, other := hold(t, -1010, true)
		dir, code, out := run(t, fmt.Sprintf("PORT=%d", other))
		want := fmt.Sprintf("make run: port %d on 127.0.0.1, needed by the example executor (PORT+1010), is busy", held)
		if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "nothing was started") {
			t.Errorf("exit %d, output:\n%s\nwant exit 1 and %q", code, out, want)
		}
		nothingStarted(t, dir)
		noStore(t, dir)
	})
	for _, tc := range []struct{ port, want string }{
		{"80a", "make run: PORT=80a is not a port number (use, for example, make run PORT=8081)"},
		{"64600", "make run: PORT=64600 is out of range: use 1..64525 (the example executor takes PORT+1010)"},
	} {
		t.Run("PORT="+tc.port, func(t *testing.T) {
			t.Parallel()
			dir, code, out := run(t, "PORT="+tc.port)
			if code != 2 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, output:\n%s\nwant exit 2 and %q", code, out, tc.want)
			}
			nothingStarted(t, dir)
			noStore(t, dir)
		})
	}
	t.Run("server cannot start", func(t *testing.T) {
		t.Parallel()
		free, _ := hold(t, 1010, false)
		dir := t.TempDir()
		bad := filepath.Join(dir, "not-a-store.db")
		write(t, bad, "this is not a database\n")
		dir2, code, out := run(t, fmt.Sprintf("PORT=%d", free), "STORE="+bad)
		if code == 0 || !strings.Contains(out, "make run: ax server did not start (its message is above); the example executor was not started.") {
			t.Errorf("exit %d, output:\n%s\nwant a failure saying the executor was not started", code, out)
		}
		nothingStarted(t, dir2)
	})
}

// TestMakeRunNamesItsZones: make run says, beside the console's address,
// the zone each pipeline schedules in, and that a file naming none takes
// the default, Asia/Shanghai.
func TestMakeRunNamesItsZones(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("../../scripts/run.sh")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if port > 64525 {
		t.Skipf("port %d leaves no room for the executor's", port)
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "p.yaml"), "pipeline: p\ntimezone: UTC\ntasks:\n  - {name: x, function: noop}\n")
	write(t, filepath.Join(dir, "q.yaml"), "pipeline: q\ntasks:\n  - {name: x, function: noop}\n")
	// The executor ends at once: make run stops the server and ends too.
	write(t, filepath.Join(dir, "executor"), "#!/bin/sh\nexit 0\n")
	if err := os.Chmod(filepath.Join(dir, "executor"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "BIN="+axBinary, "EXECUTOR="+filepath.Join(dir, "executor"), "STORE="+filepath.Join(dir, "ax.db"),
		"PIPELINES="+dir, "EXECUTOR_PORT=", fmt.Sprintf("PORT=%d", port))
	b, err := cmd.CombinedOutput()
	out := string(b)
	want := "make run: schedules fire in each pipeline's zone: Asia/Shanghai (q*), UTC (p); * names no timezone: Asia/Shanghai is the default (write timezone: in the file to change it)"
	if err != nil || !strings.Contains(out, "make run: console http://127.0.0.1:") || !strings.Contains(out, want) {
		t.Errorf("make run: %v, output:\n%s\nwant a line %q", err, out, want)
	}
}
