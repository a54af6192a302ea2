package main

import (
	"context"
	"math/rand/v2"
	"slices"

	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// haServers are the database servers the HA tests run on.
var haServers = []string{"mysql", "postgres"}

// serverTarget returns the --store of a new database of the test's own on
// the database server kind ("mysql" or "postgres"); see storetest.
func serverTarget(t *testing.T, kind string) string {
	t.Helper()
	if kind == "postgres" {
		return storetest.PostgresDSN(t)
	}
	return "mysql://" + storetest.MySQLDSN(t)
}

// chaosStore is the database server of make chaos: AX_CHAOS_STORE,
// "mysql" when unset.
func chaosStore() string {
	if k := os.Getenv("AX_CHAOS_STORE"); k != "" {
		return k
	}
	return "mysql"
}

// eachServer runs test as a parallel subtest per database server.
func eachServer(t *testing.T, test func(t *testing.T, kind string)) {
	for _, kind := range haServers {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			test(t, kind)
		})
	}
}

// haPair starts two ax servers, "a" then "b", on one database of server
// kind.
func haPair(t *testing.T, kind string) (target, record string, st *store.Store, servers map[string]*server) {
	t.Helper()
	target = serverTarget(t, kind)
	dir, record := e2ePipeline(t)
	st = openStore(t, target)
	servers = map[string]*server{"a": startServer(t, target, dir, "--holder", "a")}
	waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder == "a" })
	servers["b"] = startServer(t, target, dir, "--holder", "b")
	return target, record, st, servers
}

func lease(t *testing.T, st *store.Store) store.Lease {
	t.Helper()
	l, err := st.GetLease(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func succeeded(t *testing.T, st *store.Store) int {
	t.Helper()
	ins, err := st.Instances(context.Background(), store.InstanceFilter{TaskID: "e2e.finish", States: []axtype.State{axtype.Success}, Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return len(ins)
}

// settleRuns waits, before the servers stop, until every run of e2e at or
// before the newest finished one is over: runs end out of order (a claim
// given back at a takeover runs again after a later run finished), and
// checkOnce judges every run up to the newest finished one. A run still
// open after 2 minutes is an error: lost.
func settleRuns(t *testing.T, st *store.Store) {
	t.Helper()
	if !settledThroughLastFinished(st, 2*time.Minute) {
		t.Error("runs before the newest finished one were still open 2 minutes later")
	}
}

// settledThroughLastFinished waits, at most d, for a moment when no run of
// e2e at or before the newest finished one (e2e.finish SUCCESS) is open:
// the runs checkRuns judges.
func settledThroughLastFinished(st *store.Store, d time.Duration) bool {
	ctx := context.Background()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		fin, err := st.Instances(ctx, store.InstanceFilter{TaskID: "e2e.finish", States: []axtype.State{axtype.Success}, ByLogicalTime: true, Limit: 1})
		if err != nil || len(fin) == 0 {
			continue
		}
		open, err := st.Instances(ctx, store.InstanceFilter{Pipeline: "e2e", LogicalTo: fin[0].LogicalTime, Limit: 1,
			States: []axtype.State{axtype.Waiting, axtype.Scheduled, axtype.Running, axtype.Retrying}})
		if err == nil && len(open) == 0 {
			return true
		}
	}
	return false
}

// takeover waits until a holder other than old holds the lease, and returns
// how long that took.
func takeover(t *testing.T, st *store.Store, old store.Lease, since time.Time) (store.Lease, time.Duration) {
	t.Helper()
	var l store.Lease
	waitFor(t, func() bool { l = lease(t, st); return l.Holder != old.Holder && l.Epoch > old.Epoch })
	return l, time.Since(since)
}

const ttl = 3 * time.Second // the servers' --lease-ttl

func TestHAKillPrimary(t *testing.T) {
	t.Parallel()
	eachServer(t, haKillPrimary)
}

func haKillPrimary(t *testing.T, kind string) {
	_, record, st, servers := haPair(t, kind)
	waitRuns(t, st, 4)
	old := lease(t, st)
	killedAt := time.Now()
	servers[old.Holder].crash(t)
	now, took := takeover(t, st, old, killedAt)
	t.Logf("%s took over from %s in %s (epoch %d → %d)", now.Holder, old.Holder, took, old.Epoch, now.Epoch)
	if took > 2*ttl {
		t.Errorf("takeover took %s, more than 2 × TTL (%s)", took, 2*ttl)
	}
	n := succeeded(t, st)
	waitRuns(t, st, n+4)
	settleRuns(t, st)
	servers[now.Holder].stop(t)
	checkOnce(t, st, record)
	// Nothing the killed primary left RUNNING waited for its timeout: an
	// instance it claimed ahead and never handed out was given back and
	// ran; an attempt it handed out on this host failed at once, its
	// scheduler process (or the command's process group) gone. Before the
	// hand-out was recorded, the instance claimed for the next second
	// failed at its 5 s timeout as an unknown outcome.
	all, err := st.Instances(context.Background(), store.InstanceFilter{Pipeline: "e2e", Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range all {
		if strings.Contains(in.Error, "no result within") {
			t.Errorf("instance %d (%s) waited for its timeout after the kill: %s %q", in.ID, in.TaskID, in.State, in.Error)
		}
	}
}

// TestHAStalledPrimaryCannotWrite stops the primary with SIGSTOP for longer
// than the lease, lets the standby take over, then wakes it: it must not
// dispatch or write — every history row after the takeover carries the new
// epoch — and it stands by again.
func TestHAStalledPrimaryCannotWrite(t *testing.T) {
	t.Parallel()
	eachServer(t, haStalledPrimary)
}

func haStalledPrimary(t *testing.T, kind string) {
	_, record, st, servers := haPair(t, kind)
	waitRuns(t, st, 4)
	old := lease(t, st)
	stalled := servers[old.Holder]
	if err := stalled.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	now, took := takeover(t, st, old, time.Now())
	t.Logf("%s took over from the stalled %s in %s", now.Holder, old.Holder, took)
	waitRuns(t, st, succeeded(t, st)+3)
	if err := stalled.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	woke := time.Now()
	waitRuns(t, st, succeeded(t, st)+4)
	h, err := st.History(context.Background(), store.LogFilter{Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range h {
		if r.At.After(woke.Add(-time.Second)) && r.Epoch != now.Epoch {
			t.Errorf("after waking, history row %d (%s %s → %s) was written at epoch %d, not the primary's %d", r.ID, r.TaskID, r.From, r.To, r.Epoch, now.Epoch)
		}
	}
	logged, _ := os.ReadFile(stalled.log.Name())
	if !strings.Contains(string(logged), "standby_again") {
		t.Error("the woken process did not stand by again")
	}
	if l := lease(t, st); l.Holder != now.Holder || l.Epoch != now.Epoch {
		t.Errorf("lease %+v, want still %s at epoch %d", l, now.Holder, now.Epoch)
	}
	settleRuns(t, st)
	for _, s := range servers {
		s.stop(t)
	}
	checkOnce(t, st, record)
}

// TestHAMariaDBRestart restarts the database under two servers. It runs
// only with AX_TEST_HA_RESTART=1, alone (make test runs it after the rest),
// because it takes the database away from every other test.
func TestHAMariaDBRestart(t *testing.T) {
	if os.Getenv("AX_TEST_HA_RESTART") == "" {
		t.Skip("restarts MariaDB: runs alone, with AX_TEST_HA_RESTART=1 (make test does)")
	}
	haRestart(t, "mysql", dbServer{
		stop:  exec.Command("mariadb-admin", "--protocol=tcp", "-h127.0.0.1", "-uroot", "shutdown"),
		start: exec.Command("start-stop-daemon", "--start", "--oknodo", "--background", "--exec", "/usr/sbin/mariadbd"),
		ping: func() *exec.Cmd {
			return exec.Command("mariadb-admin", "--protocol=tcp", "-h127.0.0.1", "-uroot", "ping")
		},
	})
}

// TestHAPostgresRestart is TestHAMariaDBRestart on PostgreSQL: Debian's
// cluster (pg_ctlcluster), else .ci/run's own under /var/lib/ax-pg.
func TestHAPostgresRestart(t *testing.T) {
	if os.Getenv("AX_TEST_HA_RESTART") == "" {
		t.Skip("restarts PostgreSQL: runs alone, with AX_TEST_HA_RESTART=1 (make test does)")
	}
	stop := exec.Command("su", "postgres", "-c", "pg_ctl -D /var/lib/ax-pg -m fast stop")
	start := exec.Command("su", "postgres", "-c", "pg_ctl -D /var/lib/ax-pg -l /var/lib/ax-pg/log -o '-c listen_addresses=127.0.0.1 -p 5432' start")
	if clusters, _ := filepath.Glob("/etc/postgresql/*/main"); len(clusters) > 0 {
		version := filepath.Base(filepath.Dir(clusters[len(clusters)-1]))
		stop = exec.Command("pg_ctlcluster", version, "main", "stop", "--", "-m", "fast")
		start = exec.Command("pg_ctlcluster", version, "main", "start")
	}
	haRestart(t, "postgres", dbServer{
		stop:  stop,
		start: start,
		ping:  func() *exec.Cmd { return exec.Command("pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432") },
	})
}

// dbServer is how a test stops, starts and pings a database server.
type dbServer struct {
	stop, start *exec.Cmd
	ping        func() *exec.Cmd
}

// haRestart stops the database server under two ax servers for longer
// than the lease and starts it again: both survive, one is primary again,
// and no work ran twice or was lost.
func haRestart(t *testing.T, kind string, db dbServer) {
	_, record, st, servers := haPair(t, kind)
	waitRuns(t, st, 4)
	if out, err := db.stop.CombinedOutput(); err != nil {
		t.Fatalf("stop the %s server: %v %s", kind, err, out)
	}
	waitFor(t, func() bool { return db.ping().Run() != nil })
	time.Sleep(2 * ttl) // the database stays away for longer than the lease
	if out, err := db.start.CombinedOutput(); err != nil {
		t.Fatalf("start the %s server: %v %s", kind, err, out)
	}
	waitFor(t, func() bool { return db.ping().Run() == nil })
	waitFor(t, func() bool { return succeeded(t, st) >= 0 }) // the test's own connection is back
	n := succeeded(t, st)
	waitRuns(t, st, n+4)
	for name, s := range servers {
		if err := s.cmd.Process.Signal(syscall.Signal(0)); err != nil || s.cmd.ProcessState != nil {
			t.Errorf("server %s did not survive the restart: %v", name, err)
		}
	}
	if l := lease(t, st); time.Now().After(l.ExpiresAt) {
		t.Errorf("no primary after the restart: %+v", l)
	}
	settleRuns(t, st)
	for _, s := range servers {
		s.stop(t)
	}
	checkOnce(t, st, record)
}

// TestChaos is `make chaos`: on the database server AX_CHAOS_STORE
// ("mysql", the default, or "postgres"), for AX_CHAOS_DURATION it kills (and restarts)
// or stalls the primary at random, then reports executions, duplicates
// (must be 0), missed logical times (must be 0 beyond policy skips) and
// takeover times. It is not part of make test.
func TestChaos(t *testing.T) {
	d := os.Getenv("AX_CHAOS_DURATION")
	if d == "" {
		t.Skip("set AX_CHAOS_DURATION (make chaos CHAOS=5m)")
	}
	dur, err := time.ParseDuration(d)
	if err != nil {
		t.Fatalf("AX_CHAOS_DURATION: %v", err)
	}
	kind := chaosStore()
	target, record, st, servers := haPair(t, kind)
	dir := strings.TrimSuffix(record, "/executions.txt")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var takeovers []time.Duration
	kills, stalls := 0, 0
	for end := time.Now().Add(dur); time.Now().Before(end); {
		waitRuns(t, st, succeeded(t, st)+1+rng.IntN(4))
		old := lease(t, st)
		victim := servers[old.Holder]
		at := time.Now()
		if rng.IntN(2) == 0 {
			kills++
			victim.crash(t)
			_, took := takeover(t, st, old, at)
			takeovers = append(takeovers, took)
			servers[old.Holder] = startServer(t, target, dir, "--holder", old.Holder)
		} else {
			stalls++
			_ = victim.cmd.Process.Signal(syscall.SIGSTOP)
			_, took := takeover(t, st, old, at)
			takeovers = append(takeovers, took)
			_ = victim.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	settleRuns(t, st)
	for _, s := range servers {
		s.stop(t)
	}
	checkOnce(t, st, record)
	slices.Sort(takeovers)
	if len(takeovers) > 0 {
		t.Logf("chaos for %s on %s: %d kills, %d stalls; takeover p50 %s, max %s; duplicates and missed logical times are errors above (none means 0)",
			dur, kind, kills, stalls, takeovers[len(takeovers)/2].Round(time.Millisecond), takeovers[len(takeovers)-1].Round(time.Millisecond))
	}
}

// TestSQLiteSecondServerStandsBy: a second ax server on the same SQLite file
// does not run as a second primary; it stands by, and takes over when the
// first one stops.
func TestSQLiteSecondServerStandsBy(t *testing.T) {
	t.Parallel()
	db := t.TempDir() + "/ax.db"
	dir, record := e2ePipeline(t)
	st := openStore(t, db)
	a := startServer(t, db, dir, "--holder", "a")
	waitRuns(t, st, 2)
	b := startServer(t, db, dir, "--holder", "b")
	waitFor(t, func() bool { out, _ := os.ReadFile(b.log.Name()); return strings.Contains(string(out), "msg=standby") })
	first := lease(t, st)
	waitRuns(t, st, succeeded(t, st)+2)
	if l := lease(t, st); l.Holder != "a" || l.Epoch != first.Epoch {
		t.Fatalf("lease %+v while a runs", l)
	}
	a.stop(t) // releases the lease
	now, took := takeover(t, st, first, time.Now())
	t.Logf("b took over %s after a stopped", took)
	waitRuns(t, st, succeeded(t, st)+2)
	settleRuns(t, st)
	b.stop(t)
	if now.Holder != "b" {
		t.Errorf("lease %+v", now)
	}
	checkOnce(t, st, record)
}

// TestHABogusLeaseEpoch: a lease row edited by hand to another epoch fails
// the primary's next renewal, and the primary takes the lease again under a
// new epoch (which moves the fence row too); nothing is written under the
// bogus epoch, nothing runs twice.
func TestHABogusLeaseEpoch(t *testing.T) {
	t.Parallel()
	eachServer(t, haBogusLeaseEpoch)
}

func haBogusLeaseEpoch(t *testing.T, kind string) {
	target := serverTarget(t, kind)
	dir, record := e2ePipeline(t)
	st := openStore(t, target)
	srv := startServer(t, target, dir, "--holder", "a")
	waitRuns(t, st, 3)
	if _, err := st.DB().Exec("UPDATE leases SET epoch = 999 WHERE name = 'scheduler'"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return lease(t, st).Epoch > 999 })
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
	logged, _ := os.ReadFile(srv.log.Name())
	if !strings.Contains(string(logged), "lease_retaken") {
		t.Error("the primary did not log taking the lease again")
	}
	checkOnce(t, st, record)
}

func TestServerWrongDSN(t *testing.T) {
	t.Parallel()
	dir, _ := e2ePipeline(t)
	for _, target := range []string{"mysql://root@tcp(127.0.0.1:1)/ax", "postgres://postgres@127.0.0.1:1/ax"} {
		code, _, errOut := runAx(t, "server", "--store", target, "--pipelines", dir)
		if code != cli.ExitFailed || !strings.Contains(errOut, "store: open "+target+": store: database unavailable") {
			t.Errorf("exit %d, %q", code, errOut)
		}
	}
}
