package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

func newPruneCmd() *cobra.Command {
	var (
		f      apiFlags
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
			w := cmd.OutOrStdout()
			if viaStore(cmd) {
				if !dry {
					return usageErr("--store counts only (--dry-run): pruning is done by the primary (ax server, or ax prune through its API)")
				}
				d := api.DefaultRetain
				if retain != "" {
					var err error
					if d, err = api.ParseRetain(retain); err != nil {
						return usageErr("--retain %v", err)
					}
					if d == 0 {
						return usageErr("--retain 0 keeps everything: nothing would be pruned; give a period such as 30d to see what it would prune")
					}
				}
				st, err := store.Open(cmd.Context(), target, store.Options{})
				if err != nil {
					return &exitError{code: exitFailed, err: err}
				}
				defer st.Close()
				now := time.Now()
				res, err := st.PruneDryRun(cmd.Context(), engine.PruneSelection(now, d))
				if err != nil {
					return &exitError{code: exitFailed, err: err}
				}
				return writePrune(w, f.json, api.PruneReport{DryRun: true, Retain: d.String(), Before: now.Add(-d).UTC(), Pruned: res})
			}
			if retain != "" && !dry {
				return usageErr("--retain goes with --dry-run: a pass now uses the server's own --retain")
			}
			if retain != "" {
				if _, err := api.ParseRetain(retain); err != nil {
					return usageErr("--retain %v", err)
				}
			}
			return pruneAPI(cmd.Context(), w, f, dry, retain)
		},
	}
	cmd.Flags().BoolVar(&dry, "dry-run", false, "count what would be deleted; delete nothing")
	cmd.Flags().StringVar(&retain, "retain", "", "with --dry-run: the period to try (default the server's --retain; with --store 30d)")
	cmd.Flags().StringVar(&target, "store", store.DefaultPath, "count from this store instead of calling the API (with --dry-run)")
	f.add(cmd)
	return cmd
}

func pruneAPI(ctx context.Context, w io.Writer, f apiFlags, dry bool, retain string) error {
	c, err := newAPIClient(f.server)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if dry {
		q := ""
		if retain != "" {
			q = "?" + url.Values{"retain": {retain}}.Encode()
		}
		raw, err = c.Call(ctx, http.MethodGet, "/api/v1/prune"+q, nil)
	} else {
		raw, err = c.Call(ctx, http.MethodPost, "/api/v1/prune", struct{}{})
	}
	if err != nil {
		return err
	}
	var rep api.PruneReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		return err
	}
	return writePrune(w, f.json, rep)
}

func writePrune(w io.Writer, asJSON bool, rep api.PruneReport) error {
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

// parseSize reads a size in bytes: a number, or with KiB, MiB, KB or MB.
func parseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"KB", 1000}, {"MB", 1000 * 1000}, {"K", 1 << 10}, {"M", 1 << 20}, {"B", 1}} {
		if v, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	n, err := strconv.Atoi(t)
	if err != nil || n <= 0 || n > (1<<30)/mult {
		return 0, fmt.Errorf("%q: give a size such as 1MiB, 512KiB or 65536 (bytes)", s)
	}
	return n * mult, nil
}
