package sim

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// schedChange is a change of a trigger's schedule: from old to form, in
// force from at on (docs/schedules.md: the live reload that brings it, or
// the start that finds the file changed while no scheduler ran).
type schedChange struct {
	at        time.Time
	asked     time.Time // when the change was brought: the reload's call, or the start
	old, form *cronForm
	down      *outage // changed while no scheduler ran: the outage it ended with
}

// changeTarget draws a trigger whose schedule a step may change, with its
// form: a cron form (an @every schedule is anchored where it starts) of a
// small pipeline, so that the new form stays in the seed's budget.
func (w *world) changeTarget(r interface{ IntN(int) int }) (string, *cronForm, func(*cronForm)) {
	type target struct {
		name string
		form *cronForm
		set  func(*cronForm)
	}
	var ts []target
	for _, p := range w.spec.pipelines {
		if len(p.tasks) > 8 {
			continue
		}
		if p.schedule != nil && p.schedule.every == 0 {
			ts = append(ts, target{p.name, p.schedule, func(f *cronForm) { p.schedule = f }})
		}
		for _, t := range p.tasks {
			if t.cron != nil && t.cron.every == 0 {
				ts = append(ts, target{p.name + "." + t.name, t.cron, func(f *cronForm) { t.cron = f }})
			}
		}
	}
	if len(ts) == 0 {
		return "", nil, nil
	}
	t := ts[r.IntN(len(ts))]
	return t.name, t.form, t.set
}

// reschedule changes the schedule of a trigger (drawn from w.schedRng):
// live, by a reload of every running engine, or, one time in two, in the
// files while no scheduler runs (an outage of 2 to 30 minutes), found by
// the next start. The checker then judges the trigger's fires by the old
// form before the change and the new one after it (cronAt), and, for a
// change found at a start, checks that no fire of the outage runs
// (checkChangedOutages).
func (w *world) reschedule() {
	r := w.schedRng
	name, old, set := w.changeTarget(r)
	if name == "" {
		w.logf("reschedule: no cron schedule to change")
		return
	}
	var form *cronForm
	for range 20 {
		if f := genCron(r, false); f.every == 0 && f.text != old.text {
			form = f
			break
		}
	}
	if form == nil {
		return
	}
	set(form)
	if _, err := w.compile(); err != nil || w.perHour() > instancesPerHour {
		set(old)
		_, _ = w.compile()
		w.logf("reschedule %s to %q: refused (%v, %d instances an hour)", name, form.text, err, w.perHour())
		return
	}
	live := w.live()
	for _, n := range live {
		if n.isFrozen() {
			live = nil // a frozen engine would apply it when it wakes: the change would have no one instant
		}
	}
	// a live change not in the instant a start judges its backlog
	settled := time.Now().After(w.chk.lastOutage.up.Add(5 * time.Second))
	if r.IntN(2) == 0 && len(live) > 0 && w.primary() != nil && settled {
		p, asked := w.primary(), time.Now()
		for _, n := range live {
			if _, err := n.eng.Reload(w.g); err != nil {
				w.violate("setup", "reload of %s on %s: %v", name, n.name, err)
			}
		}
		w.settle()
		// The primary applies it between two turns: at once, or, when its
		// loop waits (a store error's backoff), later. The change is in
		// force from when it was applied, seen within 100 ms.
		for i := 0; i < 100 && p.alive() && p.eng.Graph() != w.g; i++ {
			w.advance(100 * time.Millisecond)
		}
		w.changes[name] = append(w.changes[name], schedChange{at: time.Now(), asked: asked, old: old, form: form})
		w.logf("reload: %s's schedule %q → %q (applied: %v)", name, old.text, form.text, p.eng.Graph() == w.g)
		return
	}
	d := time.Duration(2+r.IntN(29)) * time.Minute
	w.logf("files changed while down: %s's schedule %q → %q", name, old.text, form.text)
	w.outage(d)
	o := w.chk.lastOutage
	w.changes[name] = append(w.changes[name], schedChange{at: o.up, asked: o.up, old: old, form: form, down: &o})
}

// cronAt returns the form of trigger's schedule in force at t.
func (w *world) cronAt(trigger string, t time.Time) *cronForm {
	cs := w.changes[trigger]
	for i := len(cs) - 1; i >= 0; i-- {
		if !t.Before(cs[i].at) {
			return cs[i].form
		}
	}
	if len(cs) > 0 {
		return cs[0].old
	}
	return w.cronOf(trigger)
}

// formsOf returns every form trigger's schedule had, the one in force now
// last.
func (w *world) formsOf(trigger string) []*cronForm {
	var out []*cronForm
	for _, c := range w.changes[trigger] {
		out = append(out, c.old)
	}
	if f := w.cronOf(trigger); f != nil {
		out = append(out, f)
	}
	return out
}

// nearChange reports whether t is within two seconds of a change of
// trigger's schedule: whether a fire there is the old form's or the new's
// is the instant's, not a rule's.
func (w *world) nearChange(trigger string, t time.Time) bool {
	for _, c := range w.changes[trigger] {
		if d := t.Sub(c.at); d > -2*time.Second && d < 2*time.Second {
			return true
		}
	}
	return false
}

// changedAtUp returns the change of trigger's schedule found by the start
// that ended outage o, if any.
func (w *world) changedAtUp(trigger string, o outage) *schedChange {
	for i, c := range w.changes[trigger] {
		if c.down != nil && c.down.down.Equal(o.down) && c.down.up.Equal(o.up) {
			return &w.changes[trigger][i]
		}
	}
	return nil
}

// checkChangedOutage checks I15 for trigger, whose schedule changed while
// no scheduler ran in outage o (found by the start that ended it): the new
// schedule is in force from that start on, so none of its fires in the
// outage is missed (none gets a run), and the old schedule's fires that
// fell due in it (released: the fire time plus its task's delay) never
// run: none gets a run at the start, and those made ahead do not start
// (they are skipped). A fire just before the crash, or claimed ahead of
// it, may have started, and is left out.
func (c *checker) checkChangedOutage(trigger string, ch *schedChange, o outage) {
	w := c.w
	loc := w.locOf(trigger)
	old := expectedFires(*ch.old, loc, w.spec.start, o.down.Add(2*time.Second), o.up.Add(-2*time.Second))
	isOld := func(t time.Time) bool { return slices.ContainsFunc(old, func(g fire) bool { return g.at.Equal(t) }) }
	for _, f := range expectedFires(*ch.form, loc, w.spec.start, o.down.Add(2*time.Second), o.up.Add(-2*time.Second)) {
		w.tally[invChanged]++
		if runID, ok := c.runKey[runKey(trigger, axtype.RunSchedule, f.at)]; ok && !isOld(f.at) && !c.forgetIfDropped(runID) {
			w.violate(invChanged, "%s's schedule changed to %q while no scheduler ran (%s to %s); its fire at %s lies before the change, yet has run %d",
				trigger, ch.form.text, o.down.Format(time.RFC3339), o.up.Format(time.RFC3339), f.at.Format(time.RFC3339), runID)
		}
	}
	// a fire falls due at its release, the fire time plus its task's
	// delay: one released after the start is the old schedule's fire
	// before the change, not one missed while no scheduler ran
	var delay time.Duration
	for _, tr := range w.g.Triggers() {
		if tr.Name() == trigger {
			for _, name := range tr.Tasks {
				if t := w.g.Task(tr.Pipeline + "." + name); t != nil {
					delay = max(delay, t.Delay)
				}
			}
		}
	}
	for _, f := range old {
		if !f.at.Add(delay).Before(o.up.Add(-2 * time.Second)) {
			continue
		}
		w.tally[invChanged]++
		runID, ok := c.runKey[runKey(trigger, axtype.RunSchedule, f.at)]
		if !ok || c.forgetIfDropped(runID) {
			continue
		}
		for _, id := range c.runs[runID] {
			in := c.insts[id]
			if in == nil || in.reachedBy(axtype.Running, o.down) {
				continue
			}
			if !in.created.Before(o.up) {
				w.violate(invChanged, "%s's schedule changed from %q while no scheduler ran (%s to %s); the old schedule's fire at %s got a run at the start: %s",
					trigger, ch.old.text, o.down.Format(time.RFC3339), o.up.Format(time.RFC3339), f.at.Format(time.RFC3339), in.describe())
				continue
			}
			// its first move after the start: skipped, never started (an
			// operator may rerun it later)
			for _, r := range in.rows {
				if r.at.Before(o.up) {
					continue
				}
				if r.to == axtype.Running {
					w.violate(invChanged, "%s's schedule changed from %q while no scheduler ran (%s to %s); the old schedule's fire at %s ran: %s",
						trigger, ch.old.text, o.down.Format(time.RFC3339), o.up.Format(time.RFC3339), f.at.Format(time.RFC3339), in.describe())
				}
				break
			}
		}
	}
}

// dropped reports whether in, whose row the store no longer has, belongs
// to a run a schedule change dropped (docs/schedules.md: the old
// schedule's runs made ahead in which nothing started): a run of a
// changed trigger for a fire after the change, never started.
func (c *checker) dropped(in *inst) bool {
	trig, ok := c.runTrig[in.run]
	if !ok {
		return false
	}
	for _, ch := range c.w.changes[trig] {
		if !c.fireAt[in.run].After(ch.at.Add(-2 * time.Second)) {
			continue
		}
		for _, r := range in.rows {
			if r.to != axtype.Waiting && r.to != axtype.Scheduled && r.to != axtype.Paused {
				return false
			}
		}
		return true
	}
	return false
}

// forgetDropped forgets, after a schedule change, the runs the change
// dropped (made ahead, never started): the checks that read the replay's
// runs (I3c's matches, I4, I5) must not see them.
func (c *checker) forgetDropped() {
	n := 0
	for _, cs := range c.w.changes {
		n += len(cs)
	}
	if n == c.changesSeen {
		return
	}
	c.changesSeen = n
	for _, id := range slices.Sorted(maps.Keys(c.runTrig)) {
		if len(c.w.changes[c.runTrig[id]]) > 0 {
			c.forgetIfDropped(id)
		}
	}
}

// forgetIfDropped forgets run id and reports true when a schedule change
// dropped it (its rows are gone).
func (c *checker) forgetIfDropped(id int64) bool {
	for _, iid := range c.runs[id] {
		if in := c.insts[iid]; in != nil && c.dropped(in) && c.gone(iid) {
			c.forgetRun(id)
			return true
		}
		break
	}
	return false
}

// forgetRun drops run id, which a schedule change deleted, from the
// replay.
func (c *checker) forgetRun(id int64) {
	for task, iid := range c.runs[id] {
		delete(c.insts, iid)
		c.byTask[task] = slices.DeleteFunc(c.byTask[task], func(x int64) bool { return x == iid })
	}
	delete(c.runs, id)
	for k, v := range c.runKey {
		if v == id {
			delete(c.runKey, k)
		}
	}
	delete(c.fireAt, id)
	delete(c.runTrig, id)
}

// gone reports whether the store has no row of instance id.
func (c *checker) gone(id int64) bool {
	_, err := c.w.st.Instance(context.Background(), id)
	return errors.Is(err, store.ErrNotFound)
}

// oldPlanRun reports whether schedule run runID of trigger was made under
// an older form of the schedule than the one in force at down: made before
// a change brought before down (docs/schedules.md: a run of the old
// schedule made ahead that the change could not drop, because something in
// it had moved, never runs once its fire falls due while no scheduler runs;
// its roots are skipped at the start). A reload brings the change at once
// or, its loop waiting, later: the runs made from its call on are the new
// schedule's. checkOldPlanRun checks that they do not start.
func (c *checker) oldPlanRun(trigger string, runID int64, down time.Time) bool {
	var made time.Time
	for _, id := range c.runs[runID] {
		if in := c.insts[id]; in != nil && (made.IsZero() || in.created.Before(made)) {
			made = in.created
		}
	}
	var asked time.Time
	for _, ch := range c.w.changes[trigger] {
		if !ch.at.After(down) {
			asked = ch.asked
		}
	}
	return !made.IsZero() && made.Before(asked)
}

// checkOldPlanRun checks I15 for the fires of an outage whose runs were
// made ahead under an older form of trigger's schedule (oldPlanRun): a root
// still waiting when the last engine went down is skipped at the start,
// never started (an operator may rerun it later).
func (c *checker) checkOldPlanRun(trigger string, fires []fire, o outage) {
	for _, f := range fires {
		runID, ok := c.runKey[runKey(trigger, axtype.RunSchedule, f.at)]
		if !ok || !c.oldPlanRun(trigger, runID, o.down) {
			continue
		}
		for _, id := range c.runs[runID] {
			in := c.insts[id]
			if in == nil || !in.createdS {
				continue
			}
			if s, existed := in.stateAt(o.down); !existed || s.Terminal() || in.reachedBy(axtype.Running, o.down) {
				continue
			}
			c.w.tally[invChanged]++
			for _, r := range in.rows {
				if r.at.Before(o.up) {
					continue
				}
				if r.to == axtype.Running {
					c.w.violate(invChanged, "%s's fire at %s, made ahead under the schedule before its change, fell due while no scheduler ran (%s to %s), yet ran: %s",
						trigger, f.at.Format(time.RFC3339), o.down.Format(time.RFC3339), o.up.Format(time.RFC3339), in.describe())
				}
				break
			}
		}
	}
}
