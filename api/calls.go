package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ax-sched/ax/axtype"
)

// The methods below are the typed face of the admin API: one per route of
// adminRoutes, each naming its route by the table's own pattern
// (TestClientCallsTableRoutes checks that each call reaches the route it names). No
// route is spelled anywhere else outside this package.

// ResultsPath is the route executors post their results to.
const ResultsPath = "/api/v1/results"

// fill fills the {name} parameters of pattern, in order, with args
// (path-escaped), and appends query.
func fill(pattern string, query url.Values, args ...any) string {
	p := pattern
	for _, a := range args {
		i, j := strings.IndexByte(p, '{'), strings.IndexByte(p, '}')
		if i < 0 || j < i {
			panic("api: too many arguments for " + pattern)
		}
		p = p[:i] + url.PathEscape(fmt.Sprint(a)) + p[j+1:]
	}
	if q := query.Encode(); q != "" {
		p += "?" + q
	}
	return p
}

// call sends body to the route pattern filled with args and query, and
// decodes the answer into a T; it returns the answer's JSON too, for --json.
func call[T any](ctx context.Context, c *Client, method, pattern string, query url.Values, body any, args ...any) (T, json.RawMessage, error) {
	var out T
	raw, err := c.Call(ctx, method, fill(pattern, query, args...), body)
	if err != nil {
		return out, raw, err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, raw, fmt.Errorf("unexpected answer from %s: %s", fill(pattern, query, args...), raw)
	}
	return out, raw, nil
}

// Status is GET /api/v1/status.
func (c *Client) Status(ctx context.Context) (Status, json.RawMessage, error) {
	return call[Status](ctx, c, http.MethodGet, "/api/v1/status", nil, nil)
}

// Pipelines is GET /api/v1/pipelines, of the pipeline name alone when set.
func (c *Client) Pipelines(ctx context.Context, name string) ([]PipelineItem, error) {
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	v, _, err := call[[]PipelineItem](ctx, c, http.MethodGet, "/api/v1/pipelines", q, nil)
	return v, err
}

// PipelineSummary is GET /api/v1/pipelines/{pipeline}?summary=true: a 404
// with a suggestion when there is no such pipeline.
func (c *Client) PipelineSummary(ctx context.Context, pipeline string) (Pipeline, error) {
	v, _, err := call[Pipeline](ctx, c, http.MethodGet, "/api/v1/pipelines/{pipeline}", url.Values{"summary": {"true"}}, nil, pipeline)
	return v, err
}

// RecentRuns is GET /api/v1/pipelines/{pipeline}/runs?recent=true: the
// first limit runs as ax status shows them.
func (c *Client) RecentRuns(ctx context.Context, pipeline string, limit int) ([]RunView, error) {
	q := url.Values{"recent": {"true"}, "limit": {strconv.Itoa(limit)}}
	v, _, err := call[[]RunView](ctx, c, http.MethodGet, "/api/v1/pipelines/{pipeline}/runs", q, nil, pipeline)
	return v, err
}

// Task is GET /api/v1/pipelines/{pipeline}/tasks/{task}.
func (c *Client) Task(ctx context.Context, pipeline, task string) (TaskDetail, error) {
	v, _, err := call[TaskDetail](ctx, c, http.MethodGet, "/api/v1/pipelines/{pipeline}/tasks/{task}", nil, nil, pipeline, task)
	return v, err
}

// Explain is GET /api/v1/pipelines/{pipeline}/tasks/{task}/explain.
func (c *Client) Explain(ctx context.Context, pipeline, task string, utc bool) (axtype.Explanation, json.RawMessage, error) {
	q := url.Values{}
	if utc {
		q.Set("utc", "true")
	}
	return call[axtype.Explanation](ctx, c, http.MethodGet, "/api/v1/pipelines/{pipeline}/tasks/{task}/explain", q, nil, pipeline, task)
}

// InstanceQuery selects instances of GET /api/v1/instances (zero: any).
type InstanceQuery struct {
	Task    string
	Run     int64
	Ran     bool // only instances dispatched at least once
	Started bool // the task's latest attempt first
	Limit   int
}

// Instances is GET /api/v1/instances.
func (c *Client) Instances(ctx context.Context, iq InstanceQuery) ([]axtype.Instance, error) {
	q := url.Values{}
	if iq.Task != "" {
		q.Set("task", iq.Task)
	}
	if iq.Run != 0 {
		q.Set("run", strconv.FormatInt(iq.Run, 10))
	}
	if iq.Ran {
		q.Set("ran", "true")
	}
	if iq.Started {
		q.Set("order", "started")
	}
	if iq.Limit > 0 {
		q.Set("limit", strconv.Itoa(iq.Limit))
	}
	v, _, err := call[[]axtype.Instance](ctx, c, http.MethodGet, "/api/v1/instances", q, nil)
	return v, err
}

// newest is the query of a task's newest limit log entries (at most the
// 1000 the API answers at once).
func newest(task string, limit int) url.Values {
	return url.Values{"task": {task}, "newest": {"true"}, "limit": {strconv.Itoa(min(limit, 1000))}}
}

// History is GET /api/v1/history: a task's newest limit transitions,
// newest first.
func (c *Client) History(ctx context.Context, task string, limit int) ([]axtype.HistoryRow, error) {
	v, _, err := call[[]axtype.HistoryRow](ctx, c, http.MethodGet, "/api/v1/history", newest(task, limit), nil)
	return v, err
}

// Actions is GET /api/v1/actions: a task's newest limit actions, newest
// first.
func (c *Client) Actions(ctx context.Context, task string, limit int) ([]axtype.Action, error) {
	v, _, err := call[[]axtype.Action](ctx, c, http.MethodGet, "/api/v1/actions", newest(task, limit), nil)
	return v, err
}

// logsQuery is the query of an instance's log: the task it must be of, the
// attempt (0: the latest).
func logsQuery(task string, attempt int) url.Values {
	q := url.Values{"task": {task}}
	if attempt > 0 {
		q.Set("attempt", strconv.Itoa(attempt))
	}
	return q
}

// Logs is GET /api/v1/instances/{id}/logs.
func (c *Client) Logs(ctx context.Context, instance int64, task string, attempt int) (LogPage, json.RawMessage, error) {
	return call[LogPage](ctx, c, http.MethodGet, "/api/v1/instances/{id}/logs", logsQuery(task, attempt), nil, instance)
}

// FollowLogs is GET /api/v1/instances/{id}/logs?follow=true: each sees
// every event of the NDJSON stream.
func (c *Client) FollowLogs(ctx context.Context, instance int64, task string, attempt int, each func([]byte) error) error {
	q := logsQuery(task, attempt)
	q.Set("follow", "true")
	return c.Stream(ctx, fill("/api/v1/instances/{id}/logs", q, instance), each)
}

// Executors is GET /api/v1/executors.
func (c *Client) Executors(ctx context.Context) ([]ExecutorView, json.RawMessage, error) {
	return call[[]ExecutorView](ctx, c, http.MethodGet, "/api/v1/executors", nil, nil)
}

// Limits is GET /api/v1/limits.
func (c *Client) Limits(ctx context.Context) (LimitsView, json.RawMessage, error) {
	return call[LimitsView](ctx, c, http.MethodGet, "/api/v1/limits", nil, nil)
}

// SetLimits is PUT /api/v1/limits.
func (c *Client) SetLimits(ctx context.Context, ch LimitsChange) (Result, json.RawMessage, error) {
	return call[Result](ctx, c, http.MethodPut, "/api/v1/limits", nil, ch)
}

// Reload is GET /api/v1/reload, with the definitions in force of tasks.
func (c *Client) Reload(ctx context.Context, tasks []string) (ReloadView, error) {
	q := url.Values{}
	if len(tasks) > 0 {
		q["task"] = tasks
	}
	v, _, err := call[ReloadView](ctx, c, http.MethodGet, "/api/v1/reload", q, nil)
	return v, err
}

// PruneDry is GET /api/v1/prune: what retention (retain, "": the server's)
// would delete now.
func (c *Client) PruneDry(ctx context.Context, retain string) (PruneReport, error) {
	q := url.Values{}
	if retain != "" {
		q.Set("retain", retain)
	}
	v, _, err := call[PruneReport](ctx, c, http.MethodGet, "/api/v1/prune", q, nil)
	return v, err
}

// PruneNow is POST /api/v1/prune.
func (c *Client) PruneNow(ctx context.Context) (PruneReport, error) {
	v, _, err := call[PruneReport](ctx, c, http.MethodPost, "/api/v1/prune", nil, struct{}{})
	return v, err
}

// Backfills is GET /api/v1/backfills.
func (c *Client) Backfills(ctx context.Context) ([]BackfillView, json.RawMessage, error) {
	return call[[]BackfillView](ctx, c, http.MethodGet, "/api/v1/backfills", nil, nil)
}

// Backfill is GET /api/v1/backfills/{id}.
func (c *Client) Backfill(ctx context.Context, id int64) (BackfillView, json.RawMessage, error) {
	return call[BackfillView](ctx, c, http.MethodGet, "/api/v1/backfills/{id}", nil, nil, id)
}

// StartBackfill is POST /api/v1/backfills.
func (c *Client) StartBackfill(ctx context.Context, req BackfillRequest) (BackfillPlan, json.RawMessage, error) {
	return call[BackfillPlan](ctx, c, http.MethodPost, "/api/v1/backfills", nil, req)
}

// CancelBackfill is POST /api/v1/backfills/{id}/cancel.
func (c *Client) CancelBackfill(ctx context.Context, id int64) (Result, json.RawMessage, error) {
	return call[Result](ctx, c, http.MethodPost, "/api/v1/backfills/{id}/cancel", nil, map[string]any{}, id)
}

// ResumeBackfill is POST /api/v1/backfills/{id}/resume.
func (c *Client) ResumeBackfill(ctx context.Context, id int64) (Result, json.RawMessage, error) {
	return call[Result](ctx, c, http.MethodPost, "/api/v1/backfills/{id}/resume", nil, map[string]any{}, id)
}

// Where names the server the client calls.
func (c *Client) Where() string { return c.base }

// Zones reads the pipelines' zones from the API (APIZones).
func (c *Client) Zones(ctx context.Context, utc bool) *Zones { return APIZones(ctx, c, utc) }
