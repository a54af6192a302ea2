package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/ax-sched/ax/api"
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
	s, done, err := Connect(ctx, f, Where{ViaStore: viaStore, Store: target})
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
