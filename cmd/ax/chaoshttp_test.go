package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// executorProc is an SDK executor in its own process (examples/executor).
type executorProc struct {
	cmd   *exec.Cmd
	addr  string
	state string
}

// executorLogs are the logs of every executor process started.
var executorLogs []string

// startExecutor starts it on addr with its ticket journal in state (the
// same dir again when it restarts on addr).
func startExecutor(t *testing.T, bin, addr, schedulers, record, state string) *executorProc {
	t.Helper()
	log, err := os.CreateTemp(t.TempDir(), "executor-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-listen", addr, "-scheduler", schedulers, "-task", "record", "-record", record, "-work", "200ms", "-state", state)
	cmd.Stdout, cmd.Stderr = log, log
	executorLogs = append(executorLogs, log.Name())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &executorProc{cmd: cmd, addr: addr, state: state}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// TestChaosHTTP is make chaos's HTTP-executor mode: two servers on MySQL
// and two SDK executors in their own processes run a pipeline whose middle
// task is served over HTTP and records each execution; the primary is
// killed or stalled and executors are killed and restarted at random. It
// prints duplicate executions (must be 0), logical times lost (0 beyond
// policy skips), unknown outcomes of the HTTP task (must be 0) and takeover
// times. AX_CHAOS_DURATION sets its length (make test: 30s; make chaos
// CHAOS=5m AX_CHAOS_MODE=http).
func TestChaosHTTP(t *testing.T) {
	d := os.Getenv("AX_CHAOS_DURATION")
	if d == "" || os.Getenv("AX_CHAOS_MODE") != "http" {
		t.Skip("set AX_CHAOS_DURATION and AX_CHAOS_MODE=http (make chaos CHAOS=5m MODE=http)")
	}
	dur, err := time.ParseDuration(d)
	if err != nil {
		t.Fatalf("AX_CHAOS_DURATION: %v", err)
	}
	target := "mysql://" + storetest.MySQLDSN(t)
	bin := filepath.Join(t.TempDir(), "executor")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/executor").CombinedOutput(); err != nil {
		t.Fatalf("build the example executor: %v\n%s", err, out)
	}
	dir := t.TempDir()
	record := filepath.Join(dir, "executions.txt")
	src := `pipeline: e2e
timezone: UTC
schedule: "@every 1s"
overlap: wait
defaults: {timeout: 8s, retry: {count: 5, interval: 1s}}
tasks:
  - {name: extract, function: noop}
  - {name: record, depends_on: [extract], http: "http://127.0.0.1:1/dispatch"}
  - {name: finish, depends_on: [record], function: noop}
`
	if err := os.WriteFile(filepath.Join(dir, "e2e.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, target)
	apis := map[string]string{"a": freeAddr(t), "b": freeAddr(t)}
	schedulers := "http://" + apis["a"] + ",http://" + apis["b"]
	var allServers []*server // every process, for the takeovers their logs tell of
	start := func(holder string) *server {
		sv := startServer(t, target, dir, "--holder", holder, "--listen", apis[holder])
		allServers = append(allServers, sv)
		return sv
	}
	servers := map[string]*server{"a": start("a")}
	waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder == "a" })
	servers["b"] = start("b")
	execs := []*executorProc{startExecutor(t, bin, freeAddr(t), schedulers, record, filepath.Join(dir, "x0")),
		startExecutor(t, bin, freeAddr(t), schedulers, record, filepath.Join(dir, "x1"))}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	var takeovers []time.Duration
	kills, stalls, execKills, stalledInTx := 0, 0, 0, 0
	end := time.Now().Add(dur)
	for time.Now().Before(end) {
		waitRuns(t, st, succeeded(t, st)+1+rng.IntN(4))
		switch rng.IntN(3) {
		case 0: // an executor dies (mid-work, at random) and comes back on its address
			execKills++
			i := rng.IntN(len(execs))
			_ = execs[i].cmd.Process.Kill()
			_ = execs[i].cmd.Wait()
			execs[i] = startExecutor(t, bin, execs[i].addr, schedulers, record, execs[i].state)
		default:
			old := lease(t, st)
			victim := servers[old.Holder]
			at := time.Now()
			if rng.IntN(2) == 0 {
				kills++
				victim.crash(t)
				_, took := takeover(t, st, old, at)
				takeovers = append(takeovers, took)
				servers[old.Holder] = start(old.Holder)
			} else {
				stalls++
				_ = victim.cmd.Process.Signal(syscall.SIGSTOP)
				// A primary stalled inside a transaction keeps the lease row
				// locked: the standby ends its connections once the lease has
				// expired, and takes over all the same (counted below from its
				// log). Such a stall ends after 20 s.
				took, ok := takeoverWithin(st, old, at, 20*time.Second)
				_ = victim.cmd.Process.Signal(syscall.SIGCONT)
				if !ok {
					t.Errorf("a stall of the primary (%s, epoch %d) was not taken over within 20 s", old.Holder, old.Epoch)
					waitFor(t, func() bool { return lease(t, st).Epoch > old.Epoch })
					took = time.Since(at)
				}
				takeovers = append(takeovers, took)
			}
		}
	}
	// The faults stop: every run due during them ends before the checks.
	settled := false
	for deadline := time.Now().Add(2 * time.Minute); !settled && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		open, err := st.Instances(context.Background(), store.InstanceFilter{Pipeline: "e2e", LogicalTo: end, Limit: 1,
			States: []axtype.State{axtype.Waiting, axtype.Scheduled, axtype.Running, axtype.Retrying}})
		settled = err == nil && len(open) == 0
	}
	if !settled {
		t.Error("runs due during the faults were still open 2 minutes after them")
	}
	waitRuns(t, st, succeeded(t, st)+1)
	for _, s := range servers {
		s.stop(t)
	}
	for _, x := range execs {
		_ = x.cmd.Process.Signal(syscall.SIGTERM)
		_ = x.cmd.Wait()
	}
	dups, runs := duplicates(t, record)
	unknown, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "e2e.record", States: []axtype.State{axtype.Failed}, Limit: 1 << 20})
	nUnknown := 0
	for _, in := range unknown {
		if strings.Contains(in.Error, "unknown outcome") {
			nUnknown++
			t.Errorf("e2e.record@%s: %s", in.LogicalTime.UTC().Format(time.RFC3339), in.Error)
		}
	}
	if pending, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "e2e.record", States: []axtype.State{axtype.Scheduled, axtype.Retrying, axtype.Running}, Limit: 100}); len(pending) > 0 {
		for _, in := range pending {
			h, _ := st.History(context.Background(), store.LogFilter{InstanceID: in.ID, Limit: 100})
			var lines []string
			for _, r := range h {
				lines = append(lines, fmt.Sprintf("%s %s>%s (%s, epoch %d)", r.At.Format("15:04:05.000"), r.From, r.To, r.Reason, r.Epoch))
			}
			t.Logf("e2e.record@%s left %s:\n  %s", in.LogicalTime.UTC().Format(time.RFC3339), in.State, strings.Join(lines, "\n  "))
		}
	}
	checkOnce(t, st, record)
	for _, sv := range allServers {
		b, _ := os.ReadFile(sv.log.Name())
		stalledInTx += strings.Count(string(b), "msg=lease_holder_stalled_in_write")
	}
	interrupted := 0 // work that started and never finished: reported failed by the restarted executor, retried per policy
	for _, name := range executorLogs {
		b, _ := os.ReadFile(name)
		interrupted += strings.Count(string(b), "msg=ticket_interrupted")
	}
	slices.Sort(takeovers)
	p50, maxT := time.Duration(0), time.Duration(0)
	if len(takeovers) > 0 {
		p50, maxT = takeovers[len(takeovers)/2], takeovers[len(takeovers)-1]
	}
	t.Logf("chaos (HTTP executors) for %s on MariaDB: %d primary kills, %d stalls (%d inside a transaction: taken over by ending its connections), %d executor kills; "+
		"%d logical times executed, %d duplicate executions, %d unknown outcomes of the HTTP task, %d attempts interrupted by an executor kill (failed, retried); takeover p50 %s, max %s (logical times lost are errors above; none means 0)",
		dur, kills, stalls, stalledInTx, execKills, runs, dups, nUnknown, interrupted, p50.Round(time.Millisecond), maxT.Round(time.Millisecond))
}

// takeoverWithin waits up to limit for another holder to take the lease
// from old, and returns how long since at.
func takeoverWithin(st *store.Store, old store.Lease, at time.Time, limit time.Duration) (time.Duration, bool) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if l, err := st.GetLease(context.Background(), ""); err == nil && l.Holder != old.Holder && l.Epoch > old.Epoch {
			return time.Since(at), true
		}
	}
	return 0, false
}

// duplicates counts the logical times of record executed more than once.
func duplicates(t *testing.T, record string) (dups, runs int) {
	t.Helper()
	f, err := os.Open(record)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 3 {
			seen[fields[1]]++
		}
	}
	for _, n := range seen {
		if n > 1 {
			dups += n - 1
		}
	}
	return dups, len(seen)
}
