package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/axtype"
)

// This file is the one home of two rules:
//
//   - readiness: a WAITING instance runs when every upstream it has
//     succeeded and, for a manual task, an operator approved it;
//   - propagation: it fails, without running, when an upstream failed, was
//     killed or skipped, or its wait limit passed; and its own downstream
//     then fail the same way.
//
// decide judges one instance from what it waits on; settle applies decide to
// a run's candidates and follows failures downstream. Both are pure: the
// engine feeds them the states it read, and records what they return.

// The release time is the third rule of this file, and its one home:
// releaseAt, with runFire for the run's fire time. Every path that moves an
// instance to SCHEDULED computes its time with them: run creation, results
// and the readiness sweeps (releasable), approvals, marks, reruns, resume
// and a takeover's release of what a crash left waiting.

// releaseAt is when an instance of a run that fires at fire may start once
// nothing holds it any more: its delay after the later of the fire time and
// ready, the moment what held it (its upstreams, an approval, an operator's
// rerun) let go. So an instance never starts before its run's fire time
// plus its delay, however early its upstreams succeeded — in another
// pipeline, or marked by an operator. A zero ready is the fire time itself
// (a root at its run's creation).
func releaseAt(fire, ready time.Time, delay time.Duration) time.Time {
	return later(fire, ready).Add(delay)
}

// runFire is when a run fires: a schedule's or a backfill's run at its
// logical time, an operator's run when it was triggered (created), or at
// its logical time when that is ahead (a trigger --at a time to come, or
// --in a delay: the run is stored, and fires then).
func runFire(kind axtype.RunKind, logical, created time.Time) time.Time {
	if kind == axtype.RunManual {
		return later(created, logical)
	}
	return logical
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// upstreamView is one upstream of a WAITING instance as the rule sees it.
type upstreamView struct {
	id    string       // pipeline.task
	state axtype.State // "" for a cross-pipeline upstream with no instance in its window
	err   string       // its error, to tell a skip from a failure
	cross bool         // in another pipeline
	note  string       // of a cross one: the run it matched, or the window it waits for (crossMatch)
	// run and logical are the run a cross one matched (0: none).
	run     int64
	logical time.Time
}

// gateView is what decide needs to know of a WAITING instance.
type gateView struct {
	manual   bool // manual: true
	approved bool // an operator released the gate
	ups      []upstreamView
	logical  time.Time // when the wait began: the limits count from it
	// limit is the task's wait_timeout (0: none set); crossLimit applies,
	// when limit is 0, while a cross-pipeline upstream is pending.
	limit, crossLimit time.Duration
}

// verdict is decide's answer.
type verdict uint8

const (
	verdictWait  verdict = iota // keeps waiting
	verdictReady                // moves WAITING → SCHEDULED
	verdictFail                 // moves WAITING → FAILED without running
)

func (v verdict) String() string {
	return [...]string{"wait", "ready", "fail"}[v]
}

// decision is the verdict on one instance, with the reason written to it
// (the error when it fails, the reason when it waits; when it is ready, the
// runs its cross-pipeline upstreams matched, for its history).
type decision struct {
	verdict  verdict
	reason   string
	deadline time.Time // when it waits on upstreams with a limit: when it fails
}

// decide applies the readiness and propagation rules to one WAITING
// instance at now.
func decide(g gateView, now time.Time) decision {
	var pending []upstreamView
	crossPending := false
	for _, u := range g.ups {
		switch u.state {
		case axtype.Success:
			continue
		case axtype.Failed:
			if strings.HasPrefix(u.err, "skipped") {
				return decision{verdict: verdictFail, reason: "upstream " + u.id + " was skipped"}
			}
			return decision{verdict: verdictFail, reason: "upstream " + u.id + " failed"}
		case axtype.Killed:
			return decision{verdict: verdictFail, reason: "upstream " + u.id + " was killed"}
		}
		pending = append(pending, u)
		crossPending = crossPending || u.cross
	}
	if len(pending) > 0 {
		limit := g.limit
		if limit == 0 && crossPending {
			limit = g.crossLimit
		}
		names := make([]string, len(pending))
		for i, u := range pending {
			names[i] = u.id
			switch {
			case u.state == "":
				names[i] += " (" + cmpOr(u.note, "no run yet") + ")"
			case u.note != "":
				names[i] += " (" + string(u.state) + ", " + u.note + ")"
			case u.state != axtype.Waiting:
				names[i] += " (" + string(u.state) + ")"
			}
		}
		slices.Sort(names)
		d := decision{verdict: verdictWait, reason: "waiting for upstream " + strings.Join(names, ", ")}
		if limit > 0 {
			d.deadline = g.logical.Add(limit)
			if !now.Before(d.deadline) {
				first := pending[0]
				if g.limit == 0 { // the cross-pipeline limit: name that upstream
					for _, u := range pending {
						if u.cross {
							first = u
							break
						}
					}
				}
				return decision{verdict: verdictFail, reason: fmt.Sprintf("upstream %s not done after %s", first.id, shortDuration(limit)), deadline: d.deadline}
			}
			d.reason += " (fails at " + d.deadline.UTC().Format(time.RFC3339) + ")"
		}
		return d
	}
	if g.manual && !g.approved {
		return decision{verdict: verdictWait, reason: "awaiting approval"}
	}
	return decision{verdict: verdictReady, reason: matchedNotes(g.ups)}
}

// matchedNotes names the runs the cross-pipeline upstreams matched
// ("billing.load: matched run 4 of …"), for the history of a release.
func matchedNotes(ups []upstreamView) string {
	var notes []string
	for _, u := range ups {
		if u.cross && u.note != "" {
			notes = append(notes, u.id+": "+u.note)
		}
	}
	slices.Sort(notes)
	return strings.Join(notes, "; ")
}

// shortDuration writes 24h, 90m, 1h30m, 45s: without the zero units that
// time.Duration.String appends.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// instView is one instance of a run as settle sees it.
type instView struct {
	state    axtype.State
	err      string
	approved bool
}

// settleNode is one task of the run's pipeline: its upstreams in the same
// pipeline (those without an instance in the run are outside it and count
// as done) and what decide needs beyond them.
type settleNode struct {
	ups      []string // same-pipeline upstream task ids
	downs    []string // same-pipeline downstream task ids
	manual   bool
	limit    time.Duration
	hasCross bool
}

// settled is settle's decision on one instance of the run.
type settled struct {
	task string
	decision
}

// settle decides the WAITING instances among candidates in a run whose
// instances run returns (by task id; it is only read), and follows failures: the downstream of
// an instance that fails are decided too, transitively. cross returns the
// cross-pipeline upstreams of a task (nil when it has none); it is asked
// only for tasks that could otherwise be ready or wait. The result lists
// every WAITING instance it judged, in the order decided: those that
// become ready, fail, or keep waiting (with their deadline, if any).
func settle(run func(task string) (instView, bool), nodes map[string]settleNode, candidates []string, logical, now time.Time,
	crossLimit time.Duration, cross func(task string) ([]upstreamView, error)) ([]settled, error) {
	if len(candidates) == 0 {
		return nil, nil
	}
	state := make(map[string]instView, len(candidates))
	view := func(id string) (instView, bool) {
		if v, ok := state[id]; ok {
			return v, true
		}
		return run(id)
	}
	// An instance judged "wait" is judged again when an upstream fails later
	// in the sweep (candidates come in any order): its earlier verdict is
	// replaced. Those that fail or become ready leave WAITING in state, so
	// each is judged once more at most per failed upstream.
	var out []settled
	at := make(map[string]int, len(candidates)) // task → its verdict's index in out
	work := slices.Clone(candidates)
	for len(work) > 0 {
		id := work[0]
		work = work[1:]
		iv, ok := view(id)
		if !ok || iv.state != axtype.Waiting {
			continue
		}
		n, ok := nodes[id]
		if !ok {
			continue // a task no longer defined: left as it is
		}
		g := gateView{manual: n.manual, approved: iv.approved, logical: logical, limit: n.limit, crossLimit: crossLimit}
		for _, u := range n.ups {
			if uv, ok := view(u); ok {
				g.ups = append(g.ups, upstreamView{id: u, state: uv.state, err: uv.err})
			}
		}
		d := decide(g, now)
		if d.verdict != verdictFail && n.hasCross && cross != nil {
			xs, err := cross(id)
			if err != nil {
				return nil, err
			}
			g.ups = append(g.ups, xs...)
			d = decide(g, now)
		}
		// The earlier verdict is dropped (its slot emptied, compacted at the
		// end) and the new one goes last, in one step whatever the run's size.
		if k, ok := at[id]; ok {
			out[k].task = ""
		}
		switch d.verdict {
		case verdictFail:
			state[id] = instView{state: axtype.Failed, err: d.reason}
			work = append(work, n.downs...)
		case verdictReady:
			state[id] = instView{state: axtype.Scheduled}
		}
		at[id] = len(out)
		out = append(out, settled{task: id, decision: d})
	}
	return slices.DeleteFunc(out, func(s settled) bool { return s.task == "" }), nil
}

// RunStatus is what a run's instances say of it as a whole.
type RunStatus struct {
	// State is one of RunRunning, RunPaused, RunAwaiting, RunWaiting,
	// RunSuccess and RunFailed.
	State string `json:"state"`
	Over  bool   `json:"over"` // every instance is terminal
	// Awaiting lists the manual gates that wait for an operator.
	Awaiting []string `json:"awaiting,omitempty"`
	// Waiting says, per WAITING instance, what it waits on.
	Waiting map[string]string `json:"waiting,omitempty"`
	Failed  []string          `json:"failed,omitempty"`
	// Roots are the failures that ended the run, in task order: the
	// instances that failed, were killed or timed out waiting, not because
	// an upstream of the run failed.
	Roots []Failure `json:"roots,omitempty"`
}

// Run states of RunStatus.
const (
	RunRunning  = "running"           // something is scheduled, running or retrying
	RunPaused   = "paused"            // nothing runs; a paused instance holds it
	RunAwaiting = "awaiting approval" // nothing runs; a manual gate waits for an operator
	RunWaiting  = "waiting"           // nothing runs; it waits on another pipeline (until its wait limit)
	RunSuccess  = "success"           // every instance succeeded
	RunFailed   = "failed"            // every instance ended, and one failed or was killed
)

// StatusOf sums up a run from its instances: whether it is over, and if not,
// why not. manual reports whether a task is a manual gate. An instance that
// never ran is never counted as a success. It says what waiting instances
// wait on only as "waiting": StatusWith names it.
func StatusOf(ins []axtype.Instance, manual func(task string) bool) RunStatus {
	return StatusWith(ins, manual, nil)
}

// StatusWith is StatusOf with what each waiting instance waits on, by task
// (WaitReasons: judged now, from live state).
func StatusWith(ins []axtype.Instance, manual func(task string) bool, waits map[string]string) RunStatus {
	s := RunStatus{}
	for _, in := range ins {
		switch in.State {
		case axtype.Success:
		case axtype.Failed, axtype.Killed:
			s.Failed = append(s.Failed, in.TaskID)
			if !propagated(in.Pipeline, in.Error) {
				s.Roots = append(s.Roots, FailureOf(in))
			}
		case axtype.Waiting:
			if s.Waiting == nil {
				s.Waiting = map[string]string{}
			}
			why := cmpOr(waits[in.TaskID], "waiting")
			if manual != nil && manual(in.TaskID) && in.ApprovedBy == "" {
				s.Awaiting = append(s.Awaiting, in.TaskID)
				why = AwaitingReason(why)
			}
			s.Waiting[in.TaskID] = why
		}
	}
	slices.Sort(s.Awaiting)
	slices.Sort(s.Failed)
	slices.SortFunc(s.Roots, func(a, b Failure) int { return strings.Compare(a.Task, b.Task) })
	counts := RunCounts{States: map[axtype.State]int{}, Awaiting: len(s.Awaiting)}
	for _, in := range ins {
		counts.States[in.State]++
	}
	s.State, s.Over = RunStateOf(counts)
	return s
}

// RunCounts is what a run's state is decided from: how many of its
// instances are in each state, and how many of its WAITING ones are
// manual gates not yet approved.
type RunCounts struct {
	States   map[axtype.State]int
	Awaiting int
}

// RunStateOf is a run's state (one of RunStatus's) and whether it is over
// (every instance terminal), from its counts: something scheduled, running
// or retrying runs it; else a paused instance holds it; else a gate
// awaiting approval; else a waiting instance; else it ended, failed if an
// instance failed or was killed.
func RunStateOf(c RunCounts) (state string, over bool) {
	active := 0
	for st, n := range c.States {
		switch st {
		case axtype.Success, axtype.Failed, axtype.Killed, axtype.Waiting, axtype.Paused:
		default:
			active += n
		}
	}
	over = active+c.States[axtype.Waiting]+c.States[axtype.Paused] == 0
	switch {
	case active > 0:
		return RunRunning, over
	case c.States[axtype.Paused] > 0:
		return RunPaused, over
	case c.Awaiting > 0:
		return RunAwaiting, over
	case c.States[axtype.Waiting] > c.Awaiting:
		return RunWaiting, over
	case c.States[axtype.Failed]+c.States[axtype.Killed] > 0:
		return RunFailed, over
	}
	return RunSuccess, over
}

// AwaitingReason is what a manual gate not yet approved waits on, given
// what its instance waits on otherwise (why).
func AwaitingReason(why string) string {
	if strings.HasPrefix(why, "waiting for upstream") {
		return "awaiting approval; " + why
	}
	return "awaiting approval"
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
