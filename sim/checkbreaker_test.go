package sim

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/engine/breaker"
	"github.com/ax-sched/ax/store"
)

// cutLog is I14's reading of the action log: the breaker_open alerts seen,
// and those whose next window is still to judge.
type cutLog struct {
	afterID int64
	pending []store.Action
}

// checkBreakerCuts is I14: with a task's breaker open, its dispatches in
// the window after the breaker_open alert are at most a tenth, rounded up
// (and at least one, so that it can close), of its dispatches in the
// window before. The window after ends early at the task's next breaker
// alert (it closed) and at the last check before another primary was seen
// lead (a breaker lives in the memory of the process that opened it),
// both left out: in that instant the breaker may be closed, or another
// primary, started as the opener stopped, dispatch.
// Dispatches are the dispatch actions, written with the RUNNING rows.
func (c *checker) checkBreakerCuts(now time.Time, final bool) {
	l := &c.cuts
	ctx := context.Background()
	opened, err := c.w.st.Actions(ctx, store.LogFilter{Action: engine.AlertBreakerOpen, AfterID: l.afterID, Limit: 1 << 20})
	if err != nil {
		return
	}
	for _, a := range opened {
		l.afterID = a.ID
		l.pending = append(l.pending, a)
	}
	var keep []store.Action
	for _, a := range l.pending {
		if judged := c.judgeCut(ctx, a, now, final); !judged {
			keep = append(keep, a)
		}
	}
	l.pending = keep
}

// judgeCut judges the window after breaker_open alert a, once it has
// passed (or at the final check); it reports whether it did.
func (c *checker) judgeCut(ctx context.Context, a store.Action, now time.Time, final bool) bool {
	t := c.w.g.Task(a.TaskID)
	if t == nil || strings.Contains(a.Reason+a.Detail, "last term") {
		return true // a breaker said again by a process that leads again: it opened before, and was judged then
	}
	win := breaker.New(breaker.Config{Window: t.Breaker.Window}).Config().Window
	end := a.At.Add(win)
	if end.After(now) && !final {
		return false
	}
	end = minTime(end, now)
	for _, kind := range []string{engine.AlertBreakerOpen, engine.AlertBreakerClosed} {
		next, err := c.w.st.Actions(ctx, store.LogFilter{TaskID: a.TaskID, Action: kind, AfterID: a.ID, Limit: 1})
		if err != nil {
			return false
		}
		if len(next) == 1 {
			end = minTime(end, next[0].At)
		}
	}
	for i, m := range c.leaders {
		// An alert between the check before a change of primary and the
		// check that saw it was written by the primary before or by the
		// one after (a stopping primary records its last results as the
		// next takes the lease): which, and so whose memory holds the
		// breaker, is not known; that window is left out.
		if i > 0 && m.prev.Before(a.At) && !m.at.Before(a.At) {
			end = minTime(end, a.At)
		}
	}
	opener := c.leaderAt(a.At)
	for _, m := range c.leaders {
		if m.at.After(a.At) && m.n != opener {
			end = minTime(end, m.prev)
			break
		}
	}
	ds, err := c.w.st.Actions(ctx, store.LogFilter{TaskID: a.TaskID, Action: "dispatch", Limit: 1 << 20})
	if err != nil {
		return false
	}
	before, after := 0, 0
	var seen []string
	for _, d := range ds {
		switch {
		case d.At.After(a.At.Add(-win)) && !d.At.After(a.At):
			before++
		case d.At.After(a.At) && d.At.Before(end): // at end itself, another primary or a closed breaker may dispatch
			after++
			seen = append(seen, d.At.Format("15:04:05.000")+" "+d.Reason)
		}
	}
	c.w.tally[invBreakerCut]++
	if allowed := max(1, int(math.Ceil(float64(before)/10-1e-9))); after > allowed {
		c.w.violate(invBreakerCut, "%s: breaker open at %s after %d dispatches in the %s before; %d dispatches in the %s after, over the cut of %d: %s",
			a.TaskID, a.At.Format(time.RFC3339Nano), before, win, after, end.Sub(a.At), allowed, strings.Join(seen, "; "))
	}
	return true
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
