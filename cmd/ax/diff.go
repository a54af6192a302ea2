package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/reload"
)

func newDiffCmd() *cobra.Command {
	var (
		f    apiFlags
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
			g, errs, err := dag.Load(args, defs.Options{}, dag.Options{DispatchRate: reload.WarnRate(rate)})
			if err != nil {
				return usageErr("%v", err)
			}
			if g == nil {
				for _, e := range errs.Fatal() {
					fmt.Fprintln(cmd.ErrOrStderr(), e.Error())
				}
				return &exitError{code: exitFailed, err: fmt.Errorf("%d error(s): a reload of these files would keep the running pipelines", len(errs.Fatal()))}
			}
			c, err := newAPIClient(f.server)
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
			if f.json {
				out, _ := json.MarshalIndent(d, "", "  ")
				return printJSON(cmd.OutOrStdout(), out)
			}
			return writeDiff(cmd.OutOrStdout(), d)
		},
	}
	f.add(cmd)
	cmd.Flags().Float64Var(&rate, "dispatch-rate", 0, "the server's --dispatch-rate, for the same warnings")
	return cmd
}

// writeDiff prints a diff one line per task or schedule.
func writeDiff(w io.Writer, d engine.Diff) error {
	if d.Empty() {
		_, err := fmt.Fprintln(w, "no change: the running server has these pipelines")
		return err
	}
	for _, l := range []struct {
		mark, what string
		ids        []string
	}{{"+", "added", d.Added}, {"-", "removed", d.Removed}, {"~", "changed", d.Changed}, {"@", "schedule planned again from the reload", d.Replanned}} {
		for _, id := range l.ids {
			fmt.Fprintf(w, "%s %-40s %s\n", l.mark, id, l.what)
		}
	}
	_, err := fmt.Fprintf(w, "%d added, %d removed, %d changed; %d schedule(s) planned again\n", len(d.Added), len(d.Removed), len(d.Changed), len(d.Replanned))
	return err
}
