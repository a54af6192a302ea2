package main

import (
	"fmt"
	"time"

	"github.com/ax-sched/ax/cli"
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
of all its tasks' crons, each line followed by the task it starts.

On a daylight-saving day a line ends with "  # " and the rule applied, e.g.
"# 02:30 does not exist on 2026-03-08; fires at 03:00 (fixed schedule)".`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cli.NextCount(n); err != nil {
				return err
			}
			now := time.Now()
			if from != "" {
				t, err := time.Parse(time.RFC3339, from)
				if err != nil {
					return cli.Usage("--from %q: write an RFC 3339 time such as 2026-03-08T00:00:00-05:00", from)
				}
				now = t
			}
			g, p, err := cli.LoadOne(args[0], now, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			lines, err := cli.NextFires(cmd.Context(), g, p, args[1:], now, n)
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
