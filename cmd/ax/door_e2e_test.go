package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// 5,000 idle connections to a real ax server neither stop a scheduled
// command from running nor keep an API call out.
func TestIdleConnectionsDoNotStopTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("a real server and 5,000 connections")
	}
	dir, record := e2ePipeline(t)
	target := "sqlite:" + filepath.Join(t.TempDir(), "ax.db")
	addr := freeAddr(t)
	srv := startServer(t, target, dir, "--listen", addr)
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 5000 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("after %d idle connections: %v", len(idle), err)
		}
		idle = append(idle, c)
	}
	before, _ := os.ReadFile(record)
	time.Sleep(3 * time.Second) // the e2e pipeline fires every second
	after, _ := os.ReadFile(record)
	if len(after) <= len(before) {
		t.Errorf("no scheduled command ran behind 5,000 idle connections (%d bytes recorded before, %d after)", len(before), len(after))
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + addr + "/api/v1/status")
	if err != nil {
		t.Fatalf("API call behind 5,000 idle connections: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("API call: %d", resp.StatusCode)
	}
	srv.stop(t)
}

// SIGTERM with a command running: after --shutdown-grace the command is
// stopped and given back, RETRYING without using an attempt, reason
// "interrupted by shutdown" — not FAILED.
func TestSIGTERMGivesRunningCommandsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("a real server")
	}
	dir := t.TempDir()
	fire := time.Now().Add(4 * time.Second).Truncate(time.Second)
	pidFile := filepath.Join(dir, "pid")
	// stubborn ignores SIGTERM: the runner kills it 5 s later, and it is
	// given back all the same (it was left RUNNING, abandoned, and then
	// counted as an unknown outcome).
	src := fmt.Sprintf("pipeline: slow\ntimezone: UTC\nschedule: \"%d %d %d %d %d *\"\ntasks:\n  - {name: sleep, command: [\"sh\", \"-c\", \"echo $$ > %s; exec sleep 60\"], timeout: 5m, retry: {count: 2, interval: 1s}}\n  - {name: stubborn, command: [\"sh\", \"-c\", \"trap '' TERM; sleep 60\"], timeout: 5m, retry: {count: 2, interval: 1s}}\n",
		fire.UTC().Second(), fire.UTC().Minute(), fire.UTC().Hour(), fire.UTC().Day(), int(fire.UTC().Month()), pidFile)
	if err := os.WriteFile(filepath.Join(dir, "slow.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	target := "sqlite:" + filepath.Join(t.TempDir(), "ax.db")
	st := openStore(t, target)
	srv := startServer(t, target, dir, "--shutdown-grace", "3s")
	ctx := context.Background()
	var in axtype.Instance
	waitForWithin(t, 30*time.Second, func() bool {
		ins, err := st.Instances(ctx, store.InstanceFilter{TaskID: "slow.sleep", States: []axtype.State{axtype.Running}, Limit: 1})
		if err == nil && len(ins) == 1 && time.Now().After(ins[0].StartedAt.Add(500*time.Millisecond)) {
			in = ins[0]
			return true
		}
		return false
	})
	b, err := os.ReadFile(pidFile)
	pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || perr != nil {
		t.Fatalf("the command's pid: %q %v %v", b, err, perr)
	}
	start := time.Now()
	_ = srv.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- srv.cmd.Wait() }()
	// The lease is released at once, while the command still has its
	// grace: a standby would take over now, not at the end of the grace.
	for released := false; !released; {
		select {
		case err := <-exited:
			t.Fatalf("the server exited (%v) %s after SIGTERM without releasing its lease first: %+v", err, time.Since(start), lease(t, st))
		case <-time.After(20 * time.Millisecond):
			released = !lease(t, st).ExpiresAt.After(time.Now())
		}
	}
	if err := <-exited; err != nil {
		t.Errorf("server exit: %v", err)
	}
	if took := time.Since(start); took > 20*time.Second { // 3 s grace, 5 s from SIGTERM to SIGKILL, and room
		t.Errorf("shutdown took %s with a 3 s grace", took)
	}
	// The command was stopped, not left running with nobody tracking it
	// (once the server is gone, init reaps what it had not).
	for deadline := time.Now().Add(5 * time.Second); !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command (pid %d) still exists 5 s after the shutdown", pid)
		}
	}
	got, err := st.Instance(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != axtype.Retrying || got.Attempt != 1 || got.Counted != 0 || !strings.Contains(got.Error, "interrupted by shutdown") {
		t.Errorf("after SIGTERM: %s attempt %d counted %d %q; want RETRYING after attempt 1, not counted, interrupted by shutdown", got.State, got.Attempt, got.Counted, got.Error)
	}
	stubborn, err := st.Instances(ctx, store.InstanceFilter{TaskID: "slow.stubborn", Limit: 1})
	if err != nil || len(stubborn) != 1 {
		t.Fatalf("slow.stubborn: %+v %v", stubborn, err)
	}
	if s := stubborn[0]; s.State != axtype.Retrying || s.Attempt != 1 || s.Counted != 0 || !strings.Contains(s.Error, "interrupted by shutdown") {
		t.Errorf("a command ignoring SIGTERM after SIGTERM: %s attempt %d counted %d %q; want RETRYING after attempt 1, not counted, interrupted by shutdown", s.State, s.Attempt, s.Counted, s.Error)
	}
}

// TestAdvertisedHostIsServed: on a loopback listener the door refuses a
// Host that is not a name of the server (DNS rebinding), but the host of
// --advertise-url is one: executors and browsers call the server by it.
// Other names are still refused, and so is a page of another origin.
func TestAdvertisedHostIsServed(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	advertised := "ax.internal:" + port
	target := "sqlite:" + filepath.Join(t.TempDir(), "ax.db")
	startServer(t, target, "../../examples", "--listen", addr, "--advertise-url", "http://"+advertised)
	call := func(method, host, origin string) (int, string) {
		req, err := http.NewRequest(method, "http://"+addr+"/api/v1/status", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, func() bool { code, _ := call("GET", addr, ""); return code == 200 })
	for _, tc := range []struct {
		host, origin string
		code         int
		want         string
	}{
		{advertised, "", 200, `"role"`},
		{advertised, "http://" + advertised, 200, `"role"`},
		{"ax.internal", "", 200, `"role"`},
		{"evil.example:" + port, "", 403, "refused against DNS rebinding"},
		{advertised, "http://evil.example", 403, "Origin"},
	} {
		if code, body := call("GET", tc.host, tc.origin); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("Host %s, Origin %q: %d %s; want %d with %q", tc.host, tc.origin, code, body, tc.code, tc.want)
		}
	}
}
