package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/engine"
	"github.com/spf13/cobra"
)

// OrThen returns err if it is set, else the result of then.
func OrThen(err error, then func() error) error {
	if err != nil {
		return err
	}
	return then()
}

func running(n int) string {
	if n <= 0 {
		return "unlimited"
	}
	return strconv.Itoa(n)
}

func rate(r float64) string {
	if r <= 0 {
		return "unlimited"
	}
	return strconv.FormatFloat(r, 'g', -1, 64) + " per second"
}

func WriteExplanation(w io.Writer, x axtype.Explanation, loc *time.Location) error {
	fmt.Fprintf(w, "%s: %s\n", x.Task, x.Verdict)
	if x.Latest != nil {
		fmt.Fprintf(w, "\nlatest instance %d: %s (run %d, logical time %s, attempt %d)\n", x.Latest.ID, x.Latest.State, x.Latest.RunID,
			api.Stamp(x.Latest.LogicalTime, loc), x.Latest.Attempt)
	}
	fmt.Fprintln(w, "\nchecks:")
	for _, f := range x.Findings {
		mark := "  "
		if f.Blocks {
			mark = "✗ "
		}
		fmt.Fprintf(w, "  %s%-9s %s\n", mark, f.Check, f.Detail)
	}
	fmt.Fprintln(w, "\nlast dispatches (due → dispatched, late):")
	if len(x.LastFires) == 0 {
		fmt.Fprintln(w, "  none yet")
	}
	for _, f := range x.LastFires {
		due := "?"
		if !f.Due.IsZero() {
			due = api.StampMS(f.Due, loc)
		}
		on := ""
		if f.Executor != "" {
			on = " on " + f.Executor
		}
		fmt.Fprintf(w, "  %s → %s  %s  (instance %d%s)\n", due, api.StampMS(f.Dispatched, loc), f.Late.Round(time.Millisecond), f.Instance, on)
	}
	fmt.Fprintln(w, "\nnext fires:")
	if len(x.NextFires) == 0 {
		fmt.Fprintln(w, "  none: no schedule starts it")
	}
	for _, t := range x.NextFires {
		fmt.Fprintf(w, "  %s\n", api.Stamp(t, loc))
	}
	if !x.Live {
		fmt.Fprintln(w, "\n(answered by a standby: the queue, token bucket and breaker are the primary's)")
	}
	return nil
}

// Executors lists the registered executors: tasks, last heartbeat, and why
// one gets no work.
func Executors(ctx context.Context, w io.Writer, f APIOptions) error {
	c, err := NewAPIClient(f.Server)
	if err != nil {
		return err
	}
	exs, raw, err := c.Executors(ctx)
	if err != nil || f.JSON {
		return OrThen(err, func() error { return PrintJSON(w, raw) })
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ADDRESS\tSTATE\tLAST HEARTBEAT\tPOOL\tTASKS")
	for _, x := range exs {
		state := "live"
		if !x.Live {
			state = "excluded: " + x.Excluded
		}
		pool := "-"
		if x.Pool != nil {
			pool = x.Pool.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", x.Address, state, api.Stamp(x.LastHeartbeat, time.UTC), pool, strings.Join(x.Tasks, ", "))
	}
	if len(exs) == 0 {
		fmt.Fprintln(tw, "(no executor has registered)")
	}
	return tw.Flush()
}

// LimitsChange is what ax limits changes: the flags given (nil: not given).
type LimitsChange struct {
	Global          *float64
	Groups          []string // NAME=RATE
	MaxRunning      *int
	GroupMaxRunning []string // NAME=N
	Reason          string
}

// Limits prints the dispatch limits and concurrency caps in force, or, when
// ch changes any, changes them and prints what the scheduler did.
func Limits(ctx context.Context, w io.Writer, f APIOptions, ch LimitsChange) error {
	c, err := NewAPIClient(f.Server)
	if err != nil {
		return err
	}
	changed := ch.Global != nil || len(ch.Groups) > 0 || ch.MaxRunning != nil || len(ch.GroupMaxRunning) > 0
	if !changed {
		l, raw, err := c.Limits(ctx)
		if err != nil || f.JSON {
			return OrThen(err, func() error { return PrintJSON(w, raw) })
		}
		fmt.Fprintf(w, "global: %s, at most %s local attempts at once\n", rate(l.Limits.Global), running(l.Limits.MaxRunning))
		names := slices.Sorted(maps.Keys(l.Limits.Groups))
		for g := range l.Limits.GroupMaxRunning {
			if _, ok := l.Limits.Groups[g]; !ok {
				names = append(names, g)
			}
		}
		slices.Sort(names)
		for _, g := range names {
			fmt.Fprintf(w, "group %s: %s, at most %s at once\n", g, rate(l.Limits.Groups[g]), running(l.Limits.GroupMaxRunning[g]))
		}
		fmt.Fprintf(w, "(from the %s)\n", l.Source)
		return nil
	}
	body := api.LimitsChange{Reason: ch.Reason, Global: ch.Global, MaxRunning: ch.MaxRunning}
	if ch.Global != nil {
		if err := finiteRate("--global", "", *ch.Global); err != nil {
			return err
		}
	}
	if len(ch.Groups) > 0 {
		gs := map[string]float64{}
		for _, g := range ch.Groups {
			name, v, ok := strings.Cut(g, "=")
			r, err := strconv.ParseFloat(v, 64)
			if !ok || name == "" || err != nil {
				return Usage("--group %q: write NAME=RATE, such as etl=10", g)
			}
			if err := finiteRate("--group", name+"=", r); err != nil {
				return err
			}
			gs[name] = r
		}
		body.Groups = gs
	}
	if len(ch.GroupMaxRunning) > 0 {
		gs := map[string]int{}
		for _, g := range ch.GroupMaxRunning {
			name, v, ok := strings.Cut(g, "=")
			n, err := strconv.Atoi(v)
			if !ok || name == "" || err != nil {
				return Usage("--group-max-running %q: write NAME=N, such as etl=10", g)
			}
			gs[name] = n
		}
		body.GroupMaxRunning = gs
	}
	res, raw, err := c.SetLimits(ctx, body)
	if err != nil || f.JSON {
		return OrThen(err, func() error { return PrintJSON(w, raw) })
	}
	_, err = fmt.Fprintln(w, res.Result)
	return err
}

// finiteRate refuses NaN and ±Inf, which JSON cannot carry to the server
// (the server checks the range of every finite rate).
func finiteRate(flag, prefix string, r float64) error {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return Usage("%s %s%v: give a rate per second from 0 (unlimited) to %d", flag, prefix, r, engine.MaxRate)
	}
	return nil
}

// Explain says why a task is not running, or why it ran late, from the
// scheduler's live state.
func Explain(ctx context.Context, w io.Writer, f APIOptions, task string) error {
	p, t, err := SplitTask(task)
	if err != nil {
		return err
	}
	c, err := NewAPIClient(f.Server)
	if err != nil {
		return err
	}
	x, raw, err := c.Explain(ctx, p, t, f.UTC)
	if err != nil || f.JSON {
		return OrThen(err, func() error { return PrintJSON(w, raw) })
	}
	loc, err := api.ZoneOf(ctx, c, p, f.UTC)
	if err != nil {
		return err
	}
	return WriteExplanation(w, x, loc)
}

// The commands here talk to a running ax server's admin API.

func NewExecutorsCmd() *cobra.Command {
	var f APIOptions
	cmd := &cobra.Command{
		Use:   "executors",
		Short: "List registered executors: tasks, last heartbeat, and why one gets no work",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Executors(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	addAPIFlags(cmd, &f)
	return cmd
}

func NewLimitsCmd() *cobra.Command {
	var (
		f          APIOptions
		global     float64
		groups     []string
		maxRunning int
		groupCaps  []string
		reason     string
	)
	cmd := &cobra.Command{
		Use:   "limits [--global N] [--group NAME=N ...] [--max-running N] [--group-max-running NAME=N ...]",
		Short: "Show the dispatch limits and concurrency caps, or change them at run time (0 lifts one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ch := LimitsChange{Reason: reason, Groups: groups, GroupMaxRunning: groupCaps}
			if cmd.Flags().Changed("global") {
				ch.Global = &global
			}
			if cmd.Flags().Changed("max-running") {
				ch.MaxRunning = &maxRunning
			}
			return Limits(cmd.Context(), cmd.OutOrStdout(), f, ch)
		},
	}
	addAPIFlags(cmd, &f)
	cmd.Flags().Float64Var(&global, "global", 0, "global dispatches per second (0: unlimited)")
	cmd.Flags().StringSliceVar(&groups, "group", nil, "a group's dispatches per second, NAME=RATE (repeatable)")
	cmd.Flags().IntVar(&maxRunning, "max-running", 0, "local attempts (functions, commands) running at once (0: unlimited)")
	cmd.Flags().StringSliceVar(&groupCaps, "group-max-running", nil, "a group's attempts running at once, NAME=N (repeatable; 0 lifts it)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the action log")
	return cmd
}

func NewExplainCmd() *cobra.Command {
	var f APIOptions
	cmd := &cobra.Command{
		Use:   "explain PIPELINE.TASK",
		Short: "Say why a task is not running, or why it ran late, from the scheduler's live state",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return Explain(cmd.Context(), cmd.OutOrStdout(), f, args[0])
		},
	}
	addAPIFlags(cmd, &f)
	return cmd
}

// disabledLine is what a status line says of what of a pipeline is
// disabled (api.PipelineItem's Disabled).
func disabledLine(what string) string {
	switch what {
	case "":
		return ""
	case "pipeline":
		return ": disabled, it never fires (disabled: true)"
	}
	return ": the cron of " + what + " is disabled"
}
