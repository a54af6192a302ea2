package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/direct"
	"github.com/spf13/cobra"
)

func WritePrune(w io.Writer, asJSON bool, rep api.PruneReport) error {
	if asJSON {
		return json.NewEncoder(w).Encode(rep)
	}
	verb := "pruned"
	if rep.DryRun {
		verb = "would prune"
	}
	p := rep.Pruned
	_, err := fmt.Fprintf(w, "%s %d run(s) that ended before %s (retain %s): %d instance(s), %d history row(s), %d action(s), %d output chunk(s), %d attempt record(s); %d applied result(s) of the inbox\n",
		verb, p.Runs, api.Stamp(rep.Before, time.UTC), rep.Retain, p.Instances, p.History, p.Actions, p.Chunks, p.Attempts, p.Inbox)
	if err == nil && p.More && !rep.DryRun {
		_, err = fmt.Fprintln(w, "more remains: this pass stopped at its time limit (pruning is paced so as not to delay dispatch); the server's own passes prune the rest")
	}
	return err
}

// Prune runs a retention pass on the primary through the API, or with dry
// only counts what would go (viaStore: from the store at target, with
// retain or DefaultRetain).
func Prune(ctx context.Context, w io.Writer, viaStore bool, target string, f APIOptions, dry bool, retain string) error {
	switch {
	case viaStore && !dry:
		return Usage("--store counts only (--dry-run): pruning is done by the primary (ax server, or ax prune through its API)")
	case retain != "" && !dry:
		return Usage("--retain goes with --dry-run: a pass now uses the server's own --retain")
	case retain != "":
		d, err := api.ParseRetain(retain)
		if err != nil {
			return Usage("--retain %v", err)
		}
		if d == 0 && viaStore {
			return Usage("--retain 0 keeps everything: nothing would be pruned; give a period such as 30d to see what it would prune")
		}
	}
	s, done, err := Connect(ctx, f, Target{ViaStore: viaStore, Store: target})
	if err != nil {
		return err
	}
	defer done()
	var rep api.PruneReport
	if dry {
		rep, err = s.PruneDry(ctx, retain)
	} else {
		rep, err = s.PruneNow(ctx)
	}
	if err != nil {
		return asked(err)
	}
	return WritePrune(w, f.JSON, rep)
}

func NewPruneCmd() *cobra.Command {
	var (
		f      APIOptions
		dry    bool
		retain string
		target string
	)
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete finished runs older than the retention period now (--dry-run: show what would go)",
		Long: `ax server prunes by itself (--retain, default 30d, every 10 minutes): runs
whose instances all ended before the horizon go, with their instances,
history, actions and task output; waiting, running and paused work and the
runs of unfinished backfills stay; per-task counts survive.

ax prune runs a pass now on the primary; with --dry-run it only counts what
would go (through the API, or with --store from a store directly).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Prune(cmd.Context(), cmd.OutOrStdout(), viaStore(cmd), target, f, dry, retain)
		},
	}
	cmd.Flags().BoolVar(&dry, "dry-run", false, "count what would be deleted; delete nothing")
	cmd.Flags().StringVar(&retain, "retain", "", "with --dry-run: the period to try (default the server's --retain; with --store 30d)")
	cmd.Flags().StringVar(&target, "store", direct.DefaultPath, "count from this store instead of calling the API (with --dry-run)")
	addAPIFlags(cmd, &f)
	return cmd
}
