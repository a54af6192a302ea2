package direct

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// Apply queues req for the primary scheduler on the store and waits for
// its outcome (QueueOp). at, when set, is the logical time of a trigger or
// a mark: here it must be RFC 3339 with an offset, since no pipeline zone
// is at hand. An unknown task, pipeline or group is refused before
// anything is queued, with a suggestion.
func (s *Store) Apply(ctx context.Context, req engine.Request, at, reason string) (api.Result, json.RawMessage, error) {
	if at != "" {
		t, err := ParseAt(at)
		if err != nil {
			return api.Result{}, nil, err
		}
		switch r := req.(type) {
		case engine.Trigger:
			r.At, req = t, r
		case engine.Mark:
			r.At, req = t, r
		}
	}
	if scope, target := opTarget(req); scope != "" && target != "" {
		if err := s.checkName(ctx, scope, target); err != nil {
			return api.Result{}, nil, err
		}
	}
	res, err := QueueRequest(ctx, s.st, req, engine.By{Actor: s.actor, Reason: reason}, s.wait)
	return api.Result{Result: res}, nil, err
}

// ParseAt reads the --at of a request queued in a store: RFC 3339 with an
// offset, since no pipeline zone is at hand.
func ParseAt(at string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return t, &api.UsageError{Msg: fmt.Sprintf("--at %q: with --store give RFC 3339 with an offset (2026-03-01T02:00:00+08:00); the API reads other forms in the pipeline's zone", at)}
	}
	return t, nil
}

// QueueRequest queues req made by by (QueueOp) and waits for its outcome.
func QueueRequest(ctx context.Context, st *store.Store, req engine.Request, by engine.By, wait time.Duration) (string, error) {
	verb, args, err := engine.EncodeRequest(req, by)
	if err != nil {
		return "", err
	}
	_, target := opTarget(req)
	return QueueOp(ctx, st, store.Op{Kind: verb, Target: target, Args: string(args), Actor: by.Actor, Reason: by.Reason}, wait)
}

// opTarget says what a request acts on: the scope and name of a task,
// pipeline or group (scope is empty for a run's task or a pipeline to
// trigger), or else the instance, run or backfill, as the queue shows it.
func opTarget(req engine.Request) (scope axtype.PauseScope, target string) {
	byID := func(what string, id int64) string { return what + " " + strconv.FormatInt(id, 10) }
	switch r := req.(type) {
	case engine.Pause:
		return r.Scope, r.Target
	case engine.Resume:
		return r.Scope, r.Target
	case engine.Trigger:
		if !strings.Contains(r.Target, ".") {
			return axtype.ScopePipeline, r.Target
		}
		return axtype.ScopeTask, r.Target
	case engine.Kill:
		if r.Instance != 0 {
			return "", byID("instance", r.Instance)
		}
		return axtype.ScopeTask, r.Target
	case engine.Rerun:
		switch {
		case r.Instance != 0:
			return "", byID("instance", r.Instance)
		case r.Run != 0:
			return "", byID("run", r.Run)
		}
		return axtype.ScopeTask, r.Target
	case engine.Mark:
		if r.Instance != 0 {
			return "", byID("instance", r.Instance)
		}
		return axtype.ScopeTask, r.Target
	case engine.Cancel:
		return "", byID("run", r.Run)
	case engine.CancelBackfill:
		return "", byID("backfill", r.Backfill)
	case engine.ResumeBackfill:
		return "", byID("backfill", r.Backfill)
	case engine.ApproveBackfill:
		return "", byID("backfill", r.Backfill)
	}
	return "", ""
}

// QueueOp queues a request in the store for the primary scheduler to apply
// (the one way --store reaches the engine: nothing here writes state), and
// waits for its outcome. A request no scheduler claimed within wait is
// withdrawn, so that it cannot surprise anyone later; one the scheduler
// claimed is applied whatever happens, so it is waited for a while longer,
// and never reported withdrawn.
func QueueOp(ctx context.Context, st *store.Store, o store.Op, wait time.Duration) (string, error) {
	id, err := st.EnqueueOp(ctx, o, time.Now())
	if err != nil {
		return "", err
	}
	deadline, claimed := time.Now().Add(wait), false
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := st.GetOp(ctx, id)
		if err != nil {
			return "", err
		}
		switch got.State {
		case store.OpDone:
			return got.Result, nil
		case store.OpFailed:
			return "", fmt.Errorf("%s %s: %s", o.Kind, o.Target, got.Error)
		}
		if time.Now().After(deadline) {
			if claimed {
				return "", fmt.Errorf("%s %s: the scheduler took it (request %d) but recorded no outcome within %s: ax history or the action log shows what it did", o.Kind, o.Target, id, 2*wait)
			}
			err := st.WithdrawOp(ctx, id, fmt.Sprintf("withdrawn: no scheduler applied it within %s", wait), time.Now())
			switch {
			case errors.Is(err, store.ErrConflict): // claimed just now: wait for its outcome
				deadline, claimed = time.Now().Add(wait), true
			case err != nil:
				return "", fmt.Errorf("%s %s: no scheduler applied it within %s, and withdrawing it failed: %w", o.Kind, o.Target, wait, err)
			default:
				return "", fmt.Errorf("%s %s: no scheduler applied it within %s; is ax server running on %s? (the request was withdrawn)", o.Kind, o.Target, wait, st)
			}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-tick.C:
		}
	}
}
