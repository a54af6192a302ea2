package sim

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// The invariants, by the name the tally and the violations use.
const (
	invSingleFlight = "I1 one attempt at a time"
	invOneSuccess   = "I2 one success, and only from a run"
	invUpstream     = "I3 no start before upstreams succeeded"
	invDueFire      = "I4 every due fire dispatched or explained"
	invRunsEnd      = "I5 every run ends or names its wait"
	invReplay       = "I6 history replays to state"
	invFence        = "I7 no fenced write lands"
	invBadVerb      = "I8 bad verbs change nothing"
	invMisfire      = "I4 every due fire dispatched or explained (misfire)"
	invCaps         = "I9 caps hold"
	invFireTime     = "I10 no start before the fire time"
	invAttempts     = "I11 every attempt's output and record are its own, and attempt numbers never repeat"
	invExcluded     = "I12 no dispatch to an excluded executor"
	invPause        = "I13 nothing under a pause starts"
	invBreakerCut   = "I14 an open breaker cuts the task to a tenth"
	invChanged      = "I15 a changed schedule is judged by the new schedule from the change on"
)

// outage is a time when no engine ran, ended by a new process's start.
// split marks one with an engine between that ran only briefly: whether it
// took the lease and decided the backlog in that instant is a matter of
// goroutine order, so the exact misfire count is not checked across it.
type outage struct {
	down, up time.Time
	split    bool
}

// row is one history row as the checker keeps it.
type row struct {
	id       int64
	at       time.Time
	from, to axtype.State
	ticket   string
	actor    string
	reason   string
	epoch    int64
}

// inst is the checker's replay of one instance's history.
type inst struct {
	id       int64
	run      int64
	task     string
	logical  time.Time
	rows     []row
	reruns   int // operator moves out of a terminal state
	success  int
	dirty    bool // rows were added since the last comparison with the store
	created  time.Time
	createdS bool // created SCHEDULED (a root of its run)
}

// state returns the instance's state at t by its history (and whether it existed).
func (in *inst) stateAt(t time.Time) (axtype.State, bool) {
	var s axtype.State
	ok := false
	for _, r := range in.rows {
		if r.at.After(t) {
			break
		}
		s, ok = r.to, true
	}
	return s, ok
}

func (in *inst) state() axtype.State { return in.rows[len(in.rows)-1].to }

// lastInto returns the id of the last history row that moved in to state s
// at or before t (0: none).
func (in *inst) lastInto(s axtype.State, t time.Time) int64 {
	var id int64
	for _, r := range in.rows {
		if r.at.After(t) {
			break
		}
		if r.to == s {
			id = r.id
		}
	}
	return id
}

// reachedBy reports whether in moved to state s at or before t.
func (in *inst) reachedBy(s axtype.State, t time.Time) bool {
	for _, r := range in.rows {
		if r.at.After(t) {
			return false
		}
		if r.to == s {
			return true
		}
	}
	return false
}

// span is an interval of simulated time.
type span struct{ from, to time.Time }

// checker holds the replayed store and what the world did, and checks the
// invariants after every step.
type checker struct {
	w           *world
	routeSeen   int // dispatches checked for I12 so far
	lastID      int64
	maxEpoch    int64
	epochRow    int64
	insts       map[int64]*inst
	runs        map[int64]map[string]int64 // run → task → instance
	runKey      map[string]int64           // trigger|kind|logical ms → run
	backfills   map[int64]bool             // the runs of backfills that count other pipelines' upstreams as done (no --wait-cross)
	fireAt      map[int64]time.Time        // run → its fire time: its logical time, or an operator's run's creation
	runTrig     map[int64]string           // schedule run → its trigger
	changesSeen int                        // schedule changes whose dropped runs were forgotten
	byTask      map[string][]int64         // task → instances, in id order
	execSeen    int                        // executions checked for I3 so far
	byTicket    map[string][]*execution    // a ticket runs again when a scheduler that took over re-dispatches it
	execByIns   map[int64][]*execution
	execByTsk   map[string][]*execution
	execAll     []*execution // every execution, in start order, for I9

	// coverage: spans in which one engine was primary throughout, and no
	// fault hit the store, per the checks that observed it.
	lastPrimary *node
	lastCheck   time.Time
	covered     []span
	gaps        []span // store faults, stalls, crashes: not covered
	fired       map[string]time.Time
	pauses      []span // any pause in force (coarse: whole world)
	pausedSince time.Time
	misfires    []outage // outages whose misfire decisions are still to check
	lastOutage  outage
	caps        map[string][]capMark // the caps on running attempts (localCap, groups), as observed at each check that saw one change
	capSeen     int                  // executions checked for I9 so far
	// leader is the primary at the last check; leaders are the
	// checks that saw another one (or none) lead: a task's breaker lives in
	// the memory of the process that opened it.
	leader     *node
	leaderSeen bool
	leaders    []leaderMark
	held       pauseLog // I13: the pauses in force by the action log, and the dispatches under them
	cuts       cutLog   // I14: the breaker openings still to judge
}

// leaderMark is a check that saw n (nil: none) lead where the check
// before saw another, or the first check.
type leaderMark struct {
	at   time.Time
	n    *node
	prev time.Time // the check before, which saw another lead (the change came after it)
}

// capMark is a change of a cap on running attempts seen at
// check at; it was applied somewhere in (since, at] (a queued limits
// request is applied whenever the primary reads the queue), so both
// values count in that span.
type capMark struct {
	since, at time.Time
	value     int
}

func newChecker(w *world) *checker {
	return &checker{w: w, insts: map[int64]*inst{}, runs: map[int64]map[string]int64{}, runKey: map[string]int64{}, backfills: map[int64]bool{},
		fireAt: map[int64]time.Time{}, runTrig: map[int64]string{}, byTask: map[string][]int64{}, byTicket: map[string][]*execution{}, execByIns: map[int64][]*execution{}, execByTsk: map[string][]*execution{}, fired: map[string]time.Time{}}
}

func (c *checker) down(n *node, at time.Time) {
	c.gaps = append(c.gaps, span{at, at})
	c.lastPrimary = nil
	// an outage whose restart went down again before its check: its
	// decisions may be taken again by the next start; not judged
	var keep []outage
	for _, o := range c.misfires {
		if at.After(o.up.Add(5 * time.Second)) {
			keep = append(keep, o)
		}
	}
	c.misfires = keep
}

func (c *checker) up(n *node, at time.Time) { c.lastPrimary = nil }

func (c *checker) faulty(from, to time.Time) {
	// after store errors the engine waits up to 30 s before its next turn
	c.gaps = append(c.gaps, span{from, to.Add(32 * time.Second)})
	c.lastPrimary = nil
}

// snapshot sums up what an operator request can change, for the bad-verb
// check: the pauses, the settings (limits) and the last history row; the
// rows after it are judged by their actor, since the engine's own work
// goes on in the same instant.
func (c *checker) snapshot() string {
	ctx := context.Background()
	h, _ := c.w.st.History(ctx, store.LogFilter{Newest: true, Limit: 1})
	ps, _ := c.w.st.Pauses(ctx)
	set, _ := c.w.st.Settings(ctx)
	var b strings.Builder
	if len(h) > 0 {
		fmt.Fprintf(&b, "history#%d ", h[0].ID)
	}
	for _, p := range ps {
		fmt.Fprintf(&b, "pause %s/%s ", p.Scope, p.Name)
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s ", k, set[k])
	}
	return b.String()
}

// changedBy reports the changes between two snapshots that an operator
// (actor) made: pauses or settings that differ, history rows by actor.
func (c *checker) changedBy(before, after, actor string) string {
	strip := func(s string) string {
		if i := strings.IndexByte(s, ' '); strings.HasPrefix(s, "history#") && i >= 0 {
			return s[i+1:]
		}
		return s
	}
	if strip(before) != strip(after) {
		return fmt.Sprintf("%q → %q", strip(before), strip(after))
	}
	var id int64
	fmt.Sscanf(before, "history#%d", &id)
	rows, err := c.w.st.History(context.Background(), store.LogFilter{AfterID: id, Limit: 10000})
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, r := range rows {
		if r.Actor == actor {
			fmt.Fprintf(&b, "[#%d %s %d %s→%s %s %q] ", r.ID, r.TaskID, r.InstanceID, r.From, r.To, r.Actor, r.Reason)
		}
	}
	return b.String()
}

// check reads what happened since the last check and checks every invariant.
func (c *checker) check(final bool) {
	now := time.Now()
	c.observeCoverage(now)
	c.readHistory()
	c.forgetDropped()
	c.checkExecutions()
	c.checkRouting()
	c.checkPauseStarts(final)
	c.checkBreakerCuts(now, final)
	c.observeCaps(now)
	c.checkCaps()
	c.compareState(final)
	c.checkFires(now, final)
	c.checkMisfires(now)
	if final {
		c.checkRunsEnd(now)
		c.checkAttempts()
	}
	c.lastCheck = now
}

// observeCoverage extends the covered spans: the same engine primary at
// this check and the last, with nothing down or faulty between.
func (c *checker) observeCoverage(now time.Time) {
	p := c.w.primary()
	if p != nil && p == c.lastPrimary && !c.w.quiet || p != nil && p == c.lastPrimary && c.w.quiet {
		if n := len(c.covered); n > 0 && c.covered[n-1].to.Equal(c.lastCheck) {
			c.covered[n-1].to = now
		} else {
			c.covered = append(c.covered, span{c.lastCheck, now})
		}
	}
	c.lastPrimary = p
	if !c.leaderSeen || p != c.leader {
		c.leaders = append(c.leaders, leaderMark{at: now, n: p, prev: c.lastCheck})
	}
	c.leader, c.leaderSeen = p, true
}

// readHistory replays new history rows: I6 (each row continues the last one
// by a move of the state table), I7 (epochs never go back) and I2.
func (c *checker) readHistory() {
	ctx := context.Background()
	for {
		rows, err := c.w.st.History(ctx, store.LogFilter{AfterID: c.lastID, Limit: 5000})
		if err != nil {
			c.w.violate("store", "read history: %v", err)
			return
		}
		for _, h := range rows {
			c.lastID = h.ID
			c.apply(h)
		}
		if len(rows) < 5000 {
			return
		}
	}
}

func (c *checker) apply(h store.HistoryRow) {
	w := c.w
	w.stats.Transitions++
	w.tally[invFence]++
	if h.Epoch < c.maxEpoch {
		w.violate(invFence, "history row %d (instance %d %s %s→%s by %s) carries epoch %d after row %d carried epoch %d",
			h.ID, h.InstanceID, h.TaskID, h.From, h.To, h.Actor, h.Epoch, c.epochRow, c.maxEpoch)
	}
	if h.Epoch > c.maxEpoch {
		c.maxEpoch, c.epochRow = h.Epoch, h.ID
	}
	r := row{id: h.ID, at: h.At, from: h.From, to: h.To, ticket: h.Ticket, actor: h.Actor, reason: h.Reason, epoch: h.Epoch}
	in := c.insts[h.InstanceID]
	w.tally[invReplay]++
	if in == nil {
		in = &inst{id: h.InstanceID, run: h.RunID, task: h.TaskID, created: h.At, createdS: h.To == axtype.Scheduled}
		c.insts[h.InstanceID] = in
		c.byTask[h.TaskID] = append(c.byTask[h.TaskID], h.InstanceID)
		if c.runs[h.RunID] == nil {
			c.runs[h.RunID] = map[string]int64{}
			w.stats.Runs++
			if run, err := w.st.Run(context.Background(), h.RunID); err == nil {
				c.runKey[runKey(run.Trigger, run.Kind, run.LogicalTime)] = run.ID
				c.backfills[run.ID] = run.Kind == axtype.RunBackfill && !c.waitsCross(run.BackfillID)
				c.fireAt[run.ID] = run.LogicalTime
				if run.Kind == axtype.RunSchedule {
					c.runTrig[run.ID] = run.Trigger
				}
				if run.Kind == axtype.RunManual {
					c.fireAt[run.ID] = run.CreatedAt // an operator's run fires when triggered, whatever its --at
				}
			} else {
				w.violate(invReplay, "run %d has history but cannot be read: %v", h.RunID, err)
			}
		}
		c.runs[h.RunID][h.TaskID] = h.InstanceID
		w.stats.Instances++
		if h.From != "" || (h.To != axtype.Waiting && h.To != axtype.Scheduled) {
			w.violate(invReplay, "instance %d %s: first history row %d is %q→%s, not a creation in WAITING or SCHEDULED", h.InstanceID, h.TaskID, h.ID, h.From, h.To)
		}
	} else {
		prev := in.state()
		switch {
		case h.From != prev:
			w.violate(invReplay, "instance %d %s: history row %d moves from %s but the previous row left it %s (%s): %s", h.InstanceID, h.TaskID, h.ID, h.From, prev, h.Reason, in.describe())
		case !axtype.CanTransition(h.From, h.To):
			w.violate(invReplay, "instance %d %s: history row %d moves %s→%s, which the state table forbids", h.InstanceID, h.TaskID, h.ID, h.From, h.To)
		}
	}
	in.rows = append(in.rows, r)
	in.dirty = true
	if h.From.Terminal() && h.To != axtype.Running || h.From == axtype.Paused && false {
		in.reruns++
	}
	if h.From == axtype.Failed && h.To == axtype.Running { // a rerun straight to dispatch
		in.reruns++
	}
	if h.To == axtype.Success {
		in.success++
		w.tally[invOneSuccess]++
		if in.success > 1+in.reruns {
			w.violate(invOneSuccess, "instance %d %s succeeded %d times with %d rerun(s): %s", h.InstanceID, h.TaskID, in.success, in.reruns, in.describe())
		}
		if h.Actor == "scheduler" {
			w.ex.mu.Lock()
			ok := c.ticketSucceeded(h.Ticket)
			w.ex.mu.Unlock()
			if !ok {
				w.violate(invOneSuccess, "instance %d %s recorded SUCCESS (row %d, ticket %.8s) but no execution of that ticket succeeded: %s",
					h.InstanceID, h.TaskID, h.ID, h.Ticket, in.describe())
			}
		}
	}
}

// ticketSucceeded reports whether an execution of ticket succeeded (w.ex.mu
// held). A ticket may run more than once: a scheduler that took over and
// found it unknown to every executor dispatches it again under the same
// ticket, so that an executor that has it answers from its cache.
func (c *checker) ticketSucceeded(ticket string) bool {
	for _, e := range c.byTicket[ticket] {
		if e.success {
			return true
		}
	}
	for _, e := range c.w.ex.list[c.execSeen:] {
		if e.ticket == ticket && e.success {
			return true
		}
	}
	return false
}

func (in *inst) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %d logical %s history [", in.run, in.logical.Format(time.RFC3339))
	for i, r := range in.rows {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "#%d %s %s→%s %.8s %s epoch %d %q", r.id, r.at.Format("15:04:05.000"), r.from, r.to, r.ticket, r.actor, r.epoch, r.reason)
	}
	b.WriteString("]")
	return b.String()
}

// checkExecutions checks new and running executions: I1 (no two attempts
// of one instance at once) and I3 (each started after its upstreams).
func (c *checker) checkExecutions() {
	w := c.w
	w.ex.mu.Lock()
	defer w.ex.mu.Unlock()
	var fresh []int64
	for _, e := range w.ex.list[c.execSeen:] {
		c.byTicket[e.ticket] = append(c.byTicket[e.ticket], e)
		c.execByIns[e.instance] = append(c.execByIns[e.instance], e)
		c.execByTsk[e.task] = append(c.execByTsk[e.task], e)
		c.execAll = append(c.execAll, e)
		c.upstreamsBefore(e)
		c.afterFireTime(e)
		fresh = append(fresh, e.instance)
	}
	c.execSeen = len(w.ex.list)
	// Only the instances with a new execution: two executions that did not
	// overlap when the later one was seen never come to (a running one
	// counts as running on; its end only shortens it). An execution counts
	// as the executor saw it, to its end: on an executor that fell silent
	// too, which may still run it.
	slices.Sort(fresh)
	for _, id := range slices.Compact(fresh) {
		list := c.execByIns[id]
		for i, a := range list {
			for _, b := range list[i+1:] {
				w.tally[invSingleFlight]++
				if overlap(span{a.start, a.end}, span{b.start, b.end}) {
					w.violate(invSingleFlight, "instance %d: two attempts at once: %s and %s; %s", id, a, b, c.insts[id].describe())
				}
			}
		}
	}
}

// overlap reports whether two executions, each seen as a start and an
// end (zero while it runs), overlap.
func overlap(a, b span) bool {
	aEnd, bEnd := a.to, b.to
	if aEnd.IsZero() {
		aEnd = time.Now().Add(time.Hour)
	}
	if bEnd.IsZero() {
		bEnd = time.Now().Add(time.Hour)
	}
	return a.from.Before(bEnd) && b.from.Before(aEnd)
}

// checkRouting checks I12 for the dispatches sent since the last check: none
// goes to an executor excluded at that moment, one that registered and was
// not heard from within runner.Silence, by a heartbeat or registration the
// scheduler took, or by a dispatch it accepted from the same engine
// (docs/protocol.md). A task's own URL is no way around it: a dispatch to
// it is judged by the executor at that address.
func (c *checker) checkRouting() {
	m := c.w.net
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.dispatches[c.routeSeen:] {
		c.w.tally[invExcluded]++
		hb, registered := lastAtOrBefore(m.heartbeats[d.host], d.at)
		if !registered {
			continue // never registered: not excluded, the task's URL is all there is
		}
		heard := hb
		if t, ok := lastAtOrBefore(m.accepts[d.from+"|"+d.host], d.at); ok && t.After(heard) {
			heard = t
		}
		if d.at.Sub(heard) > runner.Silence {
			c.w.violate(invExcluded, "%s sent a dispatch to %s at %s, which was last heard from at %s (%s before: excluded)",
				d.from, d.host, d.at.Format("15:04:05.000"), heard.Format("15:04:05.000"), d.at.Sub(heard))
		}
	}
	c.routeSeen = len(m.dispatches)
}

// lastAtOrBefore returns the latest of ts (in order) at or before t.
func lastAtOrBefore(ts []time.Time, t time.Time) (time.Time, bool) {
	var last time.Time
	ok := false
	for _, x := range ts {
		if x.After(t) {
			break
		}
		last, ok = x, true
	}
	return last, ok
}

// upstreamsBefore checks I3 for one execution: every upstream in the same
// run had succeeded by its start; and I3c (crossMatched) for each upstream
// in another pipeline.
func (c *checker) upstreamsBefore(e *execution) {
	w := c.w
	in := c.insts[e.instance]
	if in == nil {
		w.violate(invUpstream, "%s started but its instance has no history", e)
		return
	}
	in.logical = e.logical
	start := e.start.Truncate(time.Millisecond)
	for _, u := range w.g.Upstream(in.task) {
		w.tally[invUpstream]++
		uid := u.ID()
		t := w.g.Task(in.task)
		if u.Pipeline == t.Pipeline {
			ui, ok := c.runs[in.run][uid]
			if !ok {
				continue // outside the run (a trigger of a task in the middle): satisfied
			}
			if !c.insts[ui].reachedBy(axtype.Success, start) {
				w.violate(invUpstream, "%s started before its upstream %s (instance %d) succeeded: %s; upstream %s",
					e, uid, ui, in.describe(), c.insts[ui].describe())
			}
			continue
		}
		if c.backfills[in.run] {
			continue // a backfill's selection is its pipeline's: upstreams elsewhere count as done, unless --wait-cross (docs/commands.md)
		}
		c.crossMatched(e, in, uid, start)
	}
}

// afterFireTime checks I10 for one execution: it started no earlier than
// its run's fire time plus its task's delay, however early its upstreams
// succeeded (in another pipeline, or marked by an operator) and whoever
// released it (a result, an approval, a rerun, a resume, a takeover).
func (c *checker) afterFireTime(e *execution) {
	in := c.insts[e.instance]
	if in == nil {
		return // I3 reports it
	}
	fire, ok := c.fireAt[in.run]
	task := c.w.g.Task(in.task)
	if !ok || task == nil {
		return
	}
	c.w.tally[invFireTime]++
	if due := fire.Add(task.Delay); e.start.Truncate(time.Millisecond).Before(due) {
		c.w.violate(invFireTime, "%s started %s before its run's fire time %s plus its delay %s: %s",
			e, due.Sub(e.start).Round(time.Millisecond), fire.Format(time.RFC3339), task.Delay, in.describe())
	}
}

// logicalOf returns an instance's logical time, from the store when no
// execution told it yet.
func (c *checker) logicalOf(in *inst) time.Time {
	if in.logical.IsZero() {
		if got, err := c.w.st.Instance(context.Background(), in.id); err == nil {
			in.logical = got.LogicalTime
		}
	}
	return in.logical
}

// compareState checks I6's second half: each replayed instance's last state
// and row count are the store's state and version. The instances to compare
// (those with new rows, or all) are read a range of ids at a time.
func (c *checker) compareState(all bool) {
	var ids []int64
	for id, in := range c.insts {
		if in.dirty || all {
			ids = append(ids, id)
			in.dirty = false
		}
	}
	slices.Sort(ids)
	for len(ids) > 0 {
		// a range of ids with few that need no reading
		n := 1
		for n < len(ids) && ids[n]-ids[n-1] <= 8 {
			n++
		}
		lo, hi := ids[0], ids[n-1]
		got, err := c.w.st.Instances(context.Background(), store.InstanceFilter{BeforeID: hi + 1, Limit: int(hi - lo + 1)})
		if err != nil {
			c.w.violate("store", "read instances %d-%d: %v", lo, hi, err)
			return
		}
		byID := make(map[int64]axtype.Instance, len(got))
		for _, g := range got {
			byID[g.ID] = g
		}
		for _, id := range ids[:n] {
			if in := c.insts[id]; in != nil { // nil: its run was forgotten (dropped) just before
				c.compareOne(in, byID)
			}
		}
		ids = ids[n:]
	}
}

// compareOne compares one instance with the store's row in byID.
func (c *checker) compareOne(in *inst, byID map[int64]axtype.Instance) {
	got, ok := byID[in.id]
	if !ok && c.dropped(in) && c.gone(in.id) {
		c.forgetRun(in.run) // a schedule change dropped its run, made ahead and never started
		return
	}
	if !ok { // ids need not be dense: read it alone
		var err error
		if got, err = c.w.st.Instance(context.Background(), in.id); err != nil {
			c.w.violate(invReplay, "instance %d has history but cannot be read: %v", in.id, err)
			return
		}
	}
	in.logical = got.LogicalTime
	c.w.tally[invReplay]++
	// every transition bumps the version and writes one row; other
	// writes (an approval) may bump it without a change of state
	if got.State != in.state() || got.Version < int64(len(in.rows)) {
		c.w.violate(invReplay, "instance %d %s is %s at version %d, but its %d history rows replay to %s: %s",
			in.id, in.task, got.State, got.Version, len(in.rows), in.state(), in.describe())
	}
	// Its attempt is its count of dispatches: more only when one came after
	// the history was read (a newer version).
	n := len(in.dispatches())
	c.w.tally[invAttempts]++
	if got.Attempt < n || got.Version == int64(len(in.rows)) && got.Attempt != n {
		c.w.violate(invAttempts, "instance %d %s is at attempt %d after %d dispatches (each is one past the last): %s",
			in.id, in.task, got.Attempt, n, in.describe())
	}
}

// dispatches returns the tickets in was dispatched under, in order: the
// k-th move of its history into RUNNING is its attempt k (a ticket sent
// again that never reached an executor moves nothing, and stays its
// attempt).
func (in *inst) dispatches() []string {
	var out []string
	for _, r := range in.rows {
		if r.to == axtype.Running {
			out = append(out, r.ticket)
		}
	}
	return out
}

// checkAttempts checks I11 on every instance dispatched more than once (a
// single attempt has no other to mix with): the stored record of attempt k
// is its k-th dispatch's, and so is every line of output stored under k.
func (c *checker) checkAttempts() {
	ctx := context.Background()
	for _, id := range slices.Sorted(maps.Keys(c.insts)) {
		in := c.insts[id]
		tickets := in.dispatches()
		if len(tickets) < 2 {
			continue
		}
		owner := func(k int) string {
			if k < 1 || k > len(tickets) {
				return "none (no such dispatch)"
			}
			return tickets[k-1]
		}
		recs, err := c.w.st.Attempts(ctx, id)
		if err != nil {
			c.w.violate("store", "read the attempts of instance %d: %v", id, err)
			return
		}
		for _, r := range recs {
			c.w.tally[invAttempts]++
			if r.Ticket != owner(r.Attempt) {
				c.w.violate(invAttempts, "instance %d %s: the record of attempt %d is ticket %.8s's (%s), but its attempt %d was ticket %.8s: %s",
					id, in.task, r.Attempt, r.Ticket, r.Status, r.Attempt, owner(r.Attempt), in.describe())
			}
		}
		nums, err := c.w.st.LogAttempts(ctx, id)
		if err != nil {
			c.w.violate("store", "read the output of instance %d: %v", id, err)
			return
		}
		for _, k := range nums {
			chunks, err := c.w.st.LogChunks(ctx, id, k, 0, 0)
			if err != nil {
				c.w.violate("store", "read the output of instance %d attempt %d: %v", id, k, err)
				return
			}
			for _, ch := range chunks {
				lines, _ := runner.DecodeLines(ch.Data)
				for _, l := range lines {
					_, t, ok := strings.Cut(string(l.Text), "msg=\""+attemptLine+"\" ticket=")
					c.w.tally[invAttempts]++
					if ok && t != owner(k) {
						c.w.violate(invAttempts, "instance %d %s: the output stored as attempt %d (chunk %d) is ticket %.8s's, but its attempt %d was ticket %.8s: %s",
							id, in.task, k, ch.Seq, t, k, owner(k), in.describe())
					}
				}
			}
		}
	}
}

// coveredSpan reports whether [from, to] lies inside one covered span and
// meets no gap.
func (c *checker) coveredSpan(from, to time.Time) bool {
	for _, g := range c.gaps {
		if !g.to.Before(from) && !g.from.After(to) {
			return false
		}
	}
	for _, s := range c.covered {
		if !s.from.After(from) && !s.to.Before(to) {
			return true
		}
	}
	return false
}

// bound is how late a due fire may be dispatched: a few seconds, plus the
// time the dispatch rates need for every task of the world.
func (c *checker) bound() time.Duration {
	b := 8 * time.Second
	rates := []float64{c.w.spec.rate}
	for _, r := range c.w.spec.groups {
		rates = append(rates, r)
	}
	for _, r := range rates {
		if r > 0 {
			b += time.Duration(float64(c.w.stats.Tasks)/r*float64(time.Second)) + 2*time.Second
		}
	}
	if c.w.limited {
		b += 60 * time.Second
	}
	return b
}

// checkFires checks I4 for every fire of every schedule, computed
// independently (expect.go), that fell due in a covered span at least a
// bound ago: its run exists and each root left SCHEDULED within the bound,
// or waits behind its own task's previous instance (overlap: wait), or a
// pause was in force.
func (c *checker) checkFires(now time.Time, final bool) {
	w := c.w
	b := c.bound()
	// a fire is judged once its roots' delays have passed too
	var delay time.Duration
	for _, t := range w.g.Order() {
		delay = max(delay, t.Delay)
	}
	until := now.Add(-b - delay)
	for _, tr := range w.g.Triggers() {
		name := tr.Name()
		forms := w.formsOf(name)
		if len(forms) == 0 {
			continue
		}
		from := c.fired[name]
		if from.IsZero() {
			from = w.spec.start
		}
		if !until.After(from) {
			continue
		}
		loc := tr.Schedule.Location()
		var fires []fire
		for _, s := range c.covered {
			lo, hi := s.from, s.to
			if from.After(lo) {
				lo = from
			}
			if until.Before(hi) {
				hi = until
			}
			if !hi.After(lo) {
				continue
			}
			// each fire by the form in force at it (a changed schedule)
			for _, form := range forms {
				for _, f := range expectedFires(*form, loc, w.spec.start, lo, hi) {
					if w.cronAt(name, f.at) == form && !w.nearChange(name, f.at) {
						fires = append(fires, f)
					}
				}
			}
		}
		slices.SortFunc(fires, func(a, b fire) int { return a.at.Compare(b.at) })
		for _, f := range fires {
			form := w.cronAt(name, f.at)
			if !c.coveredSpan(f.at.Add(-2*time.Second), f.at.Add(b+delay)) || c.pausedDuring(f.at.Add(-5*time.Minute), f.at.Add(b+delay)) {
				continue
			}
			if f.repeated && w.opts.Restrict.FallBackWildcard && form.wildcard() {
				continue
			}
			w.tally[invDueFire]++
			c.checkFire(name, f.at, b)
		}
		c.fired[name] = until
	}
}

func (c *checker) checkFire(trigger string, at time.Time, b time.Duration) {
	w := c.w
	runID, ok := c.runKey[runKey(trigger, axtype.RunSchedule, at)]
	if !ok {
		w.violate(invDueFire, "%s was due at %s (%s) and has no run %s later", trigger, at.Format(time.RFC3339),
			at.In(w.locOf(trigger)).Format("15:04:05 MST"), b)
		return
	}
	for _, id := range c.runs[runID] {
		in := c.insts[id]
		if in == nil || !in.createdS {
			continue
		}
		// a root with a delay leaves SCHEDULED no earlier than the fire
		// time plus its delay
		due := at.Add(b)
		if t := w.g.Task(in.task); t != nil {
			due = due.Add(t.Delay)
		}
		left := false
		for _, r := range in.rows[1:] {
			if !r.at.After(due) {
				left = true
			}
		}
		// the overlap is judged at the release: the fire time plus the delay
		judged := due.Add(-b)
		if len(in.rows) > 1 && strings.Contains(in.rows[1].reason, "overlap") && !c.runningAt(in, judged) && !c.orphanAt(in, judged, in.rows[1].epoch) {
			w.violate(invDueFire, "%s was due at %s and skipped by its overlap policy, but no other attempt of %s ran then: %s",
				trigger, at.Format(time.RFC3339), in.task, in.describe())
			continue
		}
		if left || c.waitsBehind(in, due) || c.capFull(in, due) || c.breakerOpen(in.task, at, due) {
			continue
		}
		w.violate(invDueFire, "%s was due at %s; instance %d is still SCHEDULED %s later with nothing to explain it: %s",
			trigger, at.Format(time.RFC3339), in.id, due.Sub(at), in.describe())
	}
}

// localCap is the key of the cap on local attempts among the checker's caps;
// a group's cap is under the group's name.
const localCap = ""

// observeCaps records the caps in force: the stored limits' max_running and
// group caps (0: lifted), or the configured ones when none are stored. A
// stored value names every group cap in force (a group it leaves out is
// lifted).
func (c *checker) observeCaps(now time.Time) {
	l, ok, err := engine.StoredLimits(context.Background(), c.w.st)
	if err != nil {
		return // a store fault: seen at the next check
	}
	vals := map[string]int{localCap: simMaxRunning}
	maps.Copy(vals, c.w.spec.groupCaps)
	if ok {
		vals[localCap] = l.MaxRunning
		if l.GroupMaxRunning != nil {
			for g := range c.w.spec.groupCaps {
				vals[g] = 0
			}
			maps.Copy(vals, l.GroupMaxRunning)
		}
	}
	for key := range c.caps {
		if _, ok := vals[key]; !ok {
			vals[key] = 0
		}
	}
	if c.caps == nil {
		c.caps = map[string][]capMark{}
	}
	for key, v := range vals {
		if ms := c.caps[key]; len(ms) == 0 || ms[len(ms)-1].value != v {
			c.caps[key] = append(ms, capMark{since: c.lastCheck, at: now, value: v})
		}
	}
}

// capsAt returns the values the cap key may have had at t: one, or the old
// and the new one when t falls between the checks that saw it change. Before
// the first check the configured cap holds.
func (c *checker) capsAt(key string, t time.Time) []int {
	v := simMaxRunning
	if key != localCap {
		v = c.w.spec.groupCaps[key]
	}
	for _, m := range c.caps[key] {
		switch {
		case !m.since.After(t) && !m.at.Before(t):
			return []int{v, m.value} // changed around t
		case m.at.After(t):
			return []int{v}
		}
		v = m.value
	}
	return []int{v}
}

// capAt returns the tightest value cap key may have had at t, for
// explaining a wait.
func (c *checker) capAt(key string, t time.Time) int {
	vs := c.capsAt(key, t)
	v := vs[0]
	for _, x := range vs[1:] {
		v = tighter(v, x)
	}
	return v
}

// looseCapOver returns the loosest value cap key may have had at some
// time in [from, to] (0: none), for judging a start: from the attempt's
// admission to its start.
func (c *checker) looseCapOver(key string, from, to time.Time) int {
	vs := c.capsAt(key, from)
	for _, m := range c.caps[key] {
		if !m.since.After(to) && !m.at.Before(from) {
			vs = append(vs, m.value)
		}
	}
	v := -1
	for _, x := range vs {
		if x == 0 {
			return 0
		}
		v = max(v, x)
	}
	return v
}

// tighter returns the tighter of two caps, 0 being none.
func tighter(a, b int) int {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// capFull reports whether a cap held in back at t: its task's
// max_running or its group's cap, each as full as it is (instances
// RUNNING), or, for a local task, the cap on local attempts (the engine's
// own and those it inherited, which it counts until they end). Under a
// cap a due fire waits for a slot however long that takes.
func (c *checker) capFull(in *inst, t time.Time) bool {
	task := c.w.g.Task(in.task)
	if task.MaxRunning > 0 && c.countRunning(t, func(o *defs.Task) bool { return o == task }) >= task.MaxRunning {
		return true // the task's own max_running
	}
	if g := c.capAt(task.Group, t); g > 0 && c.countRunning(t, func(o *defs.Task) bool { return o.Group == task.Group }) >= g {
		return true // its group's cap
	}
	if task.Executor.Kind == defs.ExecHTTP {
		return false
	}
	limit := c.capAt(localCap, t)
	if limit == 0 {
		return false // lifted: no cap holds anything back
	}
	return c.countRunning(t, func(o *defs.Task) bool { return o.Executor.Kind != defs.ExecHTTP }) >= limit
}

// countRunning counts the instances RUNNING at t of the tasks that match.
func (c *checker) countRunning(t time.Time, match func(*defs.Task) bool) int {
	n := 0
	for _, o := range c.insts {
		if task := c.w.g.Task(o.task); task != nil && match(task) {
			if s, ok := o.stateAt(t); ok && s == axtype.Running {
				n++
			}
		}
	}
	return n
}

// checkCaps checks I9 on the executions that started since the last
// check: none starts while as many executions of its task as its
// max_running (from its file or its pipeline's defaults), or of its group
// as the group's cap (the loosest in force from the attempt's admission to
// its start: the caps are judged when an attempt is recorded RUNNING), are
// running. An execution runs from its
// start until its executor ends it (on a silent executor too: the
// scheduler keeps its attempt RUNNING): the engine frees the slot when the executor returns,
// before the result is recorded, so instances recorded RUNNING may outnumber
// the cap for a moment while executions never do. A cap lowered at run time
// stops nothing that runs; the start of one more is what it refuses. The
// cap on local attempts is not checked here: it is per server, and a
// stalled primary's attempts run on beside its successor's.
func (c *checker) checkCaps() {
	w := c.w
	w.ex.mu.Lock() // the ends of running executions are written under it
	defer w.ex.mu.Unlock()
	fresh := c.execAll[c.capSeen:]
	c.capSeen = len(c.execAll)
	for _, e := range fresh {
		task := w.g.Task(e.task)
		if task == nil {
			continue
		}
		if limit := task.MaxRunning; limit > 0 {
			if others := c.runningAtStart(e, func(o *defs.Task) bool { return o == task }); len(others) >= limit {
				w.violate(invCaps, "task %s: %s started while %d ran, at its max_running %d:%s", e.task, e, len(others), limit, describeExecs(others))
			}
		}
		if limit := c.looseCapOver(task.Group, c.admitted(e), e.start); limit > 0 {
			if others := c.runningAtStart(e, func(o *defs.Task) bool { return o.Group == task.Group }); len(others) >= limit {
				w.violate(invCaps, "group %s: %s started while %d of the group ran, at its cap %d:%s", task.Group, e, len(others), limit, describeExecs(others))
			}
		}
		w.tally[invCaps]++
	}
}

// admitted returns when e's attempt was recorded RUNNING (its ticket's
// RUNNING row: at its dispatch, or its claim ahead of its fire time), or
// its start when the history does not show it. A local attempt recorded
// beyond the server's free slots waits in the start queue; the caps were
// judged when it was recorded (docs/operating.md).
func (c *checker) admitted(e *execution) time.Time {
	if in := c.insts[e.instance]; in != nil {
		for _, r := range in.rows {
			if r.to == axtype.Running && r.ticket == e.ticket && !r.at.After(e.start) {
				return r.at
			}
		}
	}
	return e.start
}

// runningAtStart returns the executions of the tasks that match running
// when e started, e left out: started before it and not ended before it
// started, by the order of starts and ends (many fall on one instant). Ends and starts in
// one instant in two processes have no order: the scheduler counts a
// remote attempt as ended at its deadline while the executor ends it at
// the same deadline, in whichever order the goroutines run.
func (c *checker) runningAtStart(e *execution, match func(*defs.Task) bool) []*execution {
	var out []*execution
	for _, o := range c.execAll {
		if o.seq >= e.seq || (o.endSeq != 0 && o.endSeq < e.seq) {
			continue
		}
		if o.node != e.node && !o.end.IsZero() && !o.end.After(e.start) {
			continue
		}
		if task := c.w.g.Task(o.task); task == nil || !match(task) {
			continue
		}
		out = append(out, o)
	}
	return out
}

func describeExecs(es []*execution) string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString("\n      " + e.String())
	}
	return b.String()
}

// breakerOpen reports whether task's circuit breaker was open at some time
// in [from, to]. An open breaker cuts the task's dispatch rate to a tenth of
// its base (1/s by default), so its due fires, its retries and its
// re-offers share that rate and a fire waits however long the backlog
// takes. The breaker is open from a breaker_open alert of the task in the
// action log until its next alert (breaker_closed), in force while the
// process that opened it leads: it lives in that process's memory, which
// keeps it across its terms (a stall past the lease, then the lease taken
// back).
func (c *checker) breakerOpen(task string, from, to time.Time) bool {
	ctx := context.Background()
	var alerts []store.Action
	for _, kind := range []string{engine.AlertBreakerOpen, engine.AlertBreakerClosed} {
		as, err := c.w.st.Actions(ctx, store.LogFilter{TaskID: task, Action: kind, Limit: 1 << 20})
		if err != nil {
			return false
		}
		alerts = append(alerts, as...)
	}
	slices.SortFunc(alerts, func(a, b store.Action) int { return cmp.Compare(a.ID, b.ID) })
	for i, a := range alerts {
		if a.Action != engine.AlertBreakerOpen || a.At.After(to) {
			continue
		}
		end := to
		if i+1 < len(alerts) && alerts[i+1].At.Before(end) {
			end = alerts[i+1].At
		}
		// The checks see leaders only at checks: an alert between a change
		// and the next check was written by the leader before or after it.
		for _, n := range []*node{c.leaderAt(a.At), c.leaderNext(a.At)} {
			for _, s := range c.leading(n, a.At, end) {
				if !s.to.Before(from) && !s.from.After(to) {
					return true
				}
			}
		}
	}
	return false
}

// leaderAt returns the primary the checks saw lead at t, or, when they saw
// none then, the next they saw (an alert is written by a primary).
func (c *checker) leaderAt(t time.Time) *node {
	var n *node
	for _, m := range c.leaders {
		if m.at.After(t) && n != nil {
			break
		}
		n = m.n
	}
	return n
}

// leaderNext returns the leader the first check after t that saw a change
// saw (nil: none).
func (c *checker) leaderNext(t time.Time) *node {
	for _, m := range c.leaders {
		if m.at.After(t) {
			return m.n
		}
	}
	return nil
}

// leading returns the spans of [from, to] in which n may have led, by the
// checks: from a check that saw another lead back to the check before it
// (the change came between them) while n came back.
func (c *checker) leading(n *node, from, to time.Time) []span {
	var out []span
	start, in := from, true
	prev := from
	for _, m := range c.leaders {
		if !m.at.After(from) {
			continue
		}
		if m.at.After(to) {
			break
		}
		switch {
		case in && m.n != n:
			out = append(out, span{start, m.at})
			in = false
		case !in && m.n == n:
			start, in = prev, true
		}
		prev = m.at
	}
	if in {
		out = append(out, span{start, to})
	}
	return out
}

// waitsBehind reports whether another instance of in's task, of a schedule
// run, was not over at t while the task's overlap policy is not allow:
// overlap: wait (and late catch-ups) queue behind it, in fire order.
func (c *checker) waitsBehind(in *inst, t time.Time) bool {
	if c.w.g.Task(in.task).Overlap == "allow" {
		return false
	}
	for _, id := range c.byTask[in.task] {
		if id == in.id {
			continue
		}
		if s, ok := c.insts[id].stateAt(t); ok && (s == axtype.Running || s == axtype.Retrying || s == axtype.Scheduled) {
			return true
		}
	}
	return false
}

func (c *checker) pausedDuring(from, to time.Time) bool {
	for _, p := range c.pauses {
		if !p.to.Before(from) && !p.from.After(to) {
			return true
		}
	}
	return !c.pausedSince.IsZero() && !c.pausedSince.After(to)
}

// checkRunsEnd checks I5 after the calm: every instance is over, or waits
// on something it can name (a manual gate, an upstream not over yet, a
// cross-pipeline upstream, a fire time ahead).
func (c *checker) checkRunsEnd(now time.Time) {
	w := c.w
	old := now.Add(-w.longestAttempts())
	ids := make([]int64, 0, len(c.insts))
	for id := range c.insts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		in := c.insts[id]
		s := in.state()
		last := in.rows[len(in.rows)-1].at
		if s.Terminal() || last.After(old) {
			continue
		}
		w.tally[invRunsEnd]++
		t := w.g.Task(in.task)
		switch s {
		case axtype.Waiting:
			if why := c.waitReason(in); why != "" {
				continue
			}
			w.violate(invRunsEnd, "instance %d %s waits since %s and nothing it waits on can still happen (upstreams: %s): %s",
				id, in.task, last.Format(time.RFC3339), c.upstreamStates(in), in.describe())
		case axtype.Scheduled:
			got, err := w.st.Instance(context.Background(), id)
			if err == nil && got.NextFireAt.After(old) || c.waitsBehind(in, now) || c.capFull(in, now) || c.breakerOpen(in.task, now, now) {
				continue
			}
			w.violate(invRunsEnd, "instance %d %s is SCHEDULED since %s (fire %s) and never dispatched: %s", id, in.task, last.Format(time.RFC3339), got.NextFireAt.Format(time.RFC3339), in.describe())
		case axtype.Retrying:
			if c.waitsBehind(in, now) || c.capFull(in, now) || c.breakerOpen(in.task, now, now) {
				continue
			}
			fallthrough
		default:
			_ = t
			w.violate(invRunsEnd, "instance %d %s is %s since %s, longer than its timeout and retries allow: %s", id, in.task, s, last.Format(time.RFC3339), in.describe())
		}
	}
}

// waitReason names what a WAITING instance waits on, or "" when nothing
// it waits on can still happen.
func (c *checker) waitReason(in *inst) string {
	w := c.w
	t := w.g.Task(in.task)
	if t.Manual {
		return "manual gate"
	}
	for _, u := range w.g.Upstream(in.task) {
		if u.Pipeline != t.Pipeline {
			return "cross-pipeline upstream " + u.ID() // a wait with a named upstream (issue 14 adds its deadline)
		}
		ui, ok := c.runs[in.run][u.ID()]
		if !ok {
			continue
		}
		us := c.insts[ui].state()
		switch {
		case !us.Terminal():
			return "upstream " + u.ID() + " is " + string(us)
		case us != axtype.Success && w.opts.Restrict.WaitBehindFailed:
			return "upstream " + u.ID() + " is " + string(us) + " (tolerated until issue 14)"
		case us == axtype.Failed && w.opts.Restrict.WaitBehindUnattempted && strings.HasPrefix(c.insts[ui].rows[len(c.insts[ui].rows)-1].reason, "upstream "):
			return "upstream " + u.ID() + " failed without an attempt (tolerated until issue 14 items 3, 4)"
		}
	}
	return ""
}

func runKey(trigger string, kind axtype.RunKind, logical time.Time) string {
	return fmt.Sprintf("%s|%s|%d", trigger, kind, logical.UnixMilli())
}

// upstreamStates lists the states of an instance's upstreams in its run.
func (c *checker) upstreamStates(in *inst) string {
	var parts []string
	for _, u := range c.w.g.Upstream(in.task) {
		ui, ok := c.runs[in.run][u.ID()]
		switch {
		case u.Pipeline != c.w.g.Task(in.task).Pipeline:
			parts = append(parts, u.ID()+" (other pipeline)")
		case !ok:
			parts = append(parts, u.ID()+" (outside the run)")
		case c.insts[ui].state().Terminal() && c.insts[ui].state() != axtype.Success:
			parts = append(parts, fmt.Sprintf("%s #%d %s {%s}", u.ID(), ui, c.insts[ui].state(), c.insts[ui].describe()))
		default:
			parts = append(parts, fmt.Sprintf("%s #%d %s", u.ID(), ui, c.insts[ui].state()))
		}
	}
	return strings.Join(parts, ", ")
}

// checkMisfires checks the second half of I4 for outages ended 5 s ago or
// more: the fires that fell due while no engine ran follow the trigger's
// misfire policy exactly (docs/schedules.md): all run late when the
// earliest is at most engine.DefaultMisfireAfter late; else fire_once runs exactly one, the
// latest; skip none; fire_all the latest, up to the bound (10 here). A fire
// is run when its run exists and its roots were not skipped by the policy.
// Outages with a fault, a pause, or a fire just before them (possibly
// claimed and lost) are left alone.
func (c *checker) checkMisfires(now time.Time) {
	var later []outage
	for _, o := range c.misfires {
		if now.Before(o.up.Add(5 * time.Second)) {
			later = append(later, o)
			continue
		}
		if c.outageUnjudged(o) {
			continue
		}
		for _, tr := range c.w.g.Triggers() {
			c.checkOutageMisfires(tr, o)
		}
	}
	c.misfires = later
}

// outageUnjudged reports whether an outage is left alone by I4: one split by
// a restart, one followed by a fault while no scheduler covered the start,
// or one under a pause.
func (c *checker) outageUnjudged(o outage) bool {
	settled := o.up.Add(5 * time.Second)
	return o.split || !c.coveredSpan(o.up, settled) && c.faultedDuring(o.up, settled) || c.pausedDuring(o.down, settled)
}

// checkOutageMisfires judges one trigger's backlog over one outage.
func (c *checker) checkOutageMisfires(tr *dag.Trigger, o outage) {
	w := c.w
	if ch := w.changedAtUp(tr.Name(), o); ch != nil {
		c.checkChangedOutage(tr.Name(), ch, o)
		return
	}
	form := w.cronAt(tr.Name(), o.up.Add(-time.Millisecond)) // the start judged the backlog before any reload
	if form == nil || form.every > 0 || w.rootWaitsAcross(tr.Pipeline, tr.Tasks) {
		return // a run whose roots wait on another pipeline is neither started nor a misfire: the rule is silent
	}
	loc := tr.Schedule.Location()
	// a fire just before the crash, or claimed ahead of it, may have
	// started: its outcome is unknown, not a misfire
	if len(expectedFires(*form, loc, w.spec.start, o.down.Add(-65*time.Second), o.down.Add(2*time.Second))) > 0 {
		return
	}
	due, ok := c.releasedBeforeStart(tr, expectedFires(*form, loc, w.spec.start, o.down.Add(2*time.Second), o.up), o.up)
	if !ok {
		return
	}
	c.checkOldPlanRun(tr.Name(), due, o)
	missed, exact := c.backlog(tr.Name(), due, o.down)
	if len(missed) == 0 || !exact {
		return
	}
	if w.opts.Restrict.FirstFireLost && !c.ranBefore(tr.Name(), o.down) {
		return
	}
	c.judgeBacklog(tr.Name(), missed, o.up)
}

// releasedBeforeStart keeps the fires of an outage whose release (the fire
// time plus its task's delay) comes before the start at up. A fire at the
// very instant a scheduler starts has not passed: it is on time, not part of
// the backlog (seed 1032 of 3000); nor is one released at or after the
// start: it falls due when a scheduler runs. ok is false when a fire is late
// for one root and on time for another: the roots decide apiece, judged per
// task, not here.
func (c *checker) releasedBeforeStart(tr *dag.Trigger, due []fire, up time.Time) (_ []fire, ok bool) {
	lo, hi := time.Duration(-1), time.Duration(0)
	for _, name := range tr.Tasks {
		if t := c.w.g.Task(tr.Pipeline + "." + name); t != nil {
			if lo < 0 || t.Delay < lo {
				lo = t.Delay
			}
			hi = max(hi, t.Delay)
		}
	}
	lo = max(lo, 0)
	if slices.ContainsFunc(due, func(f fire) bool { return f.at.Add(lo).Before(up) && !f.at.Add(hi).Before(up) }) {
		return nil, false
	}
	for n := len(due); n > 0 && !due[n-1].at.Add(lo).Before(up); n = len(due) {
		due = due[:n-1]
	}
	return due, true
}

// misfireWant is how many of a backlog the policy runs: all when the
// earliest is at most engine.DefaultMisfireAfter late at up; else one for
// fire_once, none for skip, up to 10 for fire_all.
func misfireWant(policy string, missed []fire, up time.Time) int {
	if up.Sub(missed[0].at) <= engine.DefaultMisfireAfter {
		return len(missed)
	}
	switch policy {
	case "fire_once":
		return 1
	case "skip":
		return 0
	default:
		return min(len(missed), 10)
	}
}

// judgeBacklog checks that the fires run of a backlog are as many as the
// policy wants, and the latest ones.
func (c *checker) judgeBacklog(trigger string, missed []fire, up time.Time) {
	w := c.w
	policy := w.misfireOf(trigger)
	want := misfireWant(policy, missed, up)
	var ran []time.Time
	for _, f := range missed {
		if c.keptFire(trigger, f.at) {
			ran = append(ran, f.at)
		}
	}
	w.tally[invMisfire]++
	ok := len(ran) == want
	if ok && want > 0 && want < len(missed) {
		ok = ran[len(ran)-1].Equal(missed[len(missed)-1].at) && ran[0].Equal(missed[len(missed)-want].at)
	}
	if !ok {
		w.violate(invMisfire, "%s (misfire: %s) missed %d fire(s) from %s to %s while no scheduler ran (up again at %s): want %d run, the latest; ran %d: %v",
			trigger, policy, len(missed), missed[0].at.Format(time.RFC3339), missed[len(missed)-1].at.Format(time.RFC3339),
			up.Format(time.RFC3339), want, len(ran), ran)
	}
}

// backlog returns the fires of an outage that make up its backlog
// (docs/schedules.md): those without a run when the last engine went down,
// and those whose run was made ahead and had not started. A fire whose run
// an operator already ended before the outage (cancel, mark), or started
// ahead of its fire (a rerun), is not missed: it was decided while a
// scheduler ran; nor is one whose run was made ahead under a schedule
// changed since (oldPlanRun): the change rule decides it. exact is false
// when a run made ahead was ended in part (one root over, another not), where the
// engine counts the fire for one task and not the other.
func (c *checker) backlog(trigger string, fires []fire, down time.Time) (out []fire, exact bool) {
	for _, f := range fires {
		runID, ok := c.runKey[runKey(trigger, axtype.RunSchedule, f.at)]
		if !ok {
			out = append(out, f)
			continue
		}
		if c.oldPlanRun(trigger, runID, down) {
			continue // the change rule decides it (checkOldPlanRun), not the misfire rule
		}
		over, live := 0, 0
		for _, id := range c.runs[runID] {
			in := c.insts[id]
			if in == nil || !in.createdS {
				continue
			}
			switch s, existed := in.stateAt(down); {
			case !existed:
			case s.Terminal() || in.reachedBy(axtype.Running, down):
				// ended, or started (an operator's rerun ran it ahead of its
				// fire, seeds 6244 and 6767): decided while a scheduler ran
				over++
			default:
				live++
			}
		}
		switch {
		case over > 0 && live > 0:
			return nil, false
		case over == 0:
			out = append(out, f)
		}
	}
	return out, true
}

// faultedDuring reports whether a store fault span meets [from, to].
func (c *checker) faultedDuring(from, to time.Time) bool {
	for _, g := range c.gaps {
		if g.to.After(g.from) && !g.to.Before(from) && !g.from.After(to) {
			return true
		}
	}
	return false
}

// keptFire reports whether the fire of trigger at has a run whose roots
// were not skipped by the misfire policy.
func (c *checker) keptFire(trigger string, at time.Time) bool {
	runID, ok := c.runKey[runKey(trigger, axtype.RunSchedule, at)]
	if !ok {
		return false
	}
	for _, id := range c.runs[runID] {
		in := c.insts[id]
		if in == nil || !in.createdS {
			continue
		}
		for _, r := range in.rows {
			if strings.Contains(r.reason, "misfire") {
				return false
			}
		}
	}
	return true
}

// ranBefore reports whether trigger has a schedule run at or before t.
func (c *checker) ranBefore(trigger string, t time.Time) bool {
	prefix := trigger + "|" + string(axtype.RunSchedule) + "|"
	for k := range c.runKey {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			var ms int64
			fmt.Sscan(rest, &ms)
			if ms <= t.UnixMilli() {
				return true
			}
		}
	}
	return false
}

// runningAt reports whether another attempt of in's task ran at t, as
// far as anyone could know: its executor was running it, or the store had
// it RUNNING for a fire at or before t (a result lost on its way keeps it
// RUNNING until its timeout). An instance claimed ahead for a later fire
// does not count: that is the bug of issue 13 item 1.
func (c *checker) runningAt(in *inst, t time.Time) bool {
	c.w.ex.mu.Lock()
	for _, e := range c.execByTsk[in.task] {
		if e.instance != in.id && !e.start.After(t) && (e.end.IsZero() || !e.end.Before(t)) {
			c.w.ex.mu.Unlock()
			return true
		}
	}
	c.w.ex.mu.Unlock()
	for _, id := range c.byTask[in.task] {
		o := c.insts[id]
		if id == in.id {
			continue
		}
		// just before t: an attempt whose timeout is recorded at the fire
		// instant itself still ran when the fire was judged
		if s, ok := o.stateAt(t.Add(-time.Millisecond)); ok && s == axtype.Running && !c.logicalOf(o).After(t) {
			return true
		}
	}
	return false
}

// orphanAt reports whether another instance of in's task was RUNNING at t,
// dispatched under an epoch older than epoch: an attempt inherited from a
// previous scheduler process, whose outcome its successor cannot know.
func (c *checker) orphanAt(in *inst, t time.Time, epoch int64) bool {
	for _, id := range c.byTask[in.task] {
		o := c.insts[id]
		if id == in.id {
			continue
		}
		var last row
		for _, r := range o.rows {
			if r.at.After(t) {
				break
			}
			last = r
		}
		if last.to == axtype.Running && last.epoch < epoch {
			return true
		}
	}
	return false
}
