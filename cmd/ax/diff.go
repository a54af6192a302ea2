package main

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/engine"
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
pipelines the running server has in force: tasks added, removed and changed,
and schedules that would be planned again from the moment of the reload.
Invalid files print the messages of ax validate and exit 1: a reload of
them would keep the running set.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			popts, err := parseOptions()
			if err != nil {
				return err
			}
			g, errs, err := dag.Load(args, popts, dag.Options{DispatchRate: reload.WarnRate(rate)})
			if err != nil {
				return cli.Usage("%v", err)
			}
			if g == nil {
				for _, e := range errs.Fatal() {
					fmt.Fprintln(cmd.ErrOrStderr(), e.Error())
				}
				return cli.Fail(fmt.Errorf("%d error(s): a reload of these files would keep the running pipelines", len(errs.Fatal())))
			}
			c, err := cli.NewAPIClient(f.Server)
			if err != nil {
				return err
			}
			raw, err := c.Call(cmd.Context(), http.MethodGet, "/api/v1/reload", nil)
			if err != nil {
				return err
			}
			var st api.ReloadView
			if err := json.Unmarshal(raw, &st); err != nil {
				return fmt.Errorf("read the server's answer: %w", err)
			}
			d := engine.DiffOf(st.Running, engine.Fingerprint(g))
			if f.JSON {
				out, _ := json.MarshalIndent(d, "", "  ")
				return cli.PrintJSON(cmd.OutOrStdout(), out)
			}
			return cli.WriteDiff(cmd.OutOrStdout(), d)
		},
	}
	addAPIFlags(cmd, &f)
	cmd.Flags().Float64Var(&rate, "dispatch-rate", 0, "the server's --dispatch-rate, for the same warnings")
	return cmd
}
