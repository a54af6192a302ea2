package api

import (
	"context"
	"errors"
	"fmt"
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
	Hold       bool   `json:"hold"`       // rerun only: under a pause, rerun it held PAUSED until the resume (else refused, 409)
}

// withHold returns op with Hold set, for a rerun; hold on any other
// operation is a 400.
func withHold(op engine.Request, hold bool) (engine.Request, error) {
	if !hold {
		return op, nil
	}
	if r, ok := op.(engine.Rerun); ok {
		r.Hold = true
		return r, nil
	}
	return nil, errf(http.StatusBadRequest, "hold applies to trigger and rerun only")
}

// actorOf names who asks: the authenticated user (see authorize); on a
// server that asks nobody to sign in, X-Ax-Actor (the CLI sends
// operator:$USER), else "operator:api".
func actorOf(r *http.Request) string {
	if a, ok := r.Context().Value(actorKey{}).(string); ok {
		return a
	}
	if a := strings.TrimSpace(r.Header.Get("X-Ax-Actor")); a != "" && len(a) <= 128 {
		return a
	}
	return "operator:api"
}

// do applies op in the engine's loop. Refusals (wrong state, nothing to
// kill, work under a pause: engine.PausedError) are 409s that changed
// nothing.
func (a *admin) do(r *http.Request, op engine.Request, by ...engine.By) (any, error) {
	var who engine.By
	if len(by) > 0 {
		who = by[0]
	}
	who.Actor = actorOf(r)
	ctx, cancel := context.WithTimeout(r.Context(), a.opWait)
	defer cancel()
	msg, err := a.eng.Do(ctx, op, who)
	if err != nil {
		var acc *engine.AcceptedError
		if errors.As(err, &acc) {
			return accepted{Result{Request: acc.Request, Result: fmt.Sprintf("%s accepted as request %d and still being applied after %s: "+
				"the action log lists it once applied (GET /api/v1/actions?action=%s&newest=true, its detail ending \"(request %d)\"; ax status shows the run it creates)",
				op.Verb(), acc.Request, a.opWait, op.Verb(), acc.Request)}}, nil
		}
		if ctx.Err() != nil {
			return nil, errf(http.StatusServiceUnavailable, "%s: the scheduler did not take the request within %s; nothing was applied", op.Verb(), a.opWait)
		}
		if errors.Is(err, engine.ErrBadOp) {
			return nil, errf(http.StatusBadRequest, "%s: %v", op.Verb(), strings.TrimPrefix(err.Error(), engine.ErrBadOp.Error()+": "))
		}
		return nil, errf(http.StatusConflict, "%s refused: %v", op.Verb(), err)
	}
	return Result{Result: msg}, nil
}

func pauseOf(scope store.PauseScope, name string) engine.Request {
	return engine.Pause{Scope: scope, Target: name}
}

func resumeOf(scope store.PauseScope, name string) engine.Request {
	return engine.Resume{Scope: scope, Target: name}
}

// taskOp serves a request about the task of the path (pause, resume, kill,
// rerun), made by req.
func taskOp(req func(task string) engine.Request) func(*admin, *http.Request) (any, error) {
	return func(a *admin, r *http.Request) (any, error) {
		t, err := a.taskOf(r)
		if err != nil {
			return nil, err
		}
		var b opBody
		if err := decodeBody(r, &b); err != nil {
			return nil, err
		}
		if b.Downstream {
			return nil, errf(http.StatusBadRequest, "downstream applies to trigger only")
		}
		op, err := withHold(req(t.ID()), b.Hold)
		if err != nil {
			return nil, err
		}
		return a.do(r, op, engine.By{Reason: b.Reason})
	}
}

// scopeOp serves a pause or resume (req) of the pipeline or group of the path.
func scopeOp(scope store.PauseScope, req func(scope store.PauseScope, name string) engine.Request) func(*admin, *http.Request) (any, error) {
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
		if b.Downstream || b.Hold {
			return nil, errf(http.StatusBadRequest, "downstream and hold apply to trigger (and hold to rerun) only")
		}
		return a.do(r, req(scope, name), engine.By{Reason: b.Reason})
	}
}

// pathInstance returns the instance id of the path, 404 when there is none.
func (a *admin) pathInstance(r *http.Request) (int64, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return 0, err
	}
	if _, err := a.st.Instance(r.Context(), id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return 0, errf(http.StatusNotFound, "no instance %d", id)
		}
		return 0, err
	}
	return id, nil
}

// instanceOp serves a kill or rerun (req) of the instance of the path.
func instanceOp(req func(id int64) engine.Request) func(*admin, *http.Request) (any, error) {
	return func(a *admin, r *http.Request) (any, error) {
		id, err := a.pathInstance(r)
		if err != nil {
			return nil, err
		}
		var b opBody
		if err := decodeBody(r, &b); err != nil {
			return nil, err
		}
		op, err := withHold(req(id), b.Hold)
		if err != nil {
			return nil, err
		}
		return a.do(r, op, engine.By{Reason: b.Reason})
	}
}

func (a *admin) runRerun(r *http.Request) (any, error) {
	id, b, err := a.runOpBody(r)
	if err != nil {
		return nil, err
	}
	return a.do(r, engine.Rerun{Run: id, Hold: b.Hold}, engine.By{Reason: b.Reason})
}

func (a *admin) setLimits(r *http.Request) (any, error) {
	var b LimitsChange
	if err := decodeBody(r, &b); err != nil {
		return nil, err
	}
	if b.Global == nil && len(b.Groups) == 0 && b.MaxRunning == nil && len(b.GroupMaxRunning) == 0 {
		return nil, errf(http.StatusBadRequest, `give {"global": N} or {"groups": {"NAME": N}} (dispatches per second, 0 to %d; 0 lifts a limit), or {"max_running": N} or {"group_max_running": {"NAME": N}} (attempts at once, 0 to %d; 0 lifts a cap)`, engine.MaxRate, engine.MaxRunningBound)
	}
	v, err := a.do(r, engine.SetLimits{Global: b.Global, Groups: b.Groups, MaxRunning: b.MaxRunning, GroupMaxRunning: b.GroupMaxRunning}, engine.By{Reason: b.Reason})
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
	return a.do(r, engine.CancelBackfill{Backfill: b.ID})
}

func (a *admin) resumeBackfill(r *http.Request) (any, error) {
	b, err := a.backfillOf(r)
	if err != nil {
		return nil, err
	}
	return a.do(r, engine.ResumeBackfill{Backfill: b.ID})
}

// approveBackfill approves the gates of every run of the backfill of the
// path, in one request: engine.ApproveBackfill.
func (a *admin) approveBackfill(r *http.Request) (any, error) {
	b, err := a.backfillOf(r)
	if err != nil {
		return nil, err
	}
	var body opBody
	if err := decodeBody(r, &body); err != nil {
		return nil, err
	}
	if body.Downstream {
		return nil, errf(http.StatusBadRequest, "downstream applies to trigger only")
	}
	return a.do(r, engine.ApproveBackfill{Backfill: b.ID, Hold: body.Hold}, engine.By{Reason: body.Reason})
}

// BackfillRequest is the body of POST /api/v1/backfills.
type BackfillRequest struct {
	Pipeline      string `json:"pipeline"`
	From          string `json:"from"`
	To            string `json:"to"`
	Select        string `json:"select"`
	MaxActiveRuns int    `json:"max_active_runs"`
	Reverse       bool   `json:"reverse"`
	Rerun         string `json:"rerun"`
	StopOnFailure bool   `json:"stop_on_failure"`
	ApproveManual bool   `json:"approve_manual"`
	WaitCross     bool   `json:"wait_cross"` // wait for other pipelines' runs (BackfillSpec.WaitCross)
	Hold          bool   `json:"hold"`       // under a pause: start it, what the pause covers held PAUSED (else 409)
	DryRun        bool   `json:"dry_run"`
	// Params are every run's params, checked as a trigger's.
	Params ParamValues `json:"params,omitempty"`
}

func (a *admin) startBackfill(r *http.Request) (any, error) {
	var b BackfillRequest
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
	from, err := ParseWhen(b.From, loc, false)
	if err != nil {
		return nil, errf(http.StatusBadRequest, "from: %v", err)
	}
	to, err := ParseWhen(b.To, loc, true)
	if err != nil {
		return nil, errf(http.StatusBadRequest, "to: %v", err)
	}
	spec, err := engine.PlanBackfill(a.graph(), engine.BackfillParams{Pipeline: b.Pipeline, From: from, To: to, Select: b.Select,
		MaxActiveRuns: b.MaxActiveRuns, Reverse: b.Reverse, Rerun: b.Rerun, StopOnFailure: b.StopOnFailure,
		ApproveManual: b.ApproveManual, WaitCross: b.WaitCross, Hold: b.Hold, Params: b.Params})
	if err != nil {
		code := http.StatusBadRequest
		if p == nil {
			code = http.StatusNotFound
		}
		return nil, errf(code, "%v", err)
	}
	if b.DryRun {
		return BackfillPlan{Plan: spec}, nil
	}
	id, err := engine.CreateBackfill(r.Context(), a.st, a.graph(), spec, actorOf(r), a.now())
	var pe *engine.PausedError
	if errors.As(err, &pe) {
		return nil, errf(http.StatusConflict, "backfill refused: %v", err)
	}
	if err != nil {
		return nil, err
	}
	return created{BackfillPlan{ID: id, Plan: spec}}, nil
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
