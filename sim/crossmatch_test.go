package sim

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
)

// invCrossMatch: a cross-pipeline release matches an upstream run inside
// the downstream's window, by the dependency's match rule (defs.CrossWindow:
// by default the downstream's schedule interval that holds its logical
// time, never an older one).
const invCrossMatch = "I3c a cross-pipeline release matches its window"

// crossMatched checks invCrossMatch for execution e of instance in, on its
// upstream uid in another pipeline: the upstream's latest instance at or
// before the window's end, among those that existed when the engine
// released in, lies inside the window and had succeeded by start.
func (c *checker) crossMatched(e *execution, in *inst, uid string, start time.Time) {
	w := c.w
	w.tally[invCrossMatch]++
	t, u := w.g.Task(in.task), w.g.Task(uid)
	dep := defs.Dep{Pipeline: u.Pipeline, Task: u.Name}
	for _, d := range t.DependsOn {
		if d.Pipeline == u.Pipeline && d.Task == u.Name {
			dep = d
		}
	}
	var own *defs.Schedule
	if tr := w.g.TriggerOf(in.task); tr != nil {
		own = tr.Schedule
	}
	win := defs.CrossWindow(dep, own, w.g.Pipeline(t.Pipeline).Location, e.logical)
	released := in.lastInto(axtype.Scheduled, start)
	var best *inst
	for _, id := range c.byTask[uid] {
		ui := c.insts[id]
		if ui.created.After(start) || len(ui.rows) > 0 && released > 0 && ui.rows[0].id > released {
			continue
		}
		lt := c.logicalOf(ui)
		if lt.After(win.To) {
			continue
		}
		if best == nil || !lt.Before(c.logicalOf(best)) {
			best = ui
		}
	}
	switch {
	case best == nil:
		w.violate(invCrossMatch, "%s started with no run of its upstream %s, waiting for %s: %s", e, uid, win, in.describe())
	case !win.Contains(c.logicalOf(best)):
		w.violate(invCrossMatch, "%s started on its upstream %s of %s, outside %s: %s; upstream: %s",
			e, uid, c.logicalOf(best).UTC().Format(time.RFC3339), win, in.describe(), best.describe())
	case !best.reachedBy(axtype.Success, start):
		w.violate(invCrossMatch, "%s started before its upstream %s in %s succeeded: %s; upstream: %s", e, uid, win, in.describe(), best.describe())
	}
}

// waitsCross reports whether backfill id was told to wait for other
// pipelines' runs (--wait-cross): then its runs are checked as any other.
func (c *checker) waitsCross(id int64) bool {
	bs, err := c.w.st.Backfills(context.Background(), id)
	if err != nil || len(bs) != 1 {
		return false
	}
	var spec engine.BackfillSpec
	return json.Unmarshal([]byte(bs[0].Spec), &spec) == nil && spec.WaitCross
}

// drawMatches writes some cross-pipeline dependencies with a match rule
// and an offset (defs.CrossWindow), so that I3c judges every rule. It draws
// from a source of its own, so the generator's draws stay those of the
// seeds recorded before.
func drawMatches(r *rand.Rand, s *spec) {
	for _, p := range s.pipelines {
		for _, t := range p.tasks {
			for i, d := range t.deps {
				if !strings.Contains(d, ".") || r.IntN(2) == 0 {
					continue
				}
				m := pick(r, defs.Matches)
				switch r.IntN(3) {
				case 0:
					t.deps[i] = "{task: " + d + ", match: " + m + "}"
				case 1:
					t.deps[i] = "{task: " + d + ", match: " + m + ", offset: " + pick(r, []string{"-1d", "-1h", "-30s", "+1m"}) + "}"
				default:
					t.deps[i] = "{task: " + d + ", offset: " + pick(r, []string{"-1d", "-2m", "30s"}) + "}"
				}
			}
		}
	}
}
