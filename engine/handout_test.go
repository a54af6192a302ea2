package engine

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// givenBackRow returns the RUNNING → RETRYING row of task's history whose
// reason contains want, if any.
func givenBackRow(e *env, task, want string) (store.HistoryRow, bool) {
	for _, h := range e.history(task) {
		if h.From == axtype.Running && h.To == axtype.Retrying && strings.Contains(h.Reason, want) {
			return h, true
		}
	}
	return store.HistoryRow{}, false
}

// TestClaimedAheadNotHandedOutRunsOnce: the primary claims an instance
// ahead of its fire time (RUNNING a second early) and dies before handing
// it out: from the claim on, every write it tries fails, as when its
// database connection or the process itself is gone. It must start
// nothing whose hand-out it could not record; the new primary finds the
// claim still held and gives it back (RETRYING, the attempt not counted,
// the reason in its history), and it runs once, at once, under a fresh
// ticket — not left RUNNING until its 10-minute timeout as an unknown
// outcome, which is what happened before the hand-out was recorded (the
// old primary started it, its result was lost, and the new primary could
// not tell it from one that never started).
func TestClaimedAheadNotHandedOutRunsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, `pipeline: ho
timezone: UTC
schedule: "0 * * * *"
tasks:
  - {name: job, function: record, timeout: 10m}
`)
		ctx := context.Background()
		fire := time.Now().Truncate(time.Hour).Add(time.Hour)
		sleep(time.Until(fire.Add(-500 * time.Millisecond)))
		running := e.instances(store.InstanceFilter{States: []axtype.State{axtype.Running}})
		if len(running) != 1 || !running[0].StartedAt.Equal(fire) {
			t.Fatalf("half a second before %s: RUNNING %+v, want one instance claimed ahead for it", fire, running)
		}
		claimed := running[0]
		if procs, err := e.st.Procs(ctx, []string{claimed.Ticket}); err != nil || procs[claimed.Ticket].Kind != store.ProcHeld {
			t.Fatalf("the claim's record: %+v, %v; want it held until it is handed out", procs, err)
		}
		store.SetFault(e.st, func(string) error { return errors.New("injected: the primary is dying") })
		sleep(time.Second)
		if calls := e.rec.snapshot(); len(calls) != 0 {
			t.Fatalf("the old primary started %+v although it could not record the hand-out", calls)
		}
		e.cancel()
		<-e.done // its shutdown can write nothing either: the claim stays RUNNING
		store.SetFault(e.st, nil)
		if in, _ := e.st.Instance(ctx, claimed.ID); in.State != axtype.Running || in.Ticket != claimed.Ticket {
			t.Fatalf("after the old primary died: %s %s, want RUNNING with the claimed ticket", in.State, in.Ticket)
		}

		_, stop := e.takeOver(Config{})
		sleep(time.Minute)
		stop()
		calls := e.rec.snapshot()
		if len(calls) != 1 || !calls[0].logical.Equal(fire) || calls[0].ticket == claimed.Ticket {
			t.Fatalf("executions %+v, want one, of the fire at %s, under a fresh ticket", calls, fire)
		}
		in, err := e.st.Instance(ctx, claimed.ID)
		if err != nil || in.State != axtype.Success || in.Attempt != 2 || in.Counted != 1 {
			t.Errorf("instance %s attempt %d counted %d (%v), want SUCCESS at attempt 2, 1 counted (the attempt given back is not)", in.State, in.Attempt, in.Counted, err)
		}
		if h, ok := givenBackRow(e, "ho.job", "by a previous primary that stopped before handing it out: it never started"); !ok || h.Ticket != claimed.Ticket {
			t.Errorf("history %+v: want the claimed ticket given back, saying it never started", e.history("ho.job"))
		}
	})
}

// TestClaimedAheadHandedOutKeepsTheRules: the same primary dies just after
// recording the hand-out (every write after it fails): the attempt may have
// started, so the new primary must not give it back — it keeps the
// unknown-outcome rule of R27 (its scheduler process, this one, is alive:
// it waits for its timeout) and it never runs twice.
func TestClaimedAheadHandedOutKeepsTheRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, `pipeline: ho
timezone: UTC
schedule: "0 * * * *"
tasks:
  - {name: job, function: record, timeout: 10m}
`)
		ctx := context.Background()
		var dying atomic.Bool
		store.SetFault(e.st, func(what string) error {
			if dying.Load() {
				return errors.New("injected: the primary is dying")
			}
			if what == "hand out claimed attempts" {
				dying.Store(true) // this one commits; nothing after it does
			}
			return nil
		})
		fire := time.Now().Truncate(time.Hour).Add(time.Hour)
		sleep(time.Until(fire.Add(500 * time.Millisecond)))
		if !dying.Load() {
			t.Fatal("no hand-out was recorded at the fire time")
		}
		e.cancel()
		<-e.done
		store.SetFault(e.st, nil)
		_, stop := e.takeOver(Config{})
		sleep(time.Minute)
		running := e.instances(store.InstanceFilter{States: []axtype.State{axtype.Running}})
		if calls := e.rec.snapshot(); len(calls) != 1 || len(running) != 1 || running[0].Ticket != calls[0].ticket {
			t.Fatalf("a minute after the takeover: executions %+v, RUNNING %+v; want the one the old primary started, still RUNNING", calls, running)
		}
		sleep(10 * time.Minute)
		stop()
		in, _ := e.st.Instance(ctx, running[0].ID)
		if in.State != axtype.Failed || !strings.HasPrefix(in.Error, "unknown outcome: dispatched by a previous scheduler process") {
			t.Errorf("at its timeout: %s %q, want FAILED with an unknown outcome", in.State, in.Error)
		}
		if calls := e.rec.snapshot(); len(calls) != 1 {
			t.Errorf("executions %+v, want one", calls)
		}
	})
}

// TestHandOutRecordedBeforeStart: every local attempt has its record in
// the store before it starts, naming this scheduler process: one started at
// once in its dispatch transaction (kind server); one claimed ahead in its
// claim's (kind held, under the claiming epoch), and the hand-out of its
// fire time under that epoch before it starts — so that a primary taking
// over on this host can check that process, and tell a held attempt that
// started from one that did not.
func TestHandOutRecordedBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type seenAt struct {
			rec      store.ProcRecord
			handOuts map[int64]time.Time
			logical  time.Time
		}
		var (
			mu   sync.Mutex
			seen []seenAt
			e    *env
		)
		check := func(ctx context.Context, a runner.Attempt) error {
			procs, err := e.st.Procs(ctx, []string{a.Ticket})
			if err != nil {
				return err
			}
			h, err := e.st.HandOuts(ctx)
			if err != nil {
				return err
			}
			mu.Lock()
			seen = append(seen, seenAt{procs[a.Ticket], h, a.LogicalTime})
			mu.Unlock()
			return nil
		}
		seenNow := func() []seenAt {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(seen)
		}
		e = setup(t, Config{}, map[string]func(context.Context, runner.Attempt) error{"rec.held": check, "rec2.now": check}, `pipeline: rec
timezone: UTC
schedule: "0 * * * *"
tasks:
  - {name: held, function: record}
`, `pipeline: rec2
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: now, function: record}
`)
		defer e.stop()
		self := runner.Self()
		isSelf := func(r store.ProcRecord) bool {
			return r.Pgid == self.Pgid && r.Host == self.Host && r.Boot == self.Boot && r.Start == self.Start && r.Epoch > 0
		}
		sleep(time.Until(time.Now().Truncate(time.Hour).Add(time.Hour + time.Second)))
		got := seenNow()
		if len(got) != 1 {
			t.Fatalf("records seen by the attempts: %+v, want the held one's", got)
		}
		if r := got[0].rec; r.Kind != store.ProcHeld || !isSelf(r) || got[0].handOuts[r.Epoch].Before(got[0].logical) {
			t.Errorf("claimed ahead, at its start: record %+v, hand-outs %v; want held by this process (%+v) under an epoch handed out up to %s",
				r, got[0].handOuts, self, got[0].logical)
		}
		if _, err := e.do(Trigger{Target: "rec2.now"}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Second)
		got = seenNow()
		if len(got) != 2 {
			t.Fatalf("records seen by the attempts: %+v, want the held one's and the run-now's", got)
		}
		if r := got[1].rec; r.Kind != store.ProcServer || !isSelf(r) {
			t.Errorf("started at once: record %+v, want this scheduler process (%+v), kind server", r, self)
		}
	})
}

// deadServer is the Process of a scheduler that ran on this host and is
// gone: a process that was started, recorded and ended.
func deadServer(t *testing.T) runner.Process {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p, err := runner.ProcessOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	p.Server = true
	return p
}

// TestInheritedLocalAttemptsOfADeadServer: a previous primary on this host
// handed out a function attempt and a command attempt (killed before its
// group was recorded) and died. The new primary fails both once the inbox
// had its chance to bring their results, saying
// that the scheduler process that ran them is gone, rather than after
// their 10-minute timeout; an attempt of a scheduler process still alive
// (this one) stays RUNNING to its timeout, and one recorded on another
// boot cannot be judged here (R27).
func TestInheritedLocalAttemptsOfADeadServer(t *testing.T) {
	if w := runner.Where(); w.Boot == "" || w.PidNS == "" {
		t.Skip("no /proc boot id or PID namespace here")
	}
	dead := deadServer(t)
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, `pipeline: srv
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: fn, function: record, timeout: 10m}
  - {name: cmd, command: ["sleep", "600"], timeout: 10m}
  - {name: alive, function: record, timeout: 10m}
  - {name: away, function: record, timeout: 10m}
`)
		e.stop()
		ctx := context.Background()
		start := time.Now().Add(-time.Second)
		var news []store.NewInstance
		for _, n := range []string{"fn", "cmd", "alive", "away"} {
			news = append(news, store.NewInstance{TaskID: "srv." + n, State: axtype.Scheduled, NextFireAt: start})
		}
		_, ins, err := e.st.CreateRun(ctx, store.CreateRunParams{Pipeline: "srv", Trigger: "srv", Kind: axtype.RunManual, LogicalTime: start,
			Actor: "old", Now: start, Instances: news})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]int64{}
		var procs []store.ProcRecord
		for _, in := range ins {
			n := strings.TrimPrefix(in.TaskID, "srv.")
			ids[n] = in.ID
			tk, att, exe := "ticket-"+n, 1, runner.Local()
			if _, err := e.st.Transition(ctx, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Scheduled, To: axtype.Running,
				Set: store.Changes{Ticket: &tk, Attempt: &att, Counted: &att, StartedAt: &start, Executor: &exe}, Now: start, Actor: "old", Reason: "dispatched by the old primary"}); err != nil {
				t.Fatal(err)
			}
			p := dead
			switch n {
			case "alive":
				p = runner.Self()
			case "away":
				p.Boot = "another-boot"
			}
			procs = append(procs, store.ProcRecord{Ticket: tk, InstanceID: in.ID, RunID: in.RunID, Host: p.Host, Boot: p.Boot, PidNS: p.PidNS,
				Pgid: p.Pgid, Start: p.Start, At: start, Kind: store.ProcServer})
		}
		if err := e.st.WriteLogs(ctx, store.LogWrite{Procs: procs}); err != nil {
			t.Fatal(err)
		}
		_, stop := e.takeOver(Config{})
		sleep(goneGrace + 2*time.Second) // the inbox had its chance: nothing came
		want := "unknown outcome: the scheduler process that ran it (pid " + itoa(dead.Pgid) + " on " + dead.Host + ") is gone"
		for _, n := range []string{"fn", "cmd"} {
			if in, _ := e.st.Instance(ctx, ids[n]); in.State != axtype.Failed || in.Error != want || in.Attempt != 1 {
				t.Errorf("%s: %s attempt %d %q, want FAILED once the inbox had its chance (no retries) with %q", n, in.State, in.Attempt, in.Error, want)
			}
		}
		for _, n := range []string{"alive", "away"} {
			if in, _ := e.st.Instance(ctx, ids[n]); in.State != axtype.Running {
				t.Errorf("%s: %s %q, want RUNNING (its scheduler runs, or cannot be judged from here)", n, in.State, in.Error)
			}
		}
		if calls := e.rec.snapshot(); len(calls) != 0 {
			t.Errorf("executions %+v, want none: an unknown outcome runs again only by its retry policy", calls)
		}
		sleep(10 * time.Minute)
		for _, n := range []string{"alive", "away"} {
			if in, _ := e.st.Instance(ctx, ids[n]); in.State != axtype.Failed || !strings.HasPrefix(in.Error, "unknown outcome: dispatched by a previous scheduler process") {
				t.Errorf("%s: %s %q, want FAILED at its timeout", n, in.State, in.Error)
			}
		}
		stop()
	})
}

// TestProcessRecordWrittenAtStart: where a command's process group runs
// is in the store within procFlushGap of its start — not at the next flush
// of output, up to a second later (LogFlush), when a primary killed in
// between left the new one only the scheduler process to judge it by.
// Real time: the writer's hour-long tick never comes.
func TestProcessRecordWrittenAtStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.Open(ctx, t.TempDir()+"/ax.db", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := st.AcquireLease(ctx, store.LeaseParams{Holder: "p", TTL: time.Hour, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := Config{}.withDefaults()
	w := newLogWriter(cfg)
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx, time.Hour) }()
	defer func() { cancel(); <-done }()
	g := runner.Self()
	rec := store.ProcRecord{Ticket: "t-cmd", InstanceID: 7, RunID: 3, Host: g.Host, Boot: g.Boot, PidNS: g.PidNS, Pgid: 4242, Start: 99,
		At: time.Now().UTC().Truncate(time.Millisecond)}
	w.start(7, 1, st.Fence(l.Epoch)).setProc(rec)
	deadline := time.Now().Add(500 * time.Millisecond)
	for {
		got, err := st.Procs(ctx, []string{"t-cmd"})
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := got["t-cmd"]; ok {
			if r != rec {
				t.Fatalf("record %+v, want %+v", r, rec)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no record of the command's process group 500 ms after it started")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
