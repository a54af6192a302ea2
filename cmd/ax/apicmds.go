package main

import (
	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/cli"
)

// The commands here talk to a running ax server's admin API.

func newExecutorsCmd() *cobra.Command {
	var f cli.APIOptions
	cmd := &cobra.Command{
		Use:   "executors",
		Short: "List registered executors: tasks, last heartbeat, and why one gets no work",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cli.Executors(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	addAPIFlags(cmd, &f)
	return cmd
}

func newLimitsCmd() *cobra.Command {
	var (
		f          cli.APIOptions
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
			ch := cli.LimitsChange{Reason: reason, Groups: groups, GroupMaxRunning: groupCaps}
			if cmd.Flags().Changed("global") {
				ch.Global = &global
			}
			if cmd.Flags().Changed("max-running") {
				ch.MaxRunning = &maxRunning
			}
			return cli.Limits(cmd.Context(), cmd.OutOrStdout(), f, ch)
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

func newExplainCmd() *cobra.Command {
	var f cli.APIOptions
	cmd := &cobra.Command{
		Use:   "explain PIPELINE.TASK",
		Short: "Say why a task is not running, or why it ran late, from the scheduler's live state",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Explain(cmd.Context(), cmd.OutOrStdout(), f, args[0])
		},
	}
	addAPIFlags(cmd, &f)
	return cmd
}
