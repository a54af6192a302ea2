package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

var faultBin struct {
	once sync.Once
	path string
	err  error
}

// faultBinary builds, once for the test binary, ax with the axfault tag
// (fault_axfault.go): a server whose store fails or stalls its writes when
// its environment asks.
func faultBinary(t *testing.T) string {
	t.Helper()
	faultBin.once.Do(func() {
		faultBin.path = filepath.Join(filepath.Dir(axBinary), "ax-fault")
		if out, err := exec.Command("go", "build", "-tags", "axfault", "-o", faultBin.path, ".").CombinedOutput(); err != nil {
			faultBin.err = fmt.Errorf("build ax with the fault hook: %v\n%s", err, out)
		}
	})
	if faultBin.err != nil {
		t.Fatal(faultBin.err)
	}
	return faultBin.path
}

// exited reports whether process pid has ended (gone, or a zombie its
// parent has not collected).
func exited(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	return !ok || strings.HasPrefix(rest, "Z") || strings.HasPrefix(rest, "X")
}

// readyz asks a server's /readyz: its status code and answer.
func readyz(addr string) (int, api.Ready) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, api.Ready{Error: err.Error()}
	}
	defer resp.Body.Close()
	var r api.Ready
	_ = json.NewDecoder(resp.Body).Decode(&r)
	return resp.StatusCode, r
}

// logLines is how many lines of a server's log hold every one of words.
func logLines(s *server, words ...string) int {
	out, _ := os.ReadFile(s.log.Name())
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			n++
		}
	}
	return n
}

// TestStandbyMeetsTooManyConnections: a standby on MariaDB (PostgreSQL)
// whose every write fails with the driver's error 1040 (53300: too many
// connections, injected through the axfault build: the server's
// max_connections is shared) keeps trying with backoff once the primary is
// killed, stays up, and takes over when its writes succeed again; nothing
// runs twice. Before 1040 was read as unavailable, the standby exited at
// its first request.
func TestStandbyMeetsTooManyConnections(t *testing.T) {
	t.Parallel()
	eachServer(t, standbyMeetsTooManyConnections)
}

func standbyMeetsTooManyConnections(t *testing.T, kind string) {
	code := map[string]string{"mysql": "1040", "postgres": "53300"}[kind]
	target := serverTarget(t, kind)
	bin := faultBinary(t)
	dir, record := e2ePipeline(t)
	st := openStore(t, target)
	a := startServer(t, target, dir, "--holder", "a")
	waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder == "a" })
	fail := filepath.Join(t.TempDir(), "fail-writes")
	if err := os.WriteFile(fail, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b := startServerBin(t, bin, []string{"AX_FAULT_FAIL_WRITES=" + fail, "AX_FAULT_ERROR=" + code}, target, dir, "--holder", "b")
	waitRuns(t, st, 2)
	old := lease(t, st)
	a.crash(t)
	before := succeeded(t, st)
	// Once a's lease has expired, b's writes fail with code: on a server
	// the lease's own writes go through a connection of their own, so b
	// takes the lease, its term's start fails, and it stands by again.
	waitForWithin(t, 20*time.Second, func() bool { return logLines(b, code) >= 3 || exited(b.cmd.Process.Pid) })
	if exited(b.cmd.Process.Pid) {
		t.Fatalf("the standby exited on error %s", code)
	}
	if n := succeeded(t, st); n != before {
		t.Errorf("%d runs succeeded while the only server left could not write", n-before)
	}
	if err := os.Remove(fail); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	waitRuns(t, st, before+2)
	if l := lease(t, st); l.Holder != "b" || l.Epoch <= old.Epoch {
		t.Errorf("runs go on, and the lease is %+v: want b's, after epoch %d", l, old.Epoch)
	}
	t.Logf("b ran 2 runs %s after its writes succeeded again", time.Since(freed).Round(time.Millisecond))
	settleRuns(t, st)
	b.stop(t)
	checkOnce(t, st, record)
}

// TestPrimaryThatCannotWriteStepsDown: on one SQLite file, primary a (the
// axfault build) renews its lease but every other write fails as with a
// full disk; it answers /readyz 503 with the reason, gives its lease up
// after three failed turns over a TTL, and standby b takes over and runs
// the schedule; a stays up, standing by, and its /readyz still says why.
// Before, a kept the lease and nothing ran while its turns failed.
func TestPrimaryThatCannotWriteStepsDown(t *testing.T) {
	t.Parallel()
	bin := faultBinary(t)
	dir, record := e2ePipeline(t)
	db := filepath.Join(t.TempDir(), "ax.db")
	fail := filepath.Join(t.TempDir(), "fail-writes")
	apiA := freeAddr(t)
	a := startServerBin(t, bin, []string{"AX_FAULT_FAIL_WRITES=" + fail, "AX_FAULT_SPARE_LEASE=1"}, db, dir, "--holder", "a", "--listen", apiA)
	st := openStore(t, db)
	waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder == "a" })
	b := startServer(t, db, dir, "--holder", "b")
	waitRuns(t, st, 2)
	old := lease(t, st)
	if err := os.WriteFile(fail, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	failed := time.Now()
	var code int
	var r api.Ready
	waitForWithin(t, 10*time.Second, func() bool { code, r = readyz(apiA); return code == http.StatusServiceUnavailable })
	if !strings.Contains(r.Error, "disk is full") {
		t.Errorf("/readyz of the primary that cannot write: %d %+v, want the disk-full error", code, r)
	}
	now, took := takeover(t, st, old, failed)
	t.Logf("%s took over %s after a's writes began to fail", now.Holder, took.Round(time.Millisecond))
	if now.Holder != "b" || took > 15*time.Second {
		t.Errorf("%s took over %s after a's writes began to fail, want b within 15 s (three failed turns over a 3 s TTL)", now.Holder, took)
	}
	if exited(a.cmd.Process.Pid) {
		t.Fatal("the primary that gave up its lease exited; it must stand by")
	}
	if code, r := readyz(apiA); code != http.StatusServiceUnavailable || r.Role != "standby" || !strings.Contains(r.Error, "disk is full") {
		t.Errorf("/readyz of a after it gave up: %d %+v, want 503, standby, the disk-full error", code, r)
	}
	if logLines(a, "lease_given_up") == 0 {
		t.Error("a did not log lease_given_up")
	}
	waitRuns(t, st, succeeded(t, st)+2)
	settleRuns(t, st)
	b.stop(t)
	a.stop(t)
	checkOnce(t, st, record)
}

// TestReadyzWhileTheDiskIsFull: a server on SQLite in a small filesystem
// (a 64 MB tmpfs: the test needs to mount one, and skips where it cannot)
// answers /readyz 503 with the store's disk-full error while the disk is
// full, and 200 again once space is freed.
func TestReadyzWhileTheDiskIsFull(t *testing.T) {
	t.Parallel()
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", mnt, err, out)
		}
	})
	dir, _ := e2ePipeline(t)
	db := filepath.Join(mnt, "ax.db")
	addr := freeAddr(t)
	srv := startServer(t, db, dir, "--listen", addr)
	st := openStore(t, db)
	waitRuns(t, st, 2)
	if code, r := readyz(addr); code != http.StatusOK {
		t.Fatalf("/readyz before the disk is full: %d %+v", code, r)
	}
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 64<<10); ; {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill the disk: %v", err)
			}
			break
		}
	}
	f.Close()
	var code int
	var r api.Ready
	waitForWithin(t, 10*time.Second, func() bool { code, r = readyz(addr); return code == http.StatusServiceUnavailable })
	t.Logf("/readyz with the disk full: %d %+v", code, r)
	if !strings.Contains(r.Error, "full") {
		t.Errorf("/readyz with the disk full: %d %+v, want the store's disk-full error", code, r)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitForWithin(t, 20*time.Second, func() bool { code, r = readyz(addr); return code == http.StatusOK })
	srv.stop(t)
}

// TestHABogusLeaseEpochWhileWritesFail is TestHABogusLeaseEpoch with the
// writes of the retaken term's start failing (the axfault build, the
// lease's own writes spared), as a database under load fails some: the
// primary takes the lease again under a new epoch, its start fails
// (takeover_failed), and once writes succeed it starts again and runs the
// schedule, nothing written under the bogus epoch, nothing run twice. This
// is the cause of TestHABogusLeaseEpoch's failures under a loaded MariaDB:
// a retake whose start failed was left to the window's top-up, which does
// not rebuild what the start emptied, and the primary stayed idle after
// lease_retaken (engine.finishRetake; in-process:
// TestRetakenTermStartsAgainAfterAFailedStart).
func TestHABogusLeaseEpochWhileWritesFail(t *testing.T) {
	t.Parallel()
	target := "mysql://" + storetest.MySQLDSN(t)
	bin := faultBinary(t)
	dir, record := e2ePipeline(t)
	st := openStore(t, target)
	fail := filepath.Join(t.TempDir(), "fail-writes")
	srv := startServerBin(t, bin, []string{"AX_FAULT_FAIL_WRITES=" + fail, "AX_FAULT_SPARE_LEASE=1"}, target, dir, "--holder", "a")
	waitRuns(t, st, 2)
	if err := os.WriteFile(fail, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec("UPDATE leases SET epoch = 999 WHERE name = 'scheduler'"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return lease(t, st).Epoch > 999 })
	waitForWithin(t, 20*time.Second, func() bool { return logLines(srv, "takeover_failed") > 0 })
	if err := os.Remove(fail); err != nil {
		t.Fatal(err)
	}
	waitRuns(t, st, succeeded(t, st)+3)
	srv.stop(t)
	h, err := st.History(context.Background(), store.LogFilter{Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range h {
		if r.Epoch == 999 {
			t.Fatalf("a write was made under the bogus epoch: %+v", r)
		}
	}
	checkOnce(t, st, record)
}
