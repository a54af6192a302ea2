package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/spf13/cobra"
)

func newNextCmd() *cobra.Command {
	var (
		n    int
		from string
	)
	cmd := &cobra.Command{
		Use:   "next FILE [TASK]",
		Short: "Print the next fire times of a pipeline, or of one task, in the pipeline's time zone",
		Long: `Print the next fire times, one RFC 3339 time with its offset per line,
strictly after --from (RFC 3339; default now), in the pipeline's time zone.

With TASK, the times are those of the schedule whose runs include the task
(its own cron, or the pipeline's schedule), plus the task's delay. Without
TASK, those of the pipeline's schedule; a pipeline without one lists the fires
of all its tasks' crons, each line followed by the task it starts.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 {
				return usageErr("-n %d: give a positive count", n)
			}
			now := time.Now()
			if from != "" {
				t, err := time.Parse(time.RFC3339, from)
				if err != nil {
					return usageErr("--from %q: write an RFC 3339 time such as 2026-03-08T00:00:00-05:00", from)
				}
				now = t
			}
			g, p, err := loadOne(args[0], now, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			lines, err := nextFires(g, p, args[1:], now, n)
			if err != nil {
				return err
			}
			for _, l := range lines {
				fmt.Fprintln(cmd.OutOrStdout(), l)
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&n, "count", "n", 10, "how many fire times")
	cmd.Flags().StringVar(&from, "from", "", "list times strictly after this RFC 3339 time (default now)")
	return cmd
}

func nextFires(g *dag.Graph, p *defs.Pipeline, task []string, from time.Time, n int) ([]string, error) {
	format := func(t time.Time) string { return t.In(p.Location).Format(time.RFC3339) }
	if len(task) == 1 {
		t := p.Task(task[0])
		if t == nil {
			return nil, &exitError{code: exitFailed, err: fmt.Errorf("pipeline %q has no task %q%s", p.Name, task[0], defs.DidYouMean(task[0], p.TaskNames()))}
		}
		if tr := g.TriggerOf(t.ID()); tr != nil {
			var out []string
			for _, at := range tr.Schedule.NextN(from, n) {
				out = append(out, format(at.Add(t.Delay)))
			}
			return out, nil
		}
		return nil, &exitError{code: exitFailed, err: fmt.Errorf("task %q is not started by any schedule: it runs only when an operator runs it", t.ID())}
	}
	if p.Schedule != nil {
		var out []string
		for _, at := range p.Schedule.NextN(from, n) {
			out = append(out, format(at))
		}
		return out, nil
	}
	type fire struct {
		at   time.Time
		task string
	}
	var fires []fire
	for _, tr := range g.Triggers() {
		if tr.Pipeline != p.Name {
			continue
		}
		for _, at := range tr.Schedule.NextN(from, n) {
			fires = append(fires, fire{at, tr.Task})
		}
	}
	if len(fires) == 0 {
		return nil, &exitError{code: exitFailed, err: fmt.Errorf("pipeline %q has no schedule and no task with a cron", p.Name)}
	}
	slices.SortStableFunc(fires, func(a, b fire) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.task, b.task)
	})
	var out []string
	for _, f := range fires[:min(n, len(fires))] {
		out = append(out, format(f.at)+" "+f.task)
	}
	return out, nil
}
