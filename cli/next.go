package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/spf13/cobra"
)

// MaxNext is the most fire times one ax next lists: a count past it is
// refused before any is computed, so a typo in -n cannot fill the memory.
const MaxNext = 100000

// NextCount checks ax next's -n: from 1 to MaxNext.
func NextCount(n int) error {
	if n < 1 || n > MaxNext {
		return Usage("-n %d: give a count from 1 to %d", n, MaxNext)
	}
	return nil
}

// NextFires lists the next n fires of pipeline p (or of its one task), each
// formatted in the pipeline's zone with its DST note. It stops with an
// error when ctx ends (Ctrl-C, SIGTERM).
func NextFires(ctx context.Context, g *dag.Graph, p *defs.Pipeline, task []string, from time.Time, n int) ([]string, error) {
	if err := NextCount(n); err != nil {
		return nil, err
	}
	format := func(t time.Time) string { return api.Stamp(t, p.Location) }
	if len(task) == 1 {
		t := p.Task(task[0])
		if t == nil {
			return nil, Fail(fmt.Errorf("pipeline %q has no task %q%s", p.Name, task[0], defs.DidYouMean(task[0], p.TaskNames())))
		}
		if tr := g.TriggerOf(t.ID()); tr != nil {
			fs, err := fires(ctx, tr.Schedule, from, n)
			var out []string
			for _, f := range fs {
				out = append(out, format(f.at.Add(t.Delay))+f.note+disabledNote(tr.Disabled))
			}
			return out, err
		}
		return nil, Fail(fmt.Errorf("task %q is not started by any schedule: it runs only when an operator runs it", t.ID()))
	}
	if p.Schedule != nil {
		fs, err := fires(ctx, p.Schedule, from, n)
		var out []string
		for _, f := range fs {
			out = append(out, format(f.at)+f.note+disabledNote(p.Disabled))
		}
		return out, err
	}
	var all []fire
	for _, tr := range g.Triggers() {
		if tr.Pipeline != p.Name {
			continue
		}
		fs, err := fires(ctx, tr.Schedule, from, n)
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			f.task = tr.Task
			f.note += disabledNote(tr.Disabled)
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

// disabledNote marks a fire of a disabled schedule, which does not happen.
func disabledNote(disabled bool) string {
	if disabled {
		return "  # disabled: does not fire"
	}
	return ""
}

// fire is one fire time of a schedule, with the DST rule it followed.
type fire struct {
	at   time.Time
	task string
	note string // "  # 02:30 does not exist …" on a DST day, else empty
}

// fires returns the next n fires of s after from, each with its DST note,
// or an error as soon as ctx ends.
func fires(ctx context.Context, s *defs.Schedule, from time.Time, n int) ([]fire, error) {
	var out []fire
	prev := from
	for len(out) < n {
		if err := ctx.Err(); err != nil {
			return nil, Fail(fmt.Errorf("interrupted after %d of %d fire times: nothing printed; give a smaller -n", len(out), n))
		}
		at := s.Next(prev)
		if at.IsZero() {
			break
		}
		f := fire{at: at}
		if note := s.Note(prev, at); note != "" {
			f.note = "  # " + note
		}
		out = append(out, f)
		prev = at
	}
	return out, nil
}

func NewNextCmd() *cobra.Command {
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
of all its tasks' crons, each line followed by the task it starts.

On a daylight-saving day a line ends with "  # " and the rule applied, e.g.
"# 02:30 does not exist on 2026-03-08; fires at 03:00 (fixed schedule)".`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := NextCount(n); err != nil {
				return err
			}
			now := time.Now()
			if from != "" {
				t, err := time.Parse(time.RFC3339, from)
				if err != nil {
					return Usage("--from %q: write an RFC 3339 time such as 2026-03-08T00:00:00-05:00", from)
				}
				now = t
			}
			g, p, err := LoadOne(args[0], now, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			lines, err := NextFires(cmd.Context(), g, p, args[1:], now, n)
			if err != nil {
				return err
			}
			for _, l := range lines {
				fmt.Fprintln(cmd.OutOrStdout(), l)
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&n, "count", "n", 10, "how many fire times (1 to 100000)")
	cmd.Flags().StringVar(&from, "from", "", "list times strictly after this RFC 3339 time (default now)")
	return cmd
}
