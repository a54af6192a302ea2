package engine

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/store"
)

// The takeover judges what was left RUNNING from plain values: no store, no
// engine, no other component.
func TestTakeoverJudgeAlone(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	fn := &taskInfo{id: "p.fn", def: &defs.Task{Timeout: time.Minute, Executor: defs.Executor{Kind: defs.ExecFunction}}}
	web := &taskInfo{id: "p.web", def: &defs.Task{Timeout: time.Minute, Executor: defs.Executor{Kind: defs.ExecHTTP}}}
	tasks := map[string]*taskInfo{"p.fn": fn, "p.web": web}
	prevLeaseEnd := t0.Add(10 * time.Second)
	inst := func(id int64, task, ticket string, started time.Time) axtype.Instance {
		return axtype.Instance{ID: id, TaskID: task, Ticket: ticket, Version: 7, RunID: 1, Attempt: 2, Counted: 2, State: axtype.Running, StartedAt: started}
	}
	left := runningLeft{
		insts: []axtype.Instance{
			inst(1, "p.fn", "here", t0),                       // already running here
			inst(2, "p.web", "resent", t0),                    // dispatched again at t0+30s
			inst(3, "p.fn", "queued", t0),                     // may have waited in the start queue: counts from the lease's end
			inst(4, "p.fn", "held", t0.Add(5*time.Second)),    // claimed ahead past its epoch's hand-out
			inst(5, "p.web", "late", t0.Add(20*time.Second)),  // claimed ahead for after the lease ended
			inst(6, "p.web", "plain", t0.Add(-5*time.Second)), // may have run: inherited
		},
		procs:    map[string]store.ProcRecord{"held": {Ticket: "held", Kind: store.ProcHeld, Epoch: 3}},
		resent:   map[string]time.Time{"resent": t0.Add(30 * time.Second)},
		handOuts: map[int64]time.Time{3: t0},
	}
	tk := takeover{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	now := t0.Add(time.Minute)
	got := tk.judge(left, tasks, prevLeaseEnd, map[int64]string{1: "here"}, now)

	if len(got.versions) != 1 || got.versions[1] != 7 {
		t.Errorf("versions refreshed = %v, want instance 1 at version 7", got.versions)
	}
	wantDeadline := map[int64]time.Time{
		2: t0.Add(30*time.Second + time.Minute), // from its redispatch
		3: t0.Add(10*time.Second + time.Minute), // from the previous lease's end (local)
		6: t0.Add(-5*time.Second + time.Minute), // from its recorded start (HTTP)
	}
	if len(got.inherited) != len(wantDeadline) {
		t.Fatalf("inherited %d attempts, want %d", len(got.inherited), len(wantDeadline))
	}
	for _, x := range got.inherited {
		if want, ok := wantDeadline[x.id]; !ok || !x.a.deadline.Equal(want) || !x.a.orphan {
			t.Errorf("instance %d inherited with deadline %s (orphan %v), want %s, orphan", x.id, x.a.deadline, x.a.orphan, want)
		}
	}
	wantWhy := map[int64]string{4: "by a previous primary that stopped before handing it out", 5: "after the previous primary's lease ended"}
	if len(got.givenBack) != 2 || len(got.backWhy) != 2 {
		t.Fatalf("given back %d (%d outcomes), want 2", len(got.givenBack), len(got.backWhy))
	}
	for i, x := range got.givenBack {
		o := got.backWhy[i]
		if o.instance != x.id || !strings.Contains(o.notStarted, wantWhy[x.id]) || x.a.orphan || !x.a.interrupted {
			t.Errorf("given back %d: outcome for %d, why %q, orphan %v, interrupted %v; want why containing %q, not orphan, interrupted",
				x.id, o.instance, o.notStarted, x.a.orphan, x.a.interrupted, wantWhy[x.id])
		}
	}
}

// An attempt whose group is gone is an unknown outcome only once goneGrace
// has passed since it was seen gone and the inbox was read after that.
func TestGoneJudged(t *testing.T) {
	gone := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	due := gone.Add(goneGrace)
	for _, tc := range []struct {
		name           string
		inboxRead, now time.Time
		want           bool
	}{
		{"seen gone, inbox read at once", gone, gone, false},
		{"within the grace", due.Add(-time.Millisecond), due.Add(-time.Millisecond), false},
		{"grace passed, inbox last read before it", due.Add(-time.Millisecond), due.Add(time.Second), false},
		{"never read", time.Time{}, due.Add(time.Hour), false},
		{"grace passed, inbox read since", due, due, true},
		{"grace passed long ago, inbox read since", due.Add(time.Minute), due.Add(time.Minute), true},
	} {
		if got := goneJudged(gone, tc.inboxRead, tc.now); got != tc.want {
			t.Errorf("%s: goneJudged = %v, want %v", tc.name, got, tc.want)
		}
	}
}
