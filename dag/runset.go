package dag

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/defs"
)

// runSets computes which tasks each schedule's fire starts and reports
// tasks that two schedules reach, and tasks that no schedule reaches.
func (c *compiler) runSets() {
	g := c.g
	member := make([][]*Trigger, len(g.tasks))
	g.triggerOf = make([]*Trigger, len(g.tasks))
	// scheduled: pipelines in which a task no schedule reaches is worth a
	// warning. A pipeline with no schedule at all is manual (an operator
	// triggers it), and so is one that says `schedule: none`; in one whose
	// schedule or cron did not parse (an error), what they reach is unknown.
	scheduled := map[string]bool{}
	for _, p := range g.pipelines {
		scheduled[p.Name] = p.ScheduleSpec != defs.ScheduleNone && p.ScheduleSpec != ""
		for _, t := range p.Tasks {
			scheduled[p.Name] = scheduled[p.Name] || (t.Cron != "" && p.ScheduleSpec != defs.ScheduleNone)
		}
		scheduled[p.Name] = scheduled[p.Name] && !p.ScheduleBroken
	}
	for _, p := range g.pipelines {
		if p.Schedule != nil {
			tr := &Trigger{Pipeline: p.Name, Schedule: p.Schedule, Pos: p.SchedulePos}
			for _, t := range p.Tasks {
				member[g.index[t.ID()]] = append(member[g.index[t.ID()]], tr)
			}
			g.triggers = append(g.triggers, tr)
		}
		for _, t := range p.Tasks {
			if t.Schedule == nil {
				continue
			}
			tr := &Trigger{Pipeline: p.Name, Task: t.Name, Schedule: t.Schedule, Pos: t.Pos}
			for _, i := range g.downstream(g.index[t.ID()], true) {
				member[i] = append(member[i], tr)
			}
			g.triggers = append(g.triggers, tr)
		}
	}
	for _, i := range g.order {
		t := g.tasks[i]
		switch ms := member[i]; len(ms) {
		case 0:
			if scheduled[t.Pipeline] {
				c.errorf(defs.SevWarning, t.Pos, t.Pipeline, t.Name,
					"can never run on its own: no schedule reaches it; add a `cron:`, depend on a scheduled task, or write `schedule: none` if it runs when an operator triggers it")
			}
		case 1:
			ms[0].Tasks = append(ms[0].Tasks, t.Name)
			ms[0].nodes = append(ms[0].nodes, i)
			g.triggerOf[i] = ms[0]
		default:
			names := make([]string, len(ms))
			for k, m := range ms {
				names[k] = describe(m)
			}
			c.errorf(defs.SevError, t.Pos, t.Pipeline, t.Name,
				"is reachable from %d schedules (%s): a task must belong to one schedule's runs; remove a cron or split the pipeline",
				len(ms), strings.Join(names, " and "))
		}
	}
	// A task whose upstream in the same pipeline belongs to no run of its own
	// schedule would wait forever.
	for _, tr := range g.triggers {
		for _, i := range tr.nodes {
			t := g.tasks[i]
			for k, j := range g.up[i] {
				if g.tasks[j].Pipeline == t.Pipeline && len(member[j]) == 0 && !g.byName[t.Pipeline].ScheduleBroken {
					c.errorf(defs.SevWarning, t.DependsOn[k].Pos, t.Pipeline, t.Name,
						"can never run: it waits for %q, which the runs of %s do not include", g.tasks[j].Name, describe(tr))
				}
			}
		}
	}
}

func describe(t *Trigger) string {
	if t.Task == "" {
		return fmt.Sprintf("the pipeline schedule %q at line %d", t.Schedule.Spec(), t.Pos.Line)
	}
	return fmt.Sprintf("the cron %q of task %q at line %d", t.Schedule.Spec(), t.Task, t.Pos.Line)
}

// warnPriority reports priority inversions: an upstream less urgent than a
// task that waits for it holds the whole chain behind less urgent work.
func (c *compiler) warnPriority() {
	g := c.g
	for i, t := range g.tasks {
		for k, j := range g.up[i] {
			u := g.tasks[j]
			if u.Priority > t.Priority {
				c.errorf(defs.SevWarning, t.DependsOn[k].Pos, t.Pipeline, t.Name,
					"priority inversion: upstream %q has priority %d, lower than this task's %d; raise the upstream's priority",
					t.DependsOn[k].String(), u.Priority, t.Priority)
			}
		}
	}
}

// collisionFires bounds the fires per trigger looked at for collisions, so
// that validation stays fast with thousands of cron tasks.
const collisionFires = 64

// warnCollisions reports the worst second in the next day where more tasks
// become due than the dispatch rate can send in that second.
func (c *compiler) warnCollisions(now time.Time, rate int) {
	g := c.g
	horizon := now.Add(24 * time.Hour)
	type due struct {
		count    int
		triggers []*Trigger
	}
	bySecond := map[int64]*due{}
	for _, tr := range g.triggers {
		roots := g.roots(tr)
		t := now
		for range collisionFires {
			t = tr.Schedule.Next(t)
			if t.IsZero() || t.After(horizon) {
				break
			}
			for _, delay := range roots {
				sec := t.Add(delay).Unix()
				d := bySecond[sec]
				if d == nil {
					d = &due{}
					bySecond[sec] = d
				}
				d.count++
				if len(d.triggers) == 0 || d.triggers[len(d.triggers)-1] != tr {
					d.triggers = append(d.triggers, tr)
				}
			}
		}
	}
	var worstSec int64
	var worst *due
	for sec, d := range bySecond {
		if d.count > rate && (worst == nil || d.count > worst.count || (d.count == worst.count && sec < worstSec)) {
			worst, worstSec = d, sec
		}
	}
	if worst == nil {
		return
	}
	first := worst.triggers[0]
	names := make([]string, 0, len(worst.triggers))
	for _, tr := range worst.triggers {
		names = append(names, tr.Name())
	}
	slices.Sort(names)
	if len(names) > 5 {
		names = append(names[:5], fmt.Sprintf("and %d more", len(worst.triggers)-5))
	}
	at := time.Unix(worstSec, 0).In(first.Schedule.Location()).Format(time.RFC3339)
	c.errorf(defs.SevWarning, first.Pos, first.Pipeline, first.Task,
		"fire-time collision: %d tasks are due at %s (%s), more than the dispatch rate of %d/s; they will queue for about %ds: spread their schedules or raise the rate",
		worst.count, at, strings.Join(names, ", "), rate, worst.count/rate)
}

// roots returns the delay of each task of the trigger's run set that is due
// at the fire itself (no upstream inside the run set) and waits for no operator.
func (g *Graph) roots(tr *Trigger) []time.Duration {
	in := make(map[int]bool, len(tr.nodes))
	for _, i := range tr.nodes {
		in[i] = true
	}
	var out []time.Duration
	for _, i := range tr.nodes {
		t := g.tasks[i]
		if t.Manual {
			continue
		}
		root := true
		for _, j := range g.up[i] {
			if in[j] {
				root = false
				break
			}
		}
		if root {
			out = append(out, t.Delay)
		}
	}
	return out
}
