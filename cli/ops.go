package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// OpOptions are the flags every operation command takes. By default the
// operation goes to the admin API of a running ax server; with --store it
// is queued in that store for whichever scheduler is primary on it.
type OpOptions struct {
	Store  string
	Reason string
	Wait   time.Duration
	API    APIOptions
	// ViaStore says whether --store was given: queue in the store rather
	// than call the API.
	ViaStore func() bool
}

// OpRoute is the API endpoint and body of an operation.
func OpRoute(op Op) (string, map[string]any, error) {
	body := map[string]any{"reason": op.Reason}
	esc := url.PathEscape
	task := func(target, verb string) (string, map[string]any, error) {
		p, t, err := SplitTask(target)
		if err != nil {
			return "", nil, err
		}
		return "/api/v1/pipelines/" + esc(p) + "/tasks/" + esc(t) + "/" + verb, body, nil
	}
	pause := func(scope store.PauseScope, target, verb string) (string, map[string]any, error) {
		switch scope {
		case store.ScopeGroup:
			return "/api/v1/groups/" + esc(target) + "/" + verb, body, nil
		case store.ScopePipeline:
			return "/api/v1/pipelines/" + esc(target) + "/" + verb, body, nil
		}
		return task(target, verb)
	}
	switch r := op.Req.(type) {
	case engine.Pause:
		return pause(r.Scope, r.Target, r.Verb())
	case engine.Resume:
		return pause(r.Scope, r.Target, r.Verb())
	case engine.Trigger:
		if op.AtText != "" {
			body["at"] = op.AtText
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
		if !strings.Contains(r.Target, ".") {
			return "/api/v1/pipelines/" + esc(r.Target) + "/trigger", body, nil
		}
		body["downstream"] = r.Downstream
		return task(r.Target, r.Verb())
	case engine.Mark:
		body["state"] = strings.ToLower(string(r.State))
		if r.Instance != 0 {
			return fmt.Sprintf("/api/v1/instances/%d/mark", r.Instance), body, nil
		}
		if r.Run != 0 {
			body["run"] = r.Run
		}
		if op.AtText != "" {
			body["at"] = op.AtText
		}
		return task(r.Target, r.Verb())
	case engine.Kill:
		if r.Instance != 0 {
			return fmt.Sprintf("/api/v1/instances/%d/kill", r.Instance), body, nil
		}
		return task(r.Target, r.Verb())
	case engine.Rerun:
		if r.Hold {
			body["hold"] = true
		}
		switch {
		case r.Instance != 0:
			return fmt.Sprintf("/api/v1/instances/%d/rerun", r.Instance), body, nil
		case r.Run != 0:
			return fmt.Sprintf("/api/v1/runs/%d/rerun", r.Run), body, nil
		}
		return task(r.Target, r.Verb())
	case engine.Cancel:
		return fmt.Sprintf("/api/v1/runs/%d/cancel", r.Run), body, nil
	case engine.ApproveBackfill:
		if r.Hold {
			body["hold"] = true
		}
		return fmt.Sprintf("/api/v1/backfills/%d/approve", r.Backfill), body, nil
	}
	return "", nil, fmt.Errorf("ax: %s has no API route here", op.Req.Verb())
}

// Op is an operation as the CLI has it: --at stays as written, for the
// server to read in the pipeline's zone.
type Op struct {
	Req    engine.Request
	AtText string
	Reason string
}

// SubmitAPI sends op to the admin API and prints what the scheduler did.
func SubmitAPI(ctx context.Context, w io.Writer, f OpOptions, op Op) error {
	c, err := NewAPIClient(f.API.Server)
	if err != nil {
		return err
	}
	op.Reason = f.Reason
	path, body, err := OpRoute(op)
	if err != nil {
		return err
	}
	raw, err := c.Call(ctx, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	if f.API.JSON {
		return PrintJSON(w, raw)
	}
	var res api.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return Fail(fmt.Errorf("unexpected answer from %s: %s", path, raw))
	}
	_, err = fmt.Fprintln(w, res.Result)
	return err
}

func Actor() string {
	if u := os.Getenv("USER"); u != "" {
		return "operator:" + u
	}
	return "operator"
}

// Submit queues op for the primary scheduler and waits for its outcome. A
// request no scheduler took within the wait is withdrawn, so that it cannot
// surprise anyone later.
func Submit(ctx context.Context, w io.Writer, f OpOptions, op engine.Request) error {
	return SubmitOp(ctx, w, f, Op{Req: op})
}

// SubmitOp is Submit for an operation with a --at.
func SubmitOp(ctx context.Context, w io.Writer, f OpOptions, cop Op) error {
	// Over-long text is refused here, before it is sent or queued.
	if err := engine.CheckRequest(cop.Req, engine.By{Actor: Actor(), Reason: f.Reason}); err != nil {
		return Usage("%s", strings.TrimPrefix(err.Error(), engine.ErrBadOp.Error()+": "))
	}
	if !f.ViaStore() {
		return SubmitAPI(ctx, w, f, cop)
	}
	op := cop.Req
	if cop.AtText != "" {
		at, err := time.Parse(time.RFC3339, cop.AtText)
		if err != nil {
			return Usage("--at %q: with --store give RFC 3339 with an offset (2026-03-01T02:00:00+08:00); the API reads other forms in the pipeline's zone", cop.AtText)
		}
		switch r := op.(type) {
		case engine.Trigger:
			r.At, op = at, r
		case engine.Mark:
			r.At, op = at, r
		}
	}
	st, err := store.Open(ctx, f.Store, store.Options{Existing: true})
	if err != nil {
		return Fail(err)
	}
	defer st.Close()
	if err := CheckTarget(ctx, st, op); err != nil {
		return Fail(err)
	}
	res, err := QueueRequest(ctx, st, op, engine.By{Actor: Actor(), Reason: f.Reason}, f.Wait)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, res)
	return err
}

// QueueRequest queues req made by by (QueueOp) and waits for its outcome.
func QueueRequest(ctx context.Context, st *store.Store, req engine.Request, by engine.By, wait time.Duration) (string, error) {
	verb, args, err := engine.EncodeRequest(req, by)
	if err != nil {
		return "", Fail(err)
	}
	_, target := opTarget(req)
	return QueueOp(ctx, st, store.Op{Kind: verb, Target: target, Args: string(args), Actor: by.Actor, Reason: by.Reason}, wait)
}

// opTarget says what a request acts on: the scope and name of a task,
// pipeline or group (scope is empty for a run's task or a pipeline to
// trigger), or else the instance, run or backfill, as the queue shows it.
func opTarget(req engine.Request) (scope store.PauseScope, target string) {
	byID := func(what string, id int64) string { return what + " " + strconv.FormatInt(id, 10) }
	switch r := req.(type) {
	case engine.Pause:
		return r.Scope, r.Target
	case engine.Resume:
		return r.Scope, r.Target
	case engine.Trigger:
		if !strings.Contains(r.Target, ".") {
			return store.ScopePipeline, r.Target
		}
		return store.ScopeTask, r.Target
	case engine.Kill:
		if r.Instance != 0 {
			return "", byID("instance", r.Instance)
		}
		return store.ScopeTask, r.Target
	case engine.Rerun:
		switch {
		case r.Instance != 0:
			return "", byID("instance", r.Instance)
		case r.Run != 0:
			return "", byID("run", r.Run)
		}
		return store.ScopeTask, r.Target
	case engine.Mark:
		if r.Instance != 0 {
			return "", byID("instance", r.Instance)
		}
		return store.ScopeTask, r.Target
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
		return "", Fail(err)
	}
	deadline, claimed := time.Now().Add(wait), false
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := st.GetOp(ctx, id)
		if err != nil {
			return "", Fail(err)
		}
		switch got.State {
		case store.OpDone:
			return got.Result, nil
		case store.OpFailed:
			return "", Fail(fmt.Errorf("%s %s: %s", o.Kind, o.Target, got.Error))
		}
		if time.Now().After(deadline) {
			if claimed {
				return "", Fail(fmt.Errorf("%s %s: the scheduler took it (request %d) but recorded no outcome within %s: ax history or the action log shows what it did", o.Kind, o.Target, id, 2*wait))
			}
			err := st.WithdrawOp(ctx, id, fmt.Sprintf("withdrawn: no scheduler applied it within %s", wait), time.Now())
			switch {
			case errors.Is(err, store.ErrConflict): // claimed just now: wait for its outcome
				deadline, claimed = time.Now().Add(wait), true
			case err != nil:
				return "", Fail(fmt.Errorf("%s %s: no scheduler applied it within %s, and withdrawing it failed: %w", o.Kind, o.Target, wait, err))
			default:
				return "", Fail(fmt.Errorf("%s %s: no scheduler applied it within %s; is ax server running on %s? (the request was withdrawn)", o.Kind, o.Target, wait, st))
			}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-tick.C:
		}
	}
}

// CheckTarget refuses an unknown task, pipeline or group before anything is
// queued, with a suggestion.
func CheckTarget(ctx context.Context, st *store.Store, op engine.Request) error {
	scope, target := opTarget(op)
	if scope == "" || target == "" {
		return nil
	}
	return checkName(ctx, st, scope, target)
}

// checkName refuses an unknown task, pipeline or group (scope, name).
func checkName(ctx context.Context, st *store.Store, scope store.PauseScope, name string) error {
	tasks, err := st.Tasks(ctx, store.TaskFilter{})
	if err != nil {
		return err
	}
	var names []string
	found := false
	for _, t := range tasks {
		var n string
		switch scope {
		case store.ScopeGroup:
			n = t.Group
		case store.ScopePipeline:
			n = t.Pipeline
		default:
			n = t.ID
		}
		names = append(names, n)
		found = found || n == name
	}
	if found {
		return nil
	}
	kind := cmp.Or(string(scope), "task")
	if len(tasks) == 0 {
		return fmt.Errorf("no %s %q: the store has no pipelines yet (has ax server run on it?)", kind, name)
	}
	return fmt.Errorf("no %s %q%s", kind, name, defs.DidYouMean(name, slices.Compact(names)))
}

// PauseTarget reads `pipeline.task`, `pipeline` or --group NAME.
func PauseTarget(args []string, group string) (store.PauseScope, string, error) {
	switch {
	case group != "" && len(args) == 0:
		return store.ScopeGroup, group, nil
	case group == "" && len(args) == 1 && strings.Contains(args[0], "."):
		return store.ScopeTask, args[0], nil
	case group == "" && len(args) == 1:
		return store.ScopePipeline, args[0], nil
	}
	return "", "", Usage("give PIPELINE.TASK, PIPELINE, or --group NAME")
}
