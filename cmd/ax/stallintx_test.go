package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/store"
)

// stopped reports whether process pid is stopped (SIGSTOP).
func stopped(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	return ok && strings.HasPrefix(rest, "T")
}

// TestHAPrimaryStalledInsideWriteTakenOverInTime: a primary on MariaDB or
// PostgreSQL stopped (SIGSTOP) inside a fenced write, after its statements
// and before its commit, holds the fence row's lock; the standby must
// still take over within TTL + a few seconds — it ends the stalled
// holder's connections once the lease has expired — not after the
// server's lock wait timeout or when the holder wakes. Once awake, the old
// primary writes nothing under its epoch and nothing runs twice.
func TestHAPrimaryStalledInsideWriteTakenOverInTime(t *testing.T) {
	t.Parallel()
	eachServer(t, haStalledInsideWrite)
}

func haStalledInsideWrite(t *testing.T, kind string) {
	target := serverTarget(t, kind)
	bin := faultBinary(t)
	dir, record := e2ePipeline(t)
	st := openStore(t, target)
	trigger := filepath.Join(t.TempDir(), "stop-in-tx")
	api := freeAddr(t)
	a := startServerBin(t, bin, []string{"AX_FAULT_STOP_IN_TX=" + trigger}, target, dir, "--holder", "a", "--listen", api)
	waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder == "a" })
	b := startServer(t, target, dir, "--holder", "b")
	waitRuns(t, st, 3)
	old := lease(t, st)
	if err := os.WriteFile(trigger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	armed := time.Now()
	// A manual run is created at once (scheduled ones are claimed ahead in batches).
	asked := make(chan struct{})
	go func() {
		defer close(asked)
		c := &http.Client{Timeout: 30 * time.Second}
		// At a logical time of its own: checkOnce counts executions by logical time.
		body := strings.NewReader(`{"at": "2020-01-01T00:00:00", "reason": "stall test"}`)
		if resp, err := c.Post("http://"+api+"/api/v1/pipelines/e2e/trigger", "application/json", body); err == nil {
			resp.Body.Close()
		}
	}()
	defer func() { <-asked }()
	waitFor(t, func() bool { return stopped(a.cmd.Process.Pid) })
	at := time.Now()
	t.Logf("a stopped itself inside a write %s after the trigger", at.Sub(armed).Round(time.Millisecond))
	// Expiry, then a standby's next try (1 s), a lock wait (1 s), finding and
	// ending the holder's connections (up to 1 s), the retry; and slack for a
	// loaded machine.
	const bound = ttl + 5*time.Second
	took, ok := takeoverWithin(st, old, at, bound)
	_ = a.cmd.Process.Signal(syscall.SIGCONT)
	if !ok {
		t.Fatalf("the standby did not take over within %s of a primary stalled inside a write", bound)
	}
	t.Logf("b took over %s after a stopped inside a write (TTL %s)", took.Round(time.Millisecond), ttl)
	now := lease(t, st)
	logged, _ := os.ReadFile(b.log.Name())
	// Mostly the stalled transaction holds the lease row (b logs the
	// connections it ended); now and then the stop lands after its commit.
	// Either way the takeover is bounded; store.TestAcquireLeaseEndsAStalledHolder
	// checks the ending itself deterministically.
	t.Logf("b ended the stalled holder's connections: %v", strings.Contains(string(logged), "msg=lease_holder_stalled_in_write"))
	waitRuns(t, st, succeeded(t, st)+3)
	h, err := st.History(context.Background(), store.LogFilter{Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range h {
		if r.At.After(at.Add(took)) && r.Epoch != now.Epoch {
			t.Errorf("after the takeover, history row %d (%s %s → %s) was written at epoch %d, not the primary's %d", r.ID, r.TaskID, r.From, r.To, r.Epoch, now.Epoch)
		}
	}
	settleRuns(t, st)
	a.stop(t)
	b.stop(t)
	checkOnce(t, st, record)
}
