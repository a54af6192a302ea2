package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// group is a real process group standing for the command of an attempt a
// previous primary started: a sleep leading a group of its own.
type group struct {
	cmd  *exec.Cmd
	proc runner.Process
}

func startSleepGroup(t *testing.T) *group {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	p, err := runner.ProcessOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return &group{cmd: cmd, proc: p}
}

// end kills the group and reaps it: no process of it is left.
func (g *group) end(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-g.proc.Pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = g.cmd.Wait()
}

// TestInheritedCommandGroupsChecked: a previous primary started four
// command attempts on this host, recorded where their groups run, and
// died. The new primary fails the one whose group is gone once the inbox
// had its chance to bring its result (an attempt counted, retried by its
// policy), and the one whose group ends later within goneGrace and a
// second or two of its end, both saying why; it leaves the
// one whose group runs to its timeout, and then kills the group; one
// recorded on another boot cannot be judged here and times out as before
// (R27), its group untouched.
func TestInheritedCommandGroupsChecked(t *testing.T) {
	if w := runner.Where(); w.Boot == "" || w.PidNS == "" {
		t.Skip("no /proc boot id or PID namespace here")
	}
	groups := map[string]*group{}
	for _, n := range []string{"gone", "ends", "runs", "away"} {
		groups[n] = startSleepGroup(t)
	}
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, `pipeline: grp
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: gone, command: ["true"], timeout: 10m, retry: {count: 1, interval: 1h}}
  - {name: ends, command: ["true"], timeout: 10m}
  - {name: runs, command: ["true"], timeout: 10m}
  - {name: away, command: ["true"], timeout: 10m}
`)
		e.stop()
		ctx := context.Background()
		start := time.Now().Add(-time.Second)
		var news []store.NewInstance
		for _, n := range []string{"gone", "ends", "runs", "away"} {
			news = append(news, store.NewInstance{TaskID: "grp." + n, State: axtype.Scheduled, NextFireAt: start})
		}
		_, ins, err := e.st.CreateRun(ctx, store.CreateRunParams{Pipeline: "grp", Trigger: "grp", Kind: axtype.RunManual, LogicalTime: start,
			Actor: "old", Now: start, Instances: news})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]int64{}
		var procs []store.ProcRecord
		for _, in := range ins {
			n := strings.TrimPrefix(in.TaskID, "grp.")
			ids[n] = in.ID
			tk, att, exe := "ticket-"+n, 1, runner.Local()
			if _, err := e.st.Transition(ctx, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Scheduled, To: axtype.Running,
				Set: store.Changes{Ticket: &tk, Attempt: &att, Counted: &att, StartedAt: &start, Executor: &exe}, Now: start, Actor: "old", Reason: "dispatched by the old primary"}); err != nil {
				t.Fatal(err)
			}
			p := groups[n].proc
			if n == "away" {
				p.Boot = "another-boot"
			}
			procs = append(procs, store.ProcRecord{Ticket: tk, InstanceID: in.ID, RunID: in.RunID, Host: p.Host, Boot: p.Boot, PidNS: p.PidNS,
				Pgid: p.Pgid, Start: p.Start, At: start})
		}
		if err := e.st.WriteLogs(ctx, store.LogWrite{Procs: procs}); err != nil {
			t.Fatal(err)
		}
		groups["gone"].end(t) // died with the old primary
		state := func(n string) axtype.Instance {
			in, err := e.st.Instance(ctx, ids[n])
			if err != nil {
				t.Fatal(err)
			}
			return in
		}
		goneMsg := func(n string) string {
			return fmt.Sprintf("unknown outcome: its process group %d is gone (the primary that ran it died)", groups[n].proc.Pgid)
		}
		_, stop := e.takeOver(Config{})
		sleep(goneGrace + 2*time.Second) // the inbox had its chance: nothing came
		if in := state("gone"); in.State != axtype.Retrying || in.Attempt != 1 || in.Error != goneMsg("gone") {
			t.Errorf("gone: %s attempt %d %q, want RETRYING after attempt 1 with %q", in.State, in.Attempt, in.Error, goneMsg("gone"))
		}
		for _, n := range []string{"ends", "runs", "away"} {
			if in := state(n); in.State != axtype.Running {
				t.Errorf("%s: %s %q, want RUNNING (its group runs, or cannot be judged)", n, in.State, in.Error)
			}
		}
		groups["ends"].end(t)
		sleep(goneGrace + 2*time.Second)
		if in := state("ends"); in.State != axtype.Failed || in.Error != goneMsg("ends") {
			t.Errorf("ends: %s %q, want FAILED (no retries) with %q", in.State, in.Error, goneMsg("ends"))
		}
		if in := state("runs"); in.State != axtype.Running {
			t.Errorf("runs: %s %q before its timeout, want RUNNING", in.State, in.Error)
		}
		sleep(10 * time.Minute)
		timedOut := "unknown outcome: dispatched by a previous scheduler process and no result within 10m0s"
		if in := state("runs"); in.State != axtype.Failed || in.Error != timedOut+fmt.Sprintf("; its process group %d, still running, was killed", groups["runs"].proc.Pgid) {
			t.Errorf("runs: %s %q, want FAILED at its timeout with its group killed", in.State, in.Error)
		}
		if in := state("away"); in.State != axtype.Failed || in.Error != timedOut {
			t.Errorf("away: %s %q, want FAILED at its timeout with %q", in.State, in.Error, timedOut)
		}
		stop()
	})
	// Outside the bubble, on the kernel's time: the group of runs was
	// killed at its timeout, and the one recorded on another boot was not.
	// This test is its parent: it collects it (until then an exited leader
	// counts as alive, its parent being alive), and it must have ended.
	reaped := make(chan struct{})
	go func() { _ = groups["runs"].cmd.Wait(); close(reaped) }()
	select {
	case <-reaped:
	case <-time.After(5 * time.Second):
		t.Fatal("the group of runs still runs 5 s after its timeout: want it killed")
	}
	if st := runner.CheckGroups([]runner.Process{groups["runs"].proc})[0]; st != runner.GroupGone {
		t.Errorf("the group of runs, killed and collected: %v, want gone", st)
	}
	if st := runner.CheckGroups([]runner.Process{groups["away"].proc})[0]; st != runner.GroupAlive {
		t.Errorf("the group recorded on another boot: %v, want alive (untouched)", st)
	}
}

// TestGoneGroupWaitsForTheOldPrimarysResult: a previous primary started
// two command attempts on this host and lost its lease while they ran.
// Both groups are gone when the new primary takes over; the old primary,
// fenced, leaves the result of one (late) in the inbox a second later, and
// of the other (dead) nothing. The new primary applies late's result as
// its outcome (SUCCESS, attempt 1, not run again), and judges dead an
// unknown outcome only once the inbox had its chance: not at once, and
// within a few seconds. Judged from its group alone, late failed at once
// and its retry ran work that had succeeded.
func TestGoneGroupWaitsForTheOldPrimarysResult(t *testing.T) {
	if w := runner.Where(); w.Boot == "" || w.PidNS == "" {
		t.Skip("no /proc boot id or PID namespace here")
	}
	groups := map[string]*group{"late": startSleepGroup(t), "dead": startSleepGroup(t)}
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, `pipeline: grp
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: late, command: ["true"], timeout: 10m, retry: {count: 1, interval: 1m}}
  - {name: dead, command: ["true"], timeout: 10m, retry: {count: 1, interval: 1m}}
`)
		e.stop()
		ctx := context.Background()
		start := time.Now().Add(-time.Second)
		ids := inheritGroups(t, e, "grp", start, groups)
		for _, g := range groups {
			g.end(t) // ended while the lease changed hands
		}
		state := func(n string) axtype.Instance {
			in, err := e.st.Instance(ctx, ids[n])
			if err != nil {
				t.Fatal(err)
			}
			return in
		}
		_, stop := e.takeOver(Config{})
		sleep(time.Second)
		for _, n := range []string{"late", "dead"} {
			if in := state(n); in.State != axtype.Running {
				t.Errorf("%s, its group gone, before the inbox had its chance: %s %q, want RUNNING", n, in.State, in.Error)
			}
		}
		rep, err := json.Marshal(runner.Report{Ticket: "ticket-late", Status: runner.StatusSuccess, InstanceID: ids["late"]})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.ReceiveResult(ctx, store.InboxEntry{Ticket: "ticket-late", InstanceID: ids["late"], Report: string(rep),
			ReceivedBy: "old", ReceivedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		sleep(goneGrace + 2*time.Second)
		if in := state("late"); in.State != axtype.Success || in.Attempt != 1 || in.Error != "" {
			t.Errorf("late: %s attempt %d %q, want SUCCESS at attempt 1 (its result came through the inbox)", in.State, in.Attempt, in.Error)
		}
		want := fmt.Sprintf("unknown outcome: its process group %d is gone (the primary that ran it died)", groups["dead"].proc.Pgid)
		if in := state("dead"); in.State != axtype.Retrying || in.Error != want {
			t.Errorf("dead: %s %q, want RETRYING with %q", in.State, in.Error, want)
		}
		if calls := e.rec.snapshot(); len(calls) != 0 {
			t.Errorf("executions %+v, want none before dead's retry is due", calls)
		}
		stop()
	})
}

// inheritGroups records, as a previous primary would have, a run of
// pipeline p with one RUNNING command attempt per group (task p.NAME,
// ticket "ticket-NAME", started at start) and where each group runs; it
// returns the instances by name.
func inheritGroups(t *testing.T, e *env, p string, start time.Time, groups map[string]*group) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	var news []store.NewInstance
	for n := range groups {
		news = append(news, store.NewInstance{TaskID: p + "." + n, State: axtype.Scheduled, NextFireAt: start})
	}
	_, ins, err := e.st.CreateRun(ctx, store.CreateRunParams{Pipeline: p, Trigger: p, Kind: axtype.RunManual, LogicalTime: start,
		Actor: "old", Now: start, Instances: news})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	var procs []store.ProcRecord
	for _, in := range ins {
		n := strings.TrimPrefix(in.TaskID, p+".")
		ids[n] = in.ID
		tk, att, exe := "ticket-"+n, 1, runner.Local()
		if _, err := e.st.Transition(ctx, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Scheduled, To: axtype.Running,
			Set: store.Changes{Ticket: &tk, Attempt: &att, Counted: &att, StartedAt: &start, Executor: &exe}, Now: start, Actor: "old", Reason: "dispatched by the old primary"}); err != nil {
			t.Fatal(err)
		}
		g := groups[n].proc
		procs = append(procs, store.ProcRecord{Ticket: tk, InstanceID: in.ID, RunID: in.RunID, Host: g.Host, Boot: g.Boot, PidNS: g.PidNS,
			Pgid: g.Pgid, Start: g.Start, At: start})
	}
	if err := e.st.WriteLogs(ctx, store.LogWrite{Procs: procs}); err != nil {
		t.Fatal(err)
	}
	return ids
}
