package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// AlertSLAMissed: an instance had not succeeded `sla` after its logical time.
const AlertSLAMissed = "sla_missed"

// slaLookback is how far back, before its SLA deadline, a task's instances
// are checked when a term as primary starts: deadlines that passed while
// no scheduler ran are still reported (once: the action log remembers).
const slaLookback = time.Hour

// slaWatch is the loop's record of the SLA checks: per task, the logical
// times up to which deadlines were checked, and the instances alerted.
type slaWatch struct {
	checked time.Time
	until   map[string]time.Time
	alerted map[int64]bool
}

// checkSLA raises sla_missed, once per instance, for every instance of a
// task with an `sla` that has not succeeded that long after its logical
// time. Each instance is looked at once, when its deadline has passed:
// runs created later for older logical times (backfills) are not judged.
func (e *Engine) checkSLA(ctx context.Context, now time.Time) error {
	if now.Sub(e.sla.checked) < e.cfg.SLACheck {
		return nil
	}
	e.sla.checked = now
	if e.sla.until == nil {
		e.sla.until, e.sla.alerted = map[string]time.Time{}, map[int64]bool{}
	}
	ids := make([]string, 0, len(e.sched.tasks))
	for id, ti := range e.sched.tasks {
		if ti.def.SLA > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		ti := e.sched.tasks[id]
		to := now.Add(-ti.def.SLA)
		from, ok := e.sla.until[id]
		if !ok {
			from = to.Add(-slaLookback)
			seen, err := e.st.Actions(ctx, store.LogFilter{TaskID: id, Action: AlertSLAMissed, Newest: true, Limit: 1000})
			if err != nil {
				return fmt.Errorf("engine: sla alerts of %s: %w", id, err)
			}
			for _, a := range seen {
				e.sla.alerted[a.InstanceID] = true
			}
		}
		if !to.After(from) {
			continue
		}
		ins, err := e.st.Instances(ctx, store.InstanceFilter{TaskID: id, LogicalFrom: from.Add(time.Millisecond), LogicalTo: to, Limit: 10000, Ascending: true})
		if err != nil {
			return fmt.Errorf("engine: sla check of %s: %w", id, err)
		}
		loc := time.UTC
		if p := e.sched.g.Pipeline(ti.def.Pipeline); p != nil && p.Location != nil {
			loc = p.Location
		}
		for _, in := range ins {
			deadline := in.LogicalTime.Add(ti.def.SLA)
			// A success counts by when it came, not by the state at the
			// check: one between the deadline and the check missed it too.
			if (in.State == axtype.Success && !in.EndedAt.After(deadline)) || e.sla.alerted[in.ID] {
				continue
			}
			msg := fmt.Sprintf("%s has not succeeded %s after its logical time %s: it is %s", id, ti.def.SLA,
				in.LogicalTime.In(loc).Format(time.RFC3339), in.State)
			if in.State == axtype.Success {
				msg = fmt.Sprintf("%s succeeded %s after its logical time %s, later than its sla of %s", id,
					in.EndedAt.Sub(in.LogicalTime).Round(time.Millisecond), in.LogicalTime.In(loc).Format(time.RFC3339), ti.def.SLA)
			}
			e.sla.alerted[in.ID] = true
			e.Alert(ctx, Alert{Kind: AlertSLAMissed, At: now, Pipeline: ti.def.Pipeline, Task: id, Run: in.RunID, Logical: in.LogicalTime, Instance: in.ID, Ticket: in.Ticket, Message: msg})
		}
		e.sla.until[id] = to
	}
	return nil
}
