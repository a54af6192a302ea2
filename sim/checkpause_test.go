package sim

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// pauseKey names a pause: its scope and target.
type pauseKey struct {
	scope store.PauseScope
	name  string
}

// pauseLog is I13's reading of the action log: the pauses in force (since
// when), and the dispatches seen under each, still to be confirmed.
type pauseLog struct {
	afterID  int64
	inForce  map[pauseKey]time.Time
	suspects map[pauseKey][]store.Action
}

// checkPauseStarts is I13: no attempt of a task starts while a pause
// covers it (its own, its group's or its pipeline's), whoever made the
// instance — a fire, a trigger, an approval, a rerun, a backfill, a retry.
// It reads the action log in order: pause and resume (written when the
// request was applied) and dispatch (written with the RUNNING row). A
// dispatch under a pause is a violation once the pause is confirmed to
// have held it: by its resume, later in the log, or by the store still
// holding it. A pause lifted without its resume in the log (the action
// lost to a store fault or a crash) confirms nothing: when the same scope
// is paused again, what was seen under the old one is dropped.
func (c *checker) checkPauseStarts(final bool) {
	l := &c.held
	if l.inForce == nil {
		l.inForce, l.suspects = map[pauseKey]time.Time{}, map[pauseKey][]store.Action{}
	}
	ctx := context.Background()
	for {
		acts, err := c.w.st.Actions(ctx, store.LogFilter{AfterID: l.afterID, Limit: 5000})
		if err != nil {
			return // a store fault: read again at the next check
		}
		for _, a := range acts {
			l.afterID = a.ID
			c.notePauseAction(a)
		}
		if len(acts) < 5000 {
			break
		}
	}
	ps, err := c.w.st.Pauses(ctx)
	if err != nil {
		return
	}
	for _, p := range ps {
		k := pauseKey{p.Scope, p.Name}
		if at, ok := l.inForce[k]; ok && at.Equal(p.At) {
			c.confirmPause(k)
		}
	}
	if final {
		clear(l.suspects)
	}
}

// notePauseAction applies one action to I13's view.
func (c *checker) notePauseAction(a store.Action) {
	l := &c.held
	switch a.Action {
	case engine.OpPause, engine.OpResume:
		var r struct {
			Scope  store.PauseScope `json:"scope"`
			Target string           `json:"target"`
		}
		// the detail is the outcome, the request as JSON, and then, for
		// a queued or numbered request, " (request N)": the object alone
		// is read
		i := strings.IndexByte(a.Detail, '{')
		if i < 0 || json.NewDecoder(strings.NewReader(a.Detail[i:])).Decode(&r) != nil {
			return
		}
		k := pauseKey{r.Scope, r.Target}
		if a.Action == engine.OpResume {
			c.confirmPause(k)
			delete(l.inForce, k)
			return
		}
		delete(l.suspects, k) // paused again: the last one was lifted out of the log's sight
		l.inForce[k] = a.At
	case "dispatch":
		t := c.w.g.Task(a.TaskID)
		if t == nil {
			return
		}
		c.w.tally[invPause]++
		for _, k := range [...]pauseKey{{store.ScopeTask, t.ID()}, {store.ScopeGroup, t.Group}, {store.ScopePipeline, t.Pipeline}} {
			if _, ok := l.inForce[k]; ok {
				l.suspects[k] = append(l.suspects[k], a)
				return
			}
		}
	}
}

// confirmPause reports the dispatches seen under pause k, which held.
func (c *checker) confirmPause(k pauseKey) {
	l := &c.held
	for _, a := range l.suspects[k] {
		c.w.violate(invPause, "%s dispatched at %s (ticket %s, instance %d) while %s %s was paused (since %s): %s",
			a.TaskID, a.At.Format(time.RFC3339Nano), a.Ticket, a.InstanceID, k.scope, k.name, l.inForce[k].Format(time.RFC3339Nano), a.Reason)
	}
	delete(l.suspects, k)
}
