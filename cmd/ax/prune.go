package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// DefaultRetain is how long ax server keeps finished runs unless told.
const DefaultRetain = 30 * 24 * time.Hour

// parseRetain reads a retention period: a Go duration ("720h", "90m"), or
// days ("30d"); "0" keeps everything.
func parseRetain(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		// A float converted to a Duration out of its range does not fail, it
		// wraps (106752d came out negative): check the range first, and
		// refuse what rounds down to nothing.
		n, err := strconv.ParseFloat(days, 64)
		if ns := n * float64(24*time.Hour); err == nil && ns >= 1 && ns < float64(math.MaxInt64) {
			return time.Duration(ns), nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("%q: give a period such as 30d, 12h or 90m (0 keeps everything)", s)
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

// pruneBudget bounds the pass of POST /api/v1/prune, within the server's
// write timeout (60 s).
const pruneBudget = 45 * time.Second

// pruneReport is the answer of the prune endpoints.
type pruneReport struct {
	DryRun bool              `json:"dry_run"`
	Retain string            `json:"retain"`
	Before time.Time         `json:"before"` // runs that ended before this go
	Pruned store.PruneResult `json:"pruned"`
}

// pruneDry serves GET /api/v1/prune: what retention would delete now.
func (a *admin) pruneDry(r *http.Request) (any, error) {
	q, err := parseQuery(r, "retain")
	if err != nil {
		return nil, err
	}
	retain := a.retain
	if s := q.str("retain"); s != "" {
		if retain, err = parseRetain(s); err != nil {
			q.errs = append(q.errs, "retain="+err.Error())
		}
	}
	if err := q.err(); err != nil {
		return nil, err
	}
	if retain <= 0 {
		if q.str("retain") != "" {
			return nil, errf(http.StatusBadRequest, "retain=0 keeps everything: nothing would be pruned; give retain=30d to see what a period would prune")
		}
		return nil, errf(http.StatusBadRequest, "this server keeps everything (--retain 0): give retain=30d to see what a period would prune")
	}
	now := a.now()
	res, err := a.st.PruneDryRun(r.Context(), engine.PruneSelection(now, retain))
	res.LastRun, res.More = 0, false
	return pruneReport{DryRun: true, Retain: retain.String(), Before: now.Add(-retain).UTC(), Pruned: res}, err
}

// pruneNow serves POST /api/v1/prune: a retention pass now, on the primary.
func (a *admin) pruneNow(r *http.Request) (any, error) {
	if err := decodeBody(r, &struct{}{}); err != nil {
		return nil, err
	}
	if a.eng.Retention() <= 0 {
		return nil, errf(http.StatusConflict, "this server keeps everything (--retain 0): nothing to prune")
	}
	now := a.now()
	// Pruning is paced to stay out of dispatch's way, so a large backlog
	// takes longer than a request may: the pass stops at the budget, says
	// so, and the server's own passes go on with the rest.
	ctx, cancel := context.WithTimeout(r.Context(), cmp.Or(a.pruneBudget, pruneBudget))
	defer cancel()
	res, err := a.eng.PrunePass(ctx, actorOf(r))
	cut := errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil
	if err != nil && !cut {
		return nil, err
	}
	res.LastRun, res.More = 0, cut
	return pruneReport{Retain: a.eng.Retention().String(), Before: now.Add(-a.eng.Retention()).UTC(), Pruned: res}, nil
}

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
				d := DefaultRetain
				if retain != "" {
					var err error
					if d, err = parseRetain(retain); err != nil {
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
				return writePrune(w, f.json, pruneReport{DryRun: true, Retain: d.String(), Before: now.Add(-d).UTC(), Pruned: res})
			}
			if retain != "" && !dry {
				return usageErr("--retain goes with --dry-run: a pass now uses the server's own --retain")
			}
			if retain != "" {
				if _, err := parseRetain(retain); err != nil {
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
		raw, err = c.call(ctx, http.MethodGet, "/api/v1/prune"+q, nil)
	} else {
		raw, err = c.call(ctx, http.MethodPost, "/api/v1/prune", struct{}{})
	}
	if err != nil {
		return err
	}
	var rep pruneReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		return err
	}
	return writePrune(w, f.json, rep)
}

func writePrune(w io.Writer, asJSON bool, rep pruneReport) error {
	if asJSON {
		return json.NewEncoder(w).Encode(rep)
	}
	verb := "pruned"
	if rep.DryRun {
		verb = "would prune"
	}
	p := rep.Pruned
	_, err := fmt.Fprintf(w, "%s %d run(s) that ended before %s (retain %s): %d instance(s), %d history row(s), %d action(s), %d output chunk(s), %d attempt record(s); %d applied result(s) of the inbox\n",
		verb, p.Runs, stamp(rep.Before, time.UTC), rep.Retain, p.Instances, p.History, p.Actions, p.Chunks, p.Attempts, p.Inbox)
	if err == nil && p.More && !rep.DryRun {
		_, err = fmt.Fprintln(w, "more remains: this pass stopped at its time limit (pruning is paced so as not to delay dispatch); the server's own passes prune the rest")
	}
	return err
}
