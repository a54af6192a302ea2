package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// DefaultRetain is how long ax server keeps finished runs unless told.
const DefaultRetain = 30 * 24 * time.Hour

// ParseRetain reads a retention period: a Go duration ("720h", "90m"), or
// days ("30d"); "0" keeps everything.
func ParseRetain(s string) (time.Duration, error) {
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

// pruneBudget bounds the pass of POST /api/v1/prune, within the server's
// write timeout (60 s).
const pruneBudget = 45 * time.Second

// PruneReport is the answer of the prune endpoints.
type PruneReport struct {
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
		if retain, err = ParseRetain(s); err != nil {
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
	return PruneReport{DryRun: true, Retain: retain.String(), Before: now.Add(-retain).UTC(), Pruned: res}, err
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
	return PruneReport{Retain: a.eng.Retention().String(), Before: now.Add(-a.eng.Retention()).UTC(), Pruned: res}, nil
}
