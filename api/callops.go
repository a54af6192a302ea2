package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// UsageError is a request refused before it was sent or queued: the
// caller named something wrongly (a usage error of the command).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Apply sends an operator's request to its route (POST) with reason, and
// at (a logical time as the operator wrote it, read by the server in the
// pipeline's zone) for a trigger or a mark.
func (c *Client) Apply(ctx context.Context, req engine.Request, at, reason string) (Result, json.RawMessage, error) {
	pattern, args, body, err := opRoute(req, at, reason)
	if err != nil {
		return Result{}, nil, err
	}
	return call[Result](ctx, c, http.MethodPost, pattern, nil, body, args...)
}

// opRoute is the route pattern, its arguments and the body of a request.
func opRoute(req engine.Request, at, reason string) (string, []any, map[string]any, error) {
	body := map[string]any{"reason": reason}
	task := func(target, verb string) (string, []any, map[string]any, error) {
		p, t, ok := strings.Cut(target, ".")
		if !ok || p == "" || t == "" {
			return "", nil, nil, &UsageError{Msg: fmt.Sprintf("%q: write PIPELINE.TASK", target)}
		}
		return "/api/v1/pipelines/{pipeline}/tasks/{task}/" + verb, []any{p, t}, body, nil
	}
	pause := func(scope store.PauseScope, target, verb string) (string, []any, map[string]any, error) {
		switch scope {
		case store.ScopeGroup:
			return "/api/v1/groups/{group}/" + verb, []any{target}, body, nil
		case store.ScopePipeline:
			return "/api/v1/pipelines/{pipeline}/" + verb, []any{target}, body, nil
		}
		return task(target, verb)
	}
	byID := func(pattern string, id int64) (string, []any, map[string]any, error) {
		return pattern, []any{id}, body, nil
	}
	switch r := req.(type) {
	case engine.Pause:
		return pause(r.Scope, r.Target, r.Verb())
	case engine.Resume:
		return pause(r.Scope, r.Target, r.Verb())
	case engine.Trigger:
		addTrigger(body, r, at)
		if !strings.Contains(r.Target, ".") {
			return "/api/v1/pipelines/{pipeline}/trigger", []any{r.Target}, body, nil
		}
		body["downstream"] = r.Downstream
		return task(r.Target, r.Verb())
	case engine.Mark:
		body["state"] = strings.ToLower(string(r.State))
		if r.Instance != 0 {
			return byID("/api/v1/instances/{id}/mark", r.Instance)
		}
		if r.Run != 0 {
			body["run"] = r.Run
		}
		if at != "" {
			body["at"] = at
		}
		return task(r.Target, r.Verb())
	case engine.Kill:
		if r.Instance != 0 {
			return byID("/api/v1/instances/{id}/kill", r.Instance)
		}
		return task(r.Target, r.Verb())
	case engine.Rerun:
		if r.Hold {
			body["hold"] = true
		}
		switch {
		case r.Instance != 0:
			return byID("/api/v1/instances/{id}/rerun", r.Instance)
		case r.Run != 0:
			return byID("/api/v1/runs/{run}/rerun", r.Run)
		}
		return task(r.Target, r.Verb())
	case engine.Cancel:
		return byID("/api/v1/runs/{run}/cancel", r.Run)
	case engine.ApproveBackfill:
		if r.Hold {
			body["hold"] = true
		}
		return byID("/api/v1/backfills/{id}/approve", r.Backfill)
	}
	return "", nil, nil, fmt.Errorf("ax: %s has no API route here", req.Verb())
}

// addTrigger adds what a trigger says, beyond its target, to body: its
// logical time, params, delay and hold.
func addTrigger(body map[string]any, r engine.Trigger, at string) {
	if at != "" {
		body["at"] = at
	}
	if len(r.Params) > 0 {
		body["params"] = r.Params
	}
	if r.In > 0 {
		body["in"] = r.In.String()
	}
	if r.Hold {
		body["hold"] = true
	}
}
