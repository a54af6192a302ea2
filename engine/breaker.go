package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/breaker"
)

// breakerChanged records the breaker opening (and the cut it puts on the
// task's dispatches) or closing as an alert in the action log and the log.
func (e *Engine) breakerChanged(ctx context.Context, ch breaker.Change, now time.Time) {
	kind := AlertBreakerClosed
	if ch.Open {
		kind = AlertBreakerOpen
	}
	e.m.breakerOpen.WithLabelValues(ch.Task).Set(boolGauge(ch.Open))
	pipeline := ""
	if t := e.sched.tasks[ch.Task]; t != nil {
		pipeline = t.def.Pipeline
	}
	msg := fmt.Sprintf("%d of %d outcomes failed in the window (%.0f%%, threshold %.0f%%)", ch.Failures, ch.Total, ch.Rate*100, ch.Threshold*100)
	if ch.Open {
		msg += "; dispatches cut to " + breaker.Cut{Allowed: ch.Allowed, Was: ch.Was, Window: ch.Window}.String()
	}
	if ch.Kept {
		msg = "open since this process's last term as primary (kept in its memory): " + msg
	}
	e.Alert(ctx, Alert{Kind: kind, At: now, Pipeline: pipeline, Task: ch.Task, Message: msg})
}

// tuneBreakers gives each task whose file sets `breaker:` its own breaker
// configuration, keeping the outcomes of breakers whose configuration
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

// breakerHolds applies the cut of p's task's open breaker to queued
// instance id for batch b: beyond the dispatches it allows per window, a
// fire of a schedule run whose overlap policy is skip is skipped (failed
// with the cut's numbers); anything else (overlap wait or allow, a retry,
// a rerun, a manual or backfill run, a catch-up the misfire rule chose)
// waits in the queue until the cut allows one more. Each is logged once.
// It reports whether the instance is held back or skipped.
func (d *dispatcher) breakerHolds(b *batchPlan, id int64, p *pend, now time.Time) bool {
	ok, w := d.brk.Allow(p.task.id, now)
	if ok {
		return false
	}
	c, _ := d.brk.CutOf(p.task.id, now)
	due := time.UnixMilli(p.at)
	fire := p.kind == axtype.RunSchedule && !p.manual && p.state == axtype.Scheduled && p.attempt == 0 && due.After(p.task.backlog)
	if fire && p.task.def.Overlap == defs.OverlapSkip {
		why := "breaker open: " + c.String() + ", none left until " + c.Next.UTC().Format(time.RFC3339)
		d.log.Info("breaker_skip", "task", p.task.id, "run", p.runID, "instance", id, "reason", why)
		b.params = append(b.params, store.TransitionParams{InstanceID: id, Version: p.version, From: p.state, To: axtype.Failed,
			Set:   store.Changes{NextFireAt: &time.Time{}, Error: ptr("skipped: " + why + " (overlap: skip)")},
			Epoch: d.host.termEpoch(), Now: now, Actor: Actor, Reason: "skipped by the breaker's cut: " + why,
			Action: &store.Action{Actor: Actor, Action: "breaker_skip", Pipeline: p.task.def.Pipeline, TaskID: p.task.id, Reason: why}})
		b.picked = append(b.picked, id)
		return true
	}
	if !p.cut {
		p.cut = true
		d.log.Info("breaker_wait", "task", p.task.id, "run", p.runID, "instance", id,
			"reason", "breaker open: "+c.String()+"; it waits until "+now.Add(w).UTC().Format(time.RFC3339))
	}
	p.throttled = true
	b.deferred = append(b.deferred, id)
	if b.wait == 0 || w < b.wait {
		b.wait = w
	}
	return true
}
