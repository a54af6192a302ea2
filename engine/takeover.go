package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// takeover is what a new term does with the attempts a previous process
// (or this one, before its lease was taken again) left RUNNING: their
// tickets stay valid, and when no result comes by their deadline they time
// out through the normal path — never re-dispatched blindly. Those that
// certainly never started (neverStarted) are given back, to run again
// once, the attempt not counted. It reads the store and judges; it holds
// no other component: the loop hands what it finds to the dispatcher (the
// attempts it tracks) and the completer (the give-backs, the process
// groups it watches).
type takeover struct {
	st  takeoverReader
	log *slog.Logger
}

// takeoverReader is what the takeover reads of the store.
type takeoverReader interface {
	Instances(ctx context.Context, f store.InstanceFilter) ([]axtype.Instance, error)
	Procs(ctx context.Context, tickets []string) (map[string]store.ProcRecord, error)
	Redispatched(ctx context.Context, ids []int64) (map[string]time.Time, error)
	HandOuts(ctx context.Context) (map[int64]time.Time, error)
}

// runningLeft is what the store says of the instances left RUNNING: the
// instances, where their attempts were recorded to run (procs, by ticket),
// when a ticket was last dispatched again (resent) and, when some were
// claimed ahead, the hand-out recorded by each epoch (handOuts).
type runningLeft struct {
	insts    []axtype.Instance
	procs    map[string]store.ProcRecord
	resent   map[string]time.Time
	handOuts map[int64]time.Time
}

// read reads what the store says of the instances left RUNNING.
func (t *takeover) read(ctx context.Context) (runningLeft, error) {
	var l runningLeft
	var err error
	l.insts, err = t.st.Instances(ctx, store.InstanceFilter{States: []axtype.State{axtype.Running}, Limit: 1 << 20})
	if err != nil {
		return l, fmt.Errorf("engine: reconcile running instances: %w", err)
	}
	tickets := make([]string, 0, len(l.insts))
	ids := make([]int64, 0, len(l.insts))
	for _, in := range l.insts {
		tickets, ids = append(tickets, in.Ticket), append(ids, in.ID)
	}
	if l.procs, err = t.st.Procs(ctx, tickets); err != nil {
		return l, fmt.Errorf("engine: read where inherited attempts run: %w", err)
	}
	if l.resent, err = t.st.Redispatched(ctx, ids); err != nil {
		return l, fmt.Errorf("engine: read which inherited attempts were dispatched again: %w", err)
	}
	for _, r := range l.procs {
		if r.Kind == store.ProcHeld {
			if l.handOuts, err = t.st.HandOuts(ctx); err != nil {
				return l, fmt.Errorf("engine: read the hand-outs of attempts claimed ahead: %w", err)
			}
			break
		}
	}
	return l, nil
}

// inheritance is what the takeover judged of the instances left RUNNING,
// for the loop to hand on: attempts for the dispatcher to track (each
// inherited one), attempts that never started, which the dispatcher tracks
// and the completer gives back (givenBack, in the same order), and the
// versions of attempts already running here (the lease was retaken).
type inheritance struct {
	inherited []inheritedAttempt
	givenBack []inheritedAttempt
	backWhy   []outcome
	versions  map[int64]int64
}

// inheritedAttempt is an attempt taken over, as instance id.
type inheritedAttempt struct {
	id int64
	a  *attempt
}

// judge decides, from what the store says (l), the task of each instance
// (tasks, by task id), the end of the previous term's lease and the
// tickets already running here (running, by instance), what becomes of
// each instance left RUNNING. It only reads its arguments.
func (t *takeover) judge(l runningLeft, tasks map[string]*taskInfo, prevLeaseEnd time.Time, running map[int64]string, now time.Time) inheritance {
	var out inheritance
	for _, in := range l.insts {
		ti := tasks[in.TaskID]
		if ticket, ok := running[in.ID]; ok && ticket == in.Ticket {
			if out.versions == nil {
				out.versions = map[int64]int64{}
			}
			out.versions[in.ID] = in.Version
			continue
		}
		a := &attempt{ticket: in.Ticket, version: in.Version, task: ti, runID: in.RunID, logical: in.LogicalTime, attempt: in.Attempt, counted: in.Counted,
			deadline: inheritedDeadline(in, ti.def, l.resent, prevLeaseEnd), orphan: true, started: in.StartedAt}
		rec, found := l.procs[in.Ticket]
		if why := neverStarted(in, ti, rec, found, l.handOuts, prevLeaseEnd); why != "" {
			// Given back as at a shutdown (giveBack): RETRYING at its fire
			// time, or now when that has passed, the attempt not counted,
			// the reason in its history; it runs again under a fresh ticket.
			a.orphan, a.interrupted, a.due, a.deadline = false, true, in.StartedAt, now.Add(time.Hour)
			out.givenBack = append(out.givenBack, inheritedAttempt{in.ID, a})
			out.backWhy = append(out.backWhy, outcome{instance: in.ID, notStarted: why, givenBackErr: "not started: " + why,
				res: runner.Result{Ticket: in.Ticket, Status: runner.StatusFailed, Error: why}})
			t.log.Warn("claimed_ahead_given_back", "task", in.TaskID, "run", in.RunID, "ticket", in.Ticket, "fire_at", in.StartedAt.Format(time.RFC3339Nano), "reason", why)
			continue
		}
		out.inherited = append(out.inherited, inheritedAttempt{in.ID, a})
		t.log.Warn("running_instance_reconciled", "task", in.TaskID, "run", in.RunID, "ticket", in.Ticket, "deadline", a.deadline.Format(time.RFC3339))
	}
	return out
}

// reconcile is the takeover of a term's start: the loop reads what was
// left RUNNING, finds each one's task (a stand-in for a task removed from
// the files while it ran: still tracked, under its stored definition, so
// that it times out, can be killed and ends, FAILED, never retried), lets
// the takeover judge, and hands the verdicts on.
func (e *Engine) reconcile(ctx context.Context, now time.Time) error {
	l, err := e.takeover.read(ctx)
	if err != nil {
		return err
	}
	e.completer.forgetAsked()
	tasks := map[string]*taskInfo{}
	for _, in := range l.insts {
		ti := e.sched.tasks[in.TaskID]
		if ti == nil {
			if ti, err = e.removedTask(ctx, in.TaskID); err != nil {
				return err
			}
		}
		tasks[in.TaskID] = ti
	}
	running := map[int64]string{}
	for id, a := range e.dispatcher.running.all() {
		running[id] = a.ticket
	}
	got := e.takeover.judge(l, tasks, e.leadership.prevLeaseEnd, running, now)
	for id, v := range got.versions {
		e.dispatcher.running.get(id).version = v
	}
	for i, x := range got.givenBack {
		x.a.live = e.resolver.runs.kindOf(ctx, x.a.runID) == axtype.RunSchedule
		e.dispatcher.track(x.id, x.a)
		e.completer.gather(got.backWhy[i])
	}
	for _, x := range got.inherited {
		x.a.live = e.resolver.runs.kindOf(ctx, x.a.runID) == axtype.RunSchedule
		e.dispatcher.track(x.id, x.a)
	}
	e.completer.inheritProcs(l.procs, now)
	return nil
}

// inheritedDeadline is when an attempt inherited in RUNNING times out
// here; until then it holds its slots under the caps. Its timeout counts
// from the latest of: its recorded start; the last recorded redispatch of
// its ticket (resent: ticket → when), since the executor runs it under
// that later deadline; and, for a local attempt, the end of the previous
// lease, since it may have waited in its process's start queue after it
// was recorded (its real start is not stored) and that process started
// nothing after its lease ended. An earlier deadline would judge it while
// it may still run, and let a retry or another attempt under its caps run
// beside it.
func inheritedDeadline(in axtype.Instance, t *defs.Task, resent map[string]time.Time, prevLeaseEnd time.Time) time.Time {
	from := in.StartedAt
	if at, ok := resent[in.Ticket]; ok && at.After(from) {
		from = at
	}
	if isLocal(t) && prevLeaseEnd.After(from) {
		from = prevLeaseEnd
	}
	return deadlineAfter(from, t)
}

// neverStarted says why an attempt inherited in RUNNING certainly never
// started, or "" when it may have (it is then asked about, and with no
// answer fails at its deadline as an unknown outcome, see orphan.go):
//   - it was claimed ahead (its procs row held, under an epoch) and its
//     fire time is past the hand-out recorded for that epoch (handOuts),
//     which is written before any held attempt starts (startHeld);
//   - it was claimed ahead for a fire time after the end of the previous
//     term's lease: that process started nothing so late (it starts held
//     attempts only while its lease is safely held). Strictly after: a
//     lease released at once by a stopping primary ends at the very
//     millisecond it may have started an attempt (a run-now, a held one
//     opening), and that one did start.
//
// An attempt of a task removed from the files is never judged unstarted:
// its outcome is unknown, and it fails at its deadline.
func neverStarted(in axtype.Instance, ti *taskInfo, rec store.ProcRecord, found bool, handOuts map[int64]time.Time, prevLeaseEnd time.Time) string {
	fire := in.StartedAt.UTC().Format(time.RFC3339Nano)
	switch {
	case ti.removed:
		return ""
	case found && rec.Kind == store.ProcHeld && in.StartedAt.After(handOuts[rec.Epoch]):
		return "claimed ahead to start at " + fire + " by a previous primary that stopped before handing it out: it never started; given back, the attempt not counted"
	case !prevLeaseEnd.IsZero() && in.StartedAt.After(prevLeaseEnd):
		return "claimed ahead to start at " + fire + ", after the previous primary's lease ended at " + prevLeaseEnd.UTC().Format(time.RFC3339Nano) +
			": it never started; given back, the attempt not counted"
	}
	return ""
}

// goneGrace is how long after an inherited local attempt's process group
// (or scheduler process) was first seen gone the results inbox still has
// to deliver the previous primary's result for it.
const goneGrace = 5 * time.Second

// goneJudged says whether an inherited local attempt whose process group
// (or scheduler process) was first seen gone at goneAt is now an unknown
// outcome: only once goneGrace has passed since and the results inbox has
// been read (inboxRead) after that. A group ends before its result is
// recorded: the previous primary, fenced, leaves that result in the inbox
// by ticket, and until the inbox has had that chance the attempt may have
// succeeded; a result read meanwhile is its outcome.
func goneJudged(goneAt, inboxRead, now time.Time) bool {
	due := goneAt.Add(goneGrace)
	return !now.Before(due) && !inboxRead.Before(due)
}
