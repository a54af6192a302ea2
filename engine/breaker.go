package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/breaker"
)

// breakerChanged cuts (or restores) the task's dispatch rate and records the
// breaker opening or closing as an alert in the action log and the log (R17).
func (e *Engine) breakerChanged(ctx context.Context, ch breaker.Change, now time.Time) {
	e.cutRate(ch.Task, now)
	kind := AlertBreakerClosed
	if ch.Open {
		kind = AlertBreakerOpen
	}
	e.m.breakerOpen.WithLabelValues(ch.Task).Set(boolGauge(ch.Open))
	pipeline := ""
	if t := e.tasks[ch.Task]; t != nil {
		pipeline = t.def.Pipeline
	}
	e.Alert(ctx, Alert{Kind: kind, At: now, Pipeline: pipeline, Task: ch.Task,
		Message: fmt.Sprintf("%d of %d outcomes failed in the window (%.0f%%, threshold %.0f%%)", ch.Failures, ch.Total, ch.Rate*100, ch.Threshold*100)})
}

// tuneBreakers gives each task whose file sets `breaker:` its own breaker
// configuration (R45), keeping the outcomes of breakers whose configuration
// did not change.
func (d *dispatcher) tuneBreakers(g *dag.Graph) {
	for _, t := range g.Order() {
		b := t.Breaker
		if b == (defs.Breaker{}) {
			continue
		}
		want := breaker.Config{Window: b.Window, MinSamples: b.MinOutcomes, Threshold: b.Ratio}
		cur := d.brk.TaskConfig(t.ID())
		if (want.Window == 0 || want.Window == cur.Window) && (want.MinSamples == 0 || want.MinSamples == cur.MinSamples) &&
			(want.Threshold == 0 || want.Threshold == cur.Threshold) {
			continue
		}
		d.brk.SetTask(t.ID(), want)
	}
}

// cutRate puts in force the dispatch rate task's breaker calls for: while
// it is open, its factor (a tenth) of the task's base rate (its group's
// rate, else the global rate, else Config.BreakerBaseRate); while closed,
// none of its own.
func (d *dispatcher) cutRate(task string, now time.Time) {
	f := d.brk.Factor(task)
	if f >= 1 {
		d.tripped.SetGroup(task, 0, now)
		return
	}
	base := d.cfg.BreakerBaseRate
	if t := d.tasks[task]; t != nil {
		if r := d.bucket.Limits().Groups[t.def.Group]; r > 0 {
			base = r
		} else if g := d.bucket.Limits().Global; g > 0 {
			base = g
		}
	}
	d.tripped.SetGroup(task, base*f, now)
}

// cutRates puts in force the cut rates of the tasks whose breaker is open:
// at the start of a term, whose dispatcher starts with none (the breakers
// outlive the term), and after the limits changed (the base of a cut
// rate). A closed breaker has no rate of its own to restore.
func (d *dispatcher) cutRates(now time.Time) {
	for id := range d.tasks {
		if d.brk.Factor(id) < 1 {
			d.cutRate(id, now)
		}
	}
}
