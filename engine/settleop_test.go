package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

func TestMarkSuccessReleasesDownstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fns := map[string]func(context.Context, runner.Attempt) error{
			"d.a": func(context.Context, runner.Attempt) error { return errors.New("vendor file missing") },
		}
		e := setup(t, Config{}, fns, diamondD)
		sleep(time.Hour + time.Second)
		a := e.instances(store.InstanceFilter{TaskID: "d.a"})[0]
		msg, err := e.do(Mark{Target: "d.a", Run: a.RunID, State: axtype.Success}, By{Actor: "operator:ann", Reason: "loaded by hand"})
		if err != nil || !strings.Contains(msg, "marked success by operator:ann: loaded by hand") || !strings.Contains(msg, "3 downstream instance(s)") {
			t.Errorf("mark: %q %v", msg, err)
		}
		sleep(time.Second)
		e.stop()
		run := e.byTask(a.RunID)
		for _, id := range []string{"d.b", "d.c", "d.d"} {
			if run[id].State != axtype.Success {
				t.Errorf("%s: %s %q", id, run[id].State, run[id].Error)
			}
		}
		if got := transitionsOf(e, a.ID); got != "SCHEDULED>RUNNING>FAILED>SUCCESS" {
			t.Errorf("a history %s", got)
		}
		h, _ := e.st.History(context.Background(), store.LogFilter{InstanceID: a.ID})
		if last := h[len(h)-1]; last.Actor != "operator:ann" || last.Reason != "marked success by operator:ann: loaded by hand" {
			t.Errorf("history row %+v", last)
		}
		if acts := e.actions(OpMark); len(acts) != 1 || acts[0].Actor != "operator:ann" || acts[0].Reason != "loaded by hand" {
			t.Errorf("mark actions %+v", acts)
		}
		if n := len(e.callsOf("d.a", start)); n != 1 {
			t.Errorf("a ran %d times", n)
		}
	})
}

// A WAITING instance marked success releases its downstream; marked failed,
// fails it. The schedule is hourly, so that the two marks are an hour
// apart, not a day (a simulated day of an idle engine costs 85 s under
// -race): the race pass runs it too.
func TestMarkWaitingInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		billing := "pipeline: billing\ntimezone: UTC\ntasks:\n  - {name: settle, function: record}\n"
		orders := "pipeline: orders\ntimezone: UTC\nschedule: \"0 * * * *\"\ndefaults: {function: record}\ntasks:\n  - {name: report, depends_on: [billing.settle]}\n  - {name: mail, depends_on: [report]}\n  - {name: archive, depends_on: [report]}\n"
		e := setup(t, Config{}, nil, billing, orders)
		sleep(time.Hour + time.Second)
		hour1 := start.Add(time.Hour)
		if _, err := e.do(Mark{Target: "orders.report", At: hour1, State: axtype.Success}, By{Actor: "operator:ann"}); err != nil {
			t.Error(err)
		}
		sleep(time.Second)
		run := e.byTask(e.instances(store.InstanceFilter{TaskID: "orders.report"})[0].RunID)
		if run["orders.mail"].State != axtype.Success || run["orders.archive"].State != axtype.Success {
			t.Errorf("after mark success: mail %s, archive %s", run["orders.mail"].State, run["orders.archive"].State)
		}
		sleep(time.Hour)
		hour2 := hour1.Add(time.Hour)
		if _, err := e.do(Mark{Target: "orders.report", At: hour2, State: axtype.Failed}, By{Actor: "operator:ann", Reason: "no billing today"}); err != nil {
			t.Error(err)
		}
		e.stop()
		ins := e.instances(store.InstanceFilter{TaskID: "orders.mail", LogicalFrom: hour2, LogicalTo: hour2})
		if len(ins) != 1 || ins[0].State != axtype.Failed || ins[0].Error != "upstream orders.report failed" {
			t.Errorf("mail of hour 2: %+v", ins)
		}
		r := e.instances(store.InstanceFilter{TaskID: "orders.report", LogicalFrom: hour2, LogicalTo: hour2})
		if len(r) != 1 || r[0].Error != "marked failed by operator:ann: no billing today" || r[0].Attempt != 0 {
			t.Errorf("report of hour 2: %+v", r)
		}
		if len(e.rec.snapshot()) != 2 {
			t.Errorf("calls %v: mail and archive of hour 1 only", e.rec.snapshot())
		}
	})
}

// Bad requests and states that refuse them: an error that says why, and
// nothing changes (no transition, no action).
func TestMarkAndCancelRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fns := map[string]func(context.Context, runner.Attempt) error{
			"r.a": func(ctx context.Context, _ runner.Attempt) error { <-ctx.Done(); return ctx.Err() },
		}
		e := setup(t, Config{}, fns, "pipeline: r\ntimezone: UTC\nschedule: \"@every 1h\"\ndefaults: {function: record, timeout: 1h}\ntasks:\n  - {name: a}\n  - {name: b, depends_on: [a]}\n")
		sleep(time.Hour + time.Second) // a RUNNING, b WAITING
		a := e.instances(store.InstanceFilter{TaskID: "r.a"})[0]
		hist := func() int {
			h, _ := e.st.History(context.Background(), store.LogFilter{Limit: 1 << 20})
			return len(h)
		}
		before, acts := hist(), len(e.actions(""))
		for _, c := range []struct {
			op   Request
			want string
		}{
			{Mark{Instance: 999, State: axtype.Success}, "no instance 999"},
			{Mark{Target: "r.zz", Run: a.RunID, State: axtype.Success}, `no task "r.zz"`},
			{Mark{Target: "r.b", Run: 999, State: axtype.Success}, "no run 999"},
			{Mark{Target: "r.b", State: axtype.Success}, "say which instance of r.b"},
			{Mark{Target: "r.b", At: a.LogicalTime.Add(time.Minute), State: axtype.Success}, "r.b has no instance at"},
			{Mark{Instance: a.ID, State: "DONE"}, `mark "done": give success or failed`},
			{Mark{Instance: a.ID, State: axtype.Success}, "is RUNNING: it may still run; kill it first"},
			{Cancel{Run: 999}, "no run 999"},
			{Cancel{}, "cancel needs a run id"},
		} {
			_, err := e.do(c.op)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%+v: err = %v, want %q", c.op, err, c.want)
			}
		}
		if hist() != before || len(e.actions("")) != acts {
			t.Errorf("a refused request wrote something: history %d → %d, actions %d → %d", before, hist(), acts, len(e.actions("")))
		}
		if _, err := e.do(Cancel{Run: a.RunID}, By{Actor: "operator:ann", Reason: "wrong day"}); err != nil {
			t.Error(err)
		}
		sleep(time.Second)
		if _, err := e.do(Cancel{Run: a.RunID}); err == nil || !strings.Contains(err.Error(), "is over already (failed): nothing to cancel") {
			t.Errorf("cancel twice: %v", err)
		}
		if _, err := e.do(Mark{Instance: a.ID, State: axtype.Killed}); err == nil || !strings.Contains(err.Error(), "give success or failed") {
			t.Errorf("mark killed: %v", err)
		}
		e.stop()
		run := e.byTask(a.RunID)
		if run["r.a"].State != axtype.Killed || run["r.b"].State != axtype.Failed || run["r.b"].Error != "cancelled by operator:ann: wrong day" {
			t.Errorf("after cancel: a %s, b %s %q", run["r.a"].State, run["r.b"].State, run["r.b"].Error)
		}
	})
}

// Cancel ends a run whose command task runs: the process (and what it
// started) is gone, the run is over. Real processes and the real clock:
// waits poll for events with a bound, never for time-dependent logic.
func TestCancelKillsRunningCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	src := fmt.Sprintf("pipeline: c\ntimezone: UTC\ntasks:\n  - {name: long, command: [\"sh\", \"-c\", \"sleep 300 & echo $! > %s; wait\"], timeout: 10m}\n  - {name: after, depends_on: [long], command: [\"true\"]}\n", pidFile)
	p, errs := defs.Parse("c.yaml", []byte(src), defs.Options{Now: time.Now()})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	g, errs := dag.Compile([]*defs.Pipeline{p}, dag.Options{Now: time.Now(), DispatchRate: -1})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	st, err := store.Open(context.Background(), filepath.Join(dir, "ax.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := New(Config{Holder: "test"}, st, g, Executors{defs.ExecCommand: runner.NewCommands(commandSpec(g))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	defer func() { cancel(); <-done }()
	do := func(req Request, by By) (string, error) {
		c, stop := context.WithTimeout(context.Background(), 30*time.Second)
		defer stop()
		return eng.Do(c, req, by)
	}
	until := func(what string, ok func() bool) {
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("still not %s after 30 s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	until("primary", func() bool { return eng.Stats().Leader })
	if _, err := do(Trigger{Target: "c.long", Downstream: true}, By{Actor: "operator:ann"}); err != nil {
		t.Fatal(err)
	}
	var pid int
	until("started", func() bool {
		b, err := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "c.long", Limit: 1})
	msg, err := do(Cancel{Run: ins[0].RunID}, By{Actor: "operator:ann"})
	if err != nil || !strings.Contains(msg, "kill sent to 1 running instance(s)") {
		t.Fatalf("cancel: %q %v", msg, err)
	}
	until("over", func() bool {
		all, _ := st.Instances(context.Background(), store.InstanceFilter{RunID: ins[0].RunID, Limit: 10})
		return StatusOf(all, nil).Over
	})
	// Gone, or a zombie waiting for a reaper that is not ours: not running.
	gone := func() bool {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
	}
	until("gone: the task's child process "+strconv.Itoa(pid), gone)
	all, _ := st.Instances(context.Background(), store.InstanceFilter{RunID: ins[0].RunID, Limit: 10, Ascending: true})
	if len(all) != 2 || all[0].State != axtype.Killed || all[1].State != axtype.Failed || all[1].Error != "cancelled by operator:ann" {
		t.Errorf("run after cancel: %+v", all)
	}
}

// TestRerunOfMarkedSuccessWaitsForUpstream: an instance an operator marked
// SUCCESS while it waited never ran; a rerun of it waits for its upstream
// (SUCCESS → WAITING) and starts only once that upstream succeeded, never
// before (found by the simulator, seeds 160, 161, 194).
func TestRerunOfMarkedSuccessWaitsForUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var once sync.Once
		defer once.Do(func() { close(release) }) // a failed check must not leave a blocked
		fns := map[string]func(context.Context, runner.Attempt) error{
			"r.a": func(ctx context.Context, _ runner.Attempt) error {
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			},
		}
		e := setup(t, Config{}, fns, "pipeline: r\ntimezone: UTC\nschedule: \"0 1 * * *\"\ndefaults: {function: record, timeout: 1h}\ntasks:\n  - {name: a}\n  - {name: b, depends_on: [a]}\n")
		sleep(time.Hour + time.Second) // a RUNNING, b WAITING
		b := e.instances(store.InstanceFilter{TaskID: "r.b"})[0]
		if b.State != axtype.Waiting {
			t.Fatalf("b is %s, want WAITING", b.State)
		}
		if _, err := e.do(Mark{Instance: b.ID, State: axtype.Success}, By{Actor: "operator:ann"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.do(Rerun{Instance: b.ID}, By{Actor: "operator:ann"}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Minute)
		calls := func() (n int) {
			for _, c := range e.rec.snapshot() {
				if c.task == "r.b" {
					n++
				}
			}
			return n
		}
		if got := e.instances(store.InstanceFilter{TaskID: "r.b"})[0]; got.State != axtype.Waiting || calls() != 0 {
			t.Fatalf("after the rerun, with a still running: b is %s and ran %d time(s); want WAITING, not run", got.State, calls())
		}
		once.Do(func() { close(release) })
		sleep(time.Minute)
		e.stop()
		if got := e.instances(store.InstanceFilter{TaskID: "r.b"})[0]; got.State != axtype.Success || calls() != 1 {
			t.Errorf("after a succeeded: b is %s and ran %d time(s); want SUCCESS, run once", got.State, calls())
		}
	})
}
