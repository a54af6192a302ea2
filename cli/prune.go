package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

func PruneAPI(ctx context.Context, w io.Writer, f APIOptions, dry bool, retain string) error {
	c, err := NewAPIClient(f.Server)
	if err != nil {
		return err
	}
	var rep api.PruneReport
	if dry {
		rep, err = c.PruneDry(ctx, retain)
	} else {
		rep, err = c.PruneNow(ctx)
	}
	if err != nil {
		return err
	}
	return WritePrune(w, f.JSON, rep)
}

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
	if viaStore {
		if !dry {
			return Usage("--store counts only (--dry-run): pruning is done by the primary (ax server, or ax prune through its API)")
		}
		d := api.DefaultRetain
		if retain != "" {
			var err error
			if d, err = api.ParseRetain(retain); err != nil {
				return Usage("--retain %v", err)
			}
			if d == 0 {
				return Usage("--retain 0 keeps everything: nothing would be pruned; give a period such as 30d to see what it would prune")
			}
		}
		st, err := store.Open(ctx, target, store.Options{Existing: true})
		if err != nil {
			return Fail(err)
		}
		defer st.Close()
		now := time.Now()
		res, err := st.PruneDryRun(ctx, engine.PruneSelection(now, d))
		if err != nil {
			return Fail(err)
		}
		return WritePrune(w, f.JSON, api.PruneReport{DryRun: true, Retain: d.String(), Before: now.Add(-d).UTC(), Pruned: res})
	}
	if retain != "" && !dry {
		return Usage("--retain goes with --dry-run: a pass now uses the server's own --retain")
	}
	if retain != "" {
		if _, err := api.ParseRetain(retain); err != nil {
			return Usage("--retain %v", err)
		}
	}
	return PruneAPI(ctx, w, f, dry, retain)
}
