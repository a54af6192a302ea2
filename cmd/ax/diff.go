package main

import (
	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/reload"
)

func newDiffCmd() *cobra.Command {
	var (
		f    cli.APIOptions
		rate float64
	)
	cmd := &cobra.Command{
		Use:   "diff PATH...",
		Short: "Show what reloading these pipeline files would change in the running server",
		Long: `Validate the files as ax server would on a reload and compare them with the
pipelines the running server has in force: tasks added, removed and changed
(each changed field as old -> new), and schedules that would be planned
again from the moment of the reload. A directory stands for the server's:
a pipeline the server runs that it does not hold is removed. Files alone
are compared pipeline by pipeline, their references to other pipelines
resolved against the server's tasks. Invalid files print the messages of
ax validate and exit 1: a reload of them would keep the running set.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			popts, err := parseOptions()
			if err != nil {
				return err
			}
			return cli.Diff(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args, popts, dag.Options{DispatchRate: reload.WarnRate(rate)}, f)
		},
	}
	addAPIFlags(cmd, &f)
	cmd.Flags().Float64Var(&rate, "dispatch-rate", 0, "the server's --dispatch-rate, for the same warnings")
	return cmd
}
