package cli

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
)

func NextFires(g *dag.Graph, p *defs.Pipeline, task []string, from time.Time, n int) ([]string, error) {
	format := func(t time.Time) string { return api.Stamp(t, p.Location) }
	if len(task) == 1 {
		t := p.Task(task[0])
		if t == nil {
			return nil, Fail(fmt.Errorf("pipeline %q has no task %q%s", p.Name, task[0], defs.DidYouMean(task[0], p.TaskNames())))
		}
		if tr := g.TriggerOf(t.ID()); tr != nil {
			var out []string
			for _, f := range fires(tr.Schedule, from, n) {
				out = append(out, format(f.at.Add(t.Delay))+f.note)
			}
			return out, nil
		}
		return nil, Fail(fmt.Errorf("task %q is not started by any schedule: it runs only when an operator runs it", t.ID()))
	}
	if p.Schedule != nil {
		var out []string
		for _, f := range fires(p.Schedule, from, n) {
			out = append(out, format(f.at)+f.note)
		}
		return out, nil
	}
	var all []fire
	for _, tr := range g.Triggers() {
		if tr.Pipeline != p.Name {
			continue
		}
		for _, f := range fires(tr.Schedule, from, n) {
			f.task = tr.Task
			all = append(all, f)
		}
	}
	if len(all) == 0 {
		return nil, Fail(fmt.Errorf("pipeline %q has no schedule and no task with a cron", p.Name))
	}
	slices.SortStableFunc(all, func(a, b fire) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.task, b.task)
	})
	var out []string
	for _, f := range all[:min(n, len(all))] {
		out = append(out, format(f.at)+" "+f.task+f.note)
	}
	return out, nil
}

// fire is one fire time of a schedule, with the DST rule it followed.
type fire struct {
	at   time.Time
	task string
	note string // "  # 02:30 does not exist …" on a DST day, else empty
}

// fires returns the next n fires of s after from, each with its DST note.
func fires(s *defs.Schedule, from time.Time, n int) []fire {
	var out []fire
	prev := from
	for _, at := range s.NextN(from, n) {
		f := fire{at: at}
		if note := s.Note(prev, at); note != "" {
			f.note = "  # " + note
		}
		out = append(out, f)
		prev = at
	}
	return out
}
