package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	cmd.Env = append(os.Environ(), "AX_EXECUTOR_TOKEN="+testExecutorToken) // the servers' on MySQL (startServerBin)
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
// prints true duplicate executions (must be 0) apart from work run again
// because its executor died under it and its retry ran by policy (see
// repeats), logical times lost (0 beyond
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

	// Hostile neighbours on the host throughout: an impersonator of the
	// executors and a flood of bodies that never end.
	var execMu sync.Mutex
	hostiles := startHostile(t, []string{apis["a"], apis["b"]}, func() []string {
		execMu.Lock()
		defer execMu.Unlock()
		return []string{execs[0].addr, execs[1].addr}
	}, testExecutorToken)
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
			x := startExecutor(t, bin, execs[i].addr, schedulers, record, execs[i].state)
			execMu.Lock()
			execs[i] = x
			execMu.Unlock()
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
	hostileDid := hostiles.end(t)
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
	settleRuns(t, st)
	for _, s := range servers {
		s.stop(t)
	}
	for _, x := range execs {
		_ = x.cmd.Process.Signal(syscall.SIGTERM)
		_ = x.cmd.Wait()
	}
	dups, retried, runs := repeats(t, st, record)
	for _, d := range dups {
		t.Error(d)
	}
	nRetried := 0
	for _, n := range retried {
		nRetried += n
	}
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
	checkRuns(t, st, record, retried)
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
		"%d logical times executed, %d true duplicate executions (must be 0), %d executions again after an executor died under the work and its retry ran it by policy (the attempt's error says so), "+
		"%d unknown outcomes of the HTTP task, %d attempts reported interrupted by a restarted executor (failed, retried); takeover p50 %s, max %s (logical times lost are errors above; none means 0); hostile neighbours: %s",
		dur, kills, stalls, stalledInTx, execKills, runs, len(dups), nRetried, nUnknown, interrupted, p50.Round(time.Millisecond), maxT.Round(time.Millisecond), hostileDid)
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

// executorDied are the reasons of an attempt's failure that say its
// executor process died under it: the restarted executor reported the work
// interrupted (from its journal), or the scheduler failed the attempt over
// when the executor came back with a new boot id, or judged it at its
// deadline while the executor was silent (no answer to its /status).
var executorDied = []string{
	"interrupted: the executor process ended while this work ran",
	"restarted (registered again as",
	"is silent (lost) and did not answer for it",
}

// repeats reads the executions in record (a line "task logical_time ticket"
// per execution, appended when the work took effect) and tells apart, per
// logical time run more than once:
//   - retried: an execution whose attempt then failed because its executor
//     died under it (killed between the work's effect and the journal's
//     record of its result) and whose retry, by policy, ran the work again:
//     allowed by the rule of docs/ha.md ("runs again only if its retry policy allows — never
//     silently"), its recorded error saying why;
//   - dups: anything else, each saying why: a ticket executed twice, or an
//     execution whose attempt the scheduler recorded as succeeded, or failed
//     for another reason, before the work ran again. These must be none.
func repeats(t *testing.T, st *store.Store, record string) (dups []string, retried map[string]int, runs int) {
	t.Helper()
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	tickets := map[string][]string{} // logical time → tickets executed, in order
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			tickets[f[1]] = append(tickets[f[1]], f[2])
		}
	}
	retried = map[string]int{}
	for lt, tks := range tickets {
		if len(tks) == 1 {
			continue
		}
		why := repeatCause(t, st, lt, tks)
		for _, w := range why {
			if w == "" {
				retried[lt]++
				continue
			}
			dups = append(dups, fmt.Sprintf("record@%s ran %d times (tickets %v), a true duplicate: %s", lt, len(tks), tks, w))
		}
	}
	return dups, retried, len(tickets)
}

// repeatCause judges the executions of logical time lt beyond the first:
// for each, "" when the execution before it was of an attempt that failed
// because its executor died (retried by policy), else why it is a true
// duplicate.
func repeatCause(t *testing.T, st *store.Store, lt string, tks []string) []string {
	t.Helper()
	at, err := time.Parse(time.RFC3339, lt)
	if err != nil {
		t.Fatalf("record line with logical time %q: %v", lt, err)
	}
	ins, err := st.Instances(context.Background(), store.InstanceFilter{TaskID: "e2e.record", LogicalFrom: at, LogicalTo: at, Limit: 10})
	if err != nil || len(ins) != 1 {
		return slices.Repeat([]string{fmt.Sprintf("%d instances of e2e.record at this logical time (%v)", len(ins), err)}, len(tks)-1)
	}
	hist, err := st.History(context.Background(), store.LogFilter{InstanceID: ins[0].ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ended := map[string]string{} // ticket → the reason its attempt left RUNNING
	for _, h := range hist {
		if h.From == axtype.Running && h.Ticket != "" {
			ended[h.Ticket] = string(h.To) + ": " + h.Reason
		}
	}
	var out []string
	seen := map[string]bool{}
	for i, tk := range tks {
		if i == 0 {
			seen[tk] = true
			continue
		}
		prev := tks[i-1]
		reason, ok := ended[prev]
		switch {
		case seen[tk]:
			out = append(out, fmt.Sprintf("ticket %s executed again", tk))
		case !ok:
			out = append(out, fmt.Sprintf("the attempt of ticket %s never left RUNNING before %s ran", prev, tk))
		case !strings.HasPrefix(reason, string(axtype.Retrying)) || !slices.ContainsFunc(executorDied, func(s string) bool { return strings.Contains(reason, s) }):
			out = append(out, fmt.Sprintf("the attempt of ticket %s ended %q before %s ran: not an executor's death retried by policy", prev, reason, tk))
		default:
			out = append(out, "")
		}
		seen[tk] = true
	}
	return out
}
