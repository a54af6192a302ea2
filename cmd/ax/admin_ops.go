package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// The admin API's operations: each goes through the primary's engine loop.

// opBody is the body every operation takes.
type opBody struct {
	Reason     string `json:"reason"`
	Downstream bool   `json:"downstream"` // trigger only
}

// actorOf names who asks: X-Ax-Actor (the CLI sends operator:$USER), else "operator:api".
func actorOf(r *http.Request) string {
	if a := strings.TrimSpace(r.Header.Get("X-Ax-Actor")); a != "" && len(a) <= 128 {
		return a
	}
	return "operator:api"
}

// do applies op in the engine's loop. Refusals (wrong state, nothing to
// kill) are 409s that changed nothing.
func (a *admin) do(r *http.Request, op engine.Op) (any, error) {
	op.Actor = actorOf(r)
	ctx, cancel := context.WithTimeout(r.Context(), a.opWait)
	defer cancel()
	msg, err := a.eng.Do(ctx, op)
	if err != nil {
		if ctx.Err() != nil {
			return nil, errf(http.StatusServiceUnavailable, "%s: the scheduler did not answer within %s; nothing was applied", op.Kind, a.opWait)
		}
		if errors.Is(err, engine.ErrBadOp) {
			return nil, errf(http.StatusBadRequest, "%s: %v", op.Kind, strings.TrimPrefix(err.Error(), engine.ErrBadOp.Error()+": "))
		}
		return nil, errf(http.StatusConflict, "%s refused: %v", op.Kind, err)
	}
	return map[string]string{"result": msg}, nil
}

func taskOp(kind string) func(*admin, *http.Request) (any, error) {
	return func(a *admin, r *http.Request) (any, error) {
		t, err := a.taskOf(r)
		if err != nil {
			return nil, err
		}
		var b opBody
		if err := decodeBody(r, &b); err != nil {
			return nil, err
		}
		if b.Downstream && kind != engine.OpTrigger {
			return nil, errf(http.StatusBadRequest, "downstream applies to trigger only")
		}
		return a.do(r, engine.Op{Kind: kind, Scope: store.ScopeTask, Target: t.ID(), Downstream: b.Downstream, Reason: b.Reason})
	}
}

func scopeOp(kind string, scope store.PauseScope) func(*admin, *http.Request) (any, error) {
	return func(a *admin, r *http.Request) (any, error) {
		name := r.PathValue(string(scope))
		if scope == store.ScopePipeline {
			if _, err := a.pipelineOf(r); err != nil {
				return nil, err
			}
		} else {
			var groups []string
			for _, t := range a.graph().Order() {
				if !slices.Contains(groups, t.Group) {
					groups = append(groups, t.Group)
				}
			}
			if !slices.Contains(groups, name) {
				return nil, errf(http.StatusNotFound, "no group %q%s", name, defs.DidYouMean(name, groups))
			}
		}
		var b opBody
		if err := decodeBody(r, &b); err != nil {
			return nil, err
		}
		if b.Downstream {
			return nil, errf(http.StatusBadRequest, "downstream applies to trigger only")
		}
		return a.do(r, engine.Op{Kind: kind, Scope: scope, Target: name, Reason: b.Reason})
	}
}

func instanceOp(kind string) func(*admin, *http.Request) (any, error) {
	return func(a *admin, r *http.Request) (any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return nil, err
		}
		if _, err := a.st.Instance(r.Context(), id); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil, errf(http.StatusNotFound, "no instance %d", id)
			}
			return nil, err
		}
		var b opBody
		if err := decodeBody(r, &b); err != nil {
			return nil, err
		}
		return a.do(r, engine.Op{Kind: kind, Instance: id, Reason: b.Reason})
	}
}

func (a *admin) runRerun(r *http.Request) (any, error) {
	id, b, err := a.runOpBody(r)
	if err != nil {
		return nil, err
	}
	return a.do(r, engine.Op{Kind: engine.OpRerun, Run: id, Reason: b.Reason})
}

func (a *admin) setLimits(r *http.Request) (any, error) {
	var b struct {
		Global          *float64           `json:"global"`
		Groups          map[string]float64 `json:"groups"`
		MaxRunning      *int               `json:"max_running"`
		GroupMaxRunning map[string]int     `json:"group_max_running"`
		Reason          string             `json:"reason"`
	}
	if err := decodeBody(r, &b); err != nil {
		return nil, err
	}
	if b.Global == nil && len(b.Groups) == 0 && b.MaxRunning == nil && len(b.GroupMaxRunning) == 0 {
		return nil, errf(http.StatusBadRequest, `give {"global": N} or {"groups": {"NAME": N}} (dispatches per second, 0 to %d; 0 lifts a limit), or {"max_running": N} or {"group_max_running": {"NAME": N}} (attempts at once, 0 to %d; 0 lifts a cap)`, engine.MaxRate, engine.MaxRunningBound)
	}
	v, err := a.do(r, engine.Op{Kind: engine.OpLimits, Global: b.Global, Groups: b.Groups, MaxRunning: b.MaxRunning, GroupMaxRunning: b.GroupMaxRunning, Reason: b.Reason})
	var ae *apiErr
	if errors.As(err, &ae) && ae.code == http.StatusConflict {
		ae.code = http.StatusBadRequest // a bad rate or group, not a state conflict
	}
	return v, err
}

// backfillOf reads the backfill named by the {id} path parameter.
func (a *admin) backfillOf(r *http.Request) (store.Backfill, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return store.Backfill{}, err
	}
	bs, err := a.st.Backfills(r.Context(), id)
	if err != nil {
		return store.Backfill{}, err
	}
	if len(bs) == 0 {
		return store.Backfill{}, errf(http.StatusNotFound, "no backfill %d", id)
	}
	return bs[0], nil
}

func (a *admin) cancelBackfill(r *http.Request) (any, error) {
	b, err := a.backfillOf(r)
	if err != nil {
		return nil, err
	}
	return a.do(r, engine.Op{Kind: engine.OpCancelBackfill, Backfill: b.ID})
}

func (a *admin) resumeBackfill(r *http.Request) (any, error) {
	b, err := a.backfillOf(r)
	if err != nil {
		return nil, err
	}
	return a.do(r, engine.Op{Kind: engine.OpResumeBackfill, Backfill: b.ID})
}

// backfillRequest is the body of POST /api/v1/backfills.
type backfillRequest struct {
	Pipeline      string `json:"pipeline"`
	From          string `json:"from"`
	To            string `json:"to"`
	Select        string `json:"select"`
	MaxActiveRuns int    `json:"max_active_runs"`
	Reverse       bool   `json:"reverse"`
	Rerun         string `json:"rerun"`
	StopOnFailure bool   `json:"stop_on_failure"`
	ApproveManual bool   `json:"approve_manual"`
	DryRun        bool   `json:"dry_run"`
}

func (a *admin) startBackfill(r *http.Request) (any, error) {
	var b backfillRequest
	if err := decodeBody(r, &b); err != nil {
		return nil, err
	}
	if b.Pipeline == "" || b.From == "" || b.To == "" {
		return nil, errf(http.StatusBadRequest, `give "pipeline", "from" and "to"`)
	}
	p := a.graph().Pipeline(b.Pipeline)
	loc := time.UTC
	if p != nil {
		loc = p.Location
	}
	from, err := parseWhen(b.From, loc, false)
	if err != nil {
		return nil, errf(http.StatusBadRequest, "from: %v", err)
	}
	to, err := parseWhen(b.To, loc, true)
	if err != nil {
		return nil, errf(http.StatusBadRequest, "to: %v", err)
	}
	spec, err := engine.PlanBackfill(a.graph(), engine.BackfillParams{Pipeline: b.Pipeline, From: from, To: to, Select: b.Select,
		MaxActiveRuns: b.MaxActiveRuns, Reverse: b.Reverse, Rerun: b.Rerun, StopOnFailure: b.StopOnFailure,
		ApproveManual: b.ApproveManual})
	if err != nil {
		code := http.StatusBadRequest
		if p == nil {
			code = http.StatusNotFound
		}
		return nil, errf(code, "%v", err)
	}
	if b.DryRun {
		return map[string]any{"plan": spec}, nil
	}
	id, err := engine.CreateBackfill(r.Context(), a.st, spec, actorOf(r), a.now())
	if err != nil {
		return nil, err
	}
	return created{map[string]any{"id": id, "plan": spec}}, nil
}

// runOpBody reads an operation on a run: the {run} id of the path (404 when
// there is no such run) and the request's body.
func (a *admin) runOpBody(r *http.Request) (int64, opBody, error) {
	id, err := pathID(r, "run")
	if err != nil {
		return 0, opBody{}, err
	}
	if _, err := a.st.Run(r.Context(), id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return 0, opBody{}, errf(http.StatusNotFound, "no run %d", id)
		}
		return 0, opBody{}, err
	}
	var b opBody
	if err := decodeBody(r, &b); err != nil {
		return 0, opBody{}, err
	}
	return id, b, nil
}
