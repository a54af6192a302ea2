package main

import (
	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/cli"
)

func newLogsCmd() *cobra.Command {
	var (
		f        cli.APIOptions
		run      int64
		instance int64
		attempt  int
		follow   bool
	)
	cmd := &cobra.Command{
		Use:   "logs PIPELINE.TASK",
		Short: "Print the output of a task's attempt (the latest by default); -f follows a running one until it ends",
		Long: `Print what an attempt of a task printed (stdout, stderr, a function's logger),
with a header: instance, attempt, executor, start, end, exit status. Lines are
marked by stream; bytes that are not text are shown escaped (\xNN).

The task's latest attempt (of the instance that started last: a rerun of an
older instance included) is shown unless --run, --instance or --attempt say
otherwise. With -f, a running attempt is
followed live and the command ends when the attempt ends.

Exit status: 0 when the attempt shown succeeded or is still running; 1 when
it failed, was killed or timed out (the header says how, nothing is printed
on stderr), and when there is no log to show or the server cannot be asked
(an "ax: …" message on stderr says why); 2 for a usage error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if run != 0 && instance != 0 {
				return cli.Usage("--run and --instance name the instance twice: give one")
			}
			// The flags' zero value means "not given": 0 given by hand is no
			// run, instance or attempt, and is refused like a negative one.
			for _, c := range []struct {
				name, what string
				v          int64
			}{{"run", "a run number", run}, {"instance", "an instance id", instance}, {"attempt", "an attempt number", int64(attempt)}} {
				if cmd.Flags().Changed(c.name) && c.v < 1 {
					return cli.Usage("--%s %d: give %s from 1", c.name, c.v, c.what)
				}
			}
			return cli.LogsAPI(cmd.Context(), cmd.OutOrStdout(), f, args[0], run, instance, attempt, follow)
		},
	}
	cmd.Flags().Int64Var(&run, "run", 0, "the task's instance in this run")
	cmd.Flags().Int64Var(&instance, "instance", 0, "this instance (of the task)")
	cmd.Flags().IntVar(&attempt, "attempt", 0, "this attempt (default the latest)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow a running attempt until it ends")
	addAPIFlags(cmd, &f)
	return cmd
}
