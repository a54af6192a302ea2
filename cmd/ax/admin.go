package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// admin serves the admin API under /api/v1 (R31), the web console, /metrics,
// /healthz and /readyz. Reads come from the store, so a standby answers
// them; writes go through the primary's engine loop, and a standby refuses
// them with a pointer to the primary.
type admin struct {
	st        *store.Store
	g         *dag.Graph
	eng       *engine.Engine // nil: no scheduler in this process (reads only)
	gather    prometheus.Gatherer
	token     string // AX_ADMIN_TOKEN: required on writes (and reads unless openReads) when set
	openReads bool
	now       func() time.Time
	opWait    time.Duration // how long a write waits for the engine loop
}

// maxBody bounds every request body the admin API reads.
const maxBody = 64 << 10

// route is one endpoint. The table of routes drives the mux, access
// control and the README's API section (see TestAPIDocMatchesRoutes).
type route struct {
	method, path string
	write        bool // changes state: needs the token; refused on a standby
	doc          string
	h            func(*admin, *http.Request) (any, error)
}

// apiErr is an error with its HTTP status.
type apiErr struct {
	code int
	msg  string
	// primary, for writes refused on a standby: where to send them.
	primary string
}

func (e *apiErr) Error() string { return e.msg }

func errf(code int, format string, args ...any) error {
	return &apiErr{code: code, msg: fmt.Sprintf(format, args...)}
}

// routes lists every admin endpoint, in the order the docs show them.
func adminRoutes() []route {
	return []route{
		{"GET", "/api/v1/status", false, "the lease holder, this process's role, loop counters and limits", (*admin).status},
		{"GET", "/api/v1/pipelines", false, "pipelines with their latest run's instance states", (*admin).pipelines},
		{"GET", "/api/v1/pipelines/{pipeline}", false, "one pipeline: tasks with their latest instance, graph edges, layers, latest run", (*admin).pipeline},
		{"GET", "/api/v1/pipelines/{pipeline}/runs", false, "runs, newest first; `state` (waiting, running, success, failed), `from`, `to` (logical time), `limit`", (*admin).runs},
		{"GET", "/api/v1/runs/{run}", false, "one run with its instances", (*admin).run},
		{"GET", "/api/v1/pipelines/{pipeline}/tasks/{task}", false, "one task: definition, summary, latest instance, next ten fires, last ten dispatches (due vs actual)", (*admin).task},
		{"GET", "/api/v1/pipelines/{pipeline}/tasks/{task}/explain", false, "why the task is not running, or ran late (R31a)", (*admin).explain},
		{"POST", "/api/v1/pipelines/{pipeline}/tasks/{task}/pause", true, "pause the task; body `{\"reason\"}`", taskOp(engine.OpPause)},
		{"POST", "/api/v1/pipelines/{pipeline}/tasks/{task}/resume", true, "resume the task (misfire policy for missed fires)", taskOp(engine.OpResume)},
		{"POST", "/api/v1/pipelines/{pipeline}/tasks/{task}/trigger", true, "run now, in a manual run of its own; body `{\"downstream\": true}` for the task and everything downstream", taskOp(engine.OpTrigger)},
		{"POST", "/api/v1/pipelines/{pipeline}/tasks/{task}/kill", true, "kill the task's running instances", taskOp(engine.OpKill)},
		{"POST", "/api/v1/pipelines/{pipeline}/tasks/{task}/rerun", true, "rerun the task's latest failed or killed instance", taskOp(engine.OpRerun)},
		{"POST", "/api/v1/pipelines/{pipeline}/pause", true, "pause every task of the pipeline", scopeOp(engine.OpPause, store.ScopePipeline)},
		{"POST", "/api/v1/pipelines/{pipeline}/resume", true, "resume the pipeline", scopeOp(engine.OpResume, store.ScopePipeline)},
		{"POST", "/api/v1/groups/{group}/pause", true, "pause every task of the group, in every pipeline", scopeOp(engine.OpPause, store.ScopeGroup)},
		{"POST", "/api/v1/groups/{group}/resume", true, "resume the group", scopeOp(engine.OpResume, store.ScopeGroup)},
		{"GET", "/api/v1/instances", false, "instances, newest first; `pipeline`, `task`, `run`, `state` (repeatable), `from`, `to`, `before` (id), `limit`", (*admin).instances},
		{"POST", "/api/v1/instances/{id}/kill", true, "kill one running instance", instanceOp(engine.OpKill)},
		{"POST", "/api/v1/instances/{id}/rerun", true, "rerun one instance (failed, killed or succeeded)", instanceOp(engine.OpRerun)},
		{"POST", "/api/v1/runs/{run}/rerun", true, "rerun a run's failed and killed instances", (*admin).runRerun},
		{"GET", "/api/v1/history", false, "state transitions; `task`, `instance`, `after`/`before` (id), `newest`, `limit`", (*admin).history},
		{"GET", "/api/v1/actions", false, "the action log; `task`, `pipeline`, `action`, `after`/`before` (id), `newest`, `limit`", (*admin).actions},
		{"GET", "/api/v1/executors", false, "registered executors: address, tasks, last heartbeat, excluded and why", (*admin).executors},
		{"GET", "/api/v1/limits", false, "dispatch limits in force (per second; 0 is unlimited)", (*admin).limits},
		{"PUT", "/api/v1/limits", true, "change limits at run time: `{\"global\": 50, \"groups\": {\"etl\": 10}}`; stored, so they survive restarts", (*admin).setLimits},
		{"GET", "/api/v1/backfills", false, "backfills, newest first", (*admin).backfills},
		{"POST", "/api/v1/backfills", true, "start a backfill: `{\"pipeline\", \"from\", \"to\", \"select\", \"max_active_runs\", \"reverse\", \"rerun\", \"stop_on_failure\", \"dry_run\"}`", (*admin).startBackfill},
		{"GET", "/api/v1/backfills/{id}", false, "one backfill with its progress", (*admin).backfill},
		{"POST", "/api/v1/backfills/{id}/cancel", true, "stop a backfill from starting more runs (those in flight finish)", (*admin).cancelBackfill},
	}
}

// handler is everything ax server serves: the executor endpoints of api,
// the admin API, /metrics, /readyz and the console.
func (a *admin) handler(api *executorAPI) http.Handler {
	mux := http.NewServeMux()
	api.routes(mux)
	a.register(mux)
	mux.Handle("GET /{$}", consoleHandler())
	return mux
}

// register adds the admin routes, /metrics, /healthz and /readyz to mux.
func (a *admin) register(mux *http.ServeMux) {
	for _, rt := range adminRoutes() {
		mux.HandleFunc(rt.method+" "+rt.path, a.serve(rt))
	}
	metrics := promhttp.HandlerFor(a.gather, promhttp.HandlerOpts{})
	mux.Handle("GET /metrics", a.guard(false, metrics.ServeHTTP))
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		// A path served under another method is a 405, with the methods it takes.
		var allow []string
		for _, m := range []string{"GET", "POST", "PUT"} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "/api/" && pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, strings.Join(allow, " or "))})
			return
		}
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no endpoint %s %s: the README lists the API", r.Method, r.URL.Path)})
	})
}

// guard checks the bearer token: always for writes, for reads unless they are open.
func (a *admin) guard(write bool, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.token != "" && (write || !a.openReads) {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(a.token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="ax"`)
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong bearer token: send Authorization: Bearer $AX_ADMIN_TOKEN"})
				return
			}
		}
		next(w, r)
	}
}

func (a *admin) serve(rt route) http.HandlerFunc {
	return a.guard(rt.write, func(w http.ResponseWriter, r *http.Request) {
		if rt.write {
			if err := a.primary(r.Context()); err != nil {
				writeErr(w, err)
				return
			}
		}
		v, err := rt.h(a, r)
		if err != nil {
			writeErr(w, err)
			return
		}
		code := http.StatusOK
		if c, ok := v.(created); ok {
			code, v = http.StatusCreated, c.v
		}
		writeJSON(w, code, v)
	})
}

// created marks a handler's answer as 201 Created.
type created struct{ v any }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	var ae *apiErr
	if !errors.As(err, &ae) {
		ae = &apiErr{code: http.StatusServiceUnavailable, msg: err.Error()}
		if errors.Is(err, store.ErrNotFound) {
			ae.code = http.StatusNotFound
		}
	}
	body := map[string]string{"error": ae.msg}
	if ae.primary != "" {
		body["primary"] = ae.primary
	}
	writeJSON(w, ae.code, body)
}

// primaryAPISetting is where the primary records its API's URL, so that a
// standby can point writers to it.
const primaryAPISetting = "primary_api"

// primary refuses a write unless this process is the primary scheduler.
func (a *admin) primary(ctx context.Context) error {
	if a.eng != nil && a.eng.Stats().Leader {
		return nil
	}
	msg := "this server is a standby and takes no writes"
	e := &apiErr{code: http.StatusServiceUnavailable}
	if l, err := a.st.GetLease(ctx, ""); err == nil && a.now().Before(l.ExpiresAt) {
		msg += "; the primary is " + l.Holder
		if set, err := a.st.Settings(ctx); err == nil && set[primaryAPISetting] != "" {
			e.primary = set[primaryAPISetting]
			msg += " at " + e.primary
		}
	} else {
		msg += "; no primary holds the lease right now: retry shortly"
	}
	e.msg = msg
	return e
}

// readyz is 200 when this process can serve: as the primary, or as a
// standby whose store answers reads.
func (a *admin) readyz(w http.ResponseWriter, r *http.Request) {
	role := "standby"
	if a.eng != nil && a.eng.Stats().Leader {
		role = "primary"
	}
	if err := a.st.DB().PingContext(r.Context()); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "role": role, "error": "store: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ready": true, "role": role})
}

// --- request parsing ---

// decodeBody decodes an optional JSON body strictly: unknown fields, wrong
// types, trailing data and bodies over maxBody are 400s. An empty body
// leaves v as it is.
func decodeBody(r *http.Request, v any) error {
	if r.ContentLength == 0 && r.Body != nil {
		var one [1]byte
		if n, _ := r.Body.Read(one[:]); n == 0 {
			return nil
		}
		return errf(http.StatusBadRequest, "malformed request body: send a JSON object with a Content-Length")
	}
	if err := runner.DecodeStrict(r, v, maxBody); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errf(http.StatusRequestEntityTooLarge, "request body over %d bytes", maxBody)
		}
		return errf(http.StatusBadRequest, "malformed request body: %v", err)
	}
	return nil
}

// query reads a request's query parameters, refusing unknown ones, so a typo
// never silently drops a filter.
type query struct {
	v    map[string][]string
	errs []string
}

func parseQuery(r *http.Request, allowed ...string) (*query, error) {
	q := &query{v: r.URL.Query()}
	for k := range q.v {
		if !slices.Contains(allowed, k) {
			return nil, errf(http.StatusBadRequest, "unknown query parameter %q%s; this endpoint takes %s", k, defs.DidYouMean(k, allowed), strings.Join(allowed, ", "))
		}
	}
	return q, nil
}

func (q *query) str(k string) string {
	if vs := q.v[k]; len(vs) > 0 {
		return vs[len(vs)-1]
	}
	return ""
}

func (q *query) int(k string, def, lo, hi int64) int64 {
	s := q.str(k)
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		q.errs = append(q.errs, fmt.Sprintf("%s=%q: give a whole number from %d to %d", k, s, lo, hi))
		return def
	}
	return n
}

func (q *query) bool(k string) bool {
	switch s := q.str(k); s {
	case "", "false", "0":
		return false
	case "true", "1":
		return true
	default:
		q.errs = append(q.errs, fmt.Sprintf("%s=%q: give true or false", k, s))
		return false
	}
}

func (q *query) time(k string) time.Time {
	s := q.str(k)
	if s == "" {
		return time.Time{}
	}
	t, err := parseWhen(s, time.UTC, k == "to")
	if err != nil {
		q.errs = append(q.errs, fmt.Sprintf("%s: %v", k, err))
	}
	return t
}

func (q *query) states(k string) []store.State {
	var out []store.State
	for _, s := range q.v[k] {
		st := store.State(strings.ToUpper(s))
		if !slices.Contains(store.States, st) {
			q.errs = append(q.errs, fmt.Sprintf("%s=%q: not a state; use one of %v", k, s, store.States))
			continue
		}
		out = append(out, st)
	}
	return out
}

func (q *query) err() error {
	if len(q.errs) > 0 {
		return errf(http.StatusBadRequest, "%s", strings.Join(q.errs, "; "))
	}
	return nil
}

// pathID reads a positive numeric path parameter.
func pathID(r *http.Request, name string) (int64, error) {
	s := r.PathValue(name)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, errf(http.StatusBadRequest, "%s %q: give a positive number", name, s)
	}
	return n, nil
}

func (a *admin) pipelineOf(r *http.Request) (*defs.Pipeline, error) {
	name := r.PathValue("pipeline")
	if p := a.g.Pipeline(name); p != nil {
		return p, nil
	}
	var names []string
	for _, p := range a.g.Pipelines() {
		names = append(names, p.Name)
	}
	return nil, errf(http.StatusNotFound, "no pipeline %q%s", name, defs.DidYouMean(name, names))
}

func (a *admin) taskOf(r *http.Request) (*defs.Task, error) {
	p, err := a.pipelineOf(r)
	if err != nil {
		return nil, err
	}
	name := r.PathValue("task")
	if t := p.Task(name); t != nil {
		return t, nil
	}
	return nil, errf(http.StatusNotFound, "pipeline %s has no task %q%s", p.Name, name, defs.DidYouMean(name, p.TaskNames()))
}

// --- operations ---

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
			for _, t := range a.g.Order() {
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
	id, err := pathID(r, "run")
	if err != nil {
		return nil, err
	}
	if _, err := a.st.Run(r.Context(), id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, errf(http.StatusNotFound, "no run %d", id)
		}
		return nil, err
	}
	var b opBody
	if err := decodeBody(r, &b); err != nil {
		return nil, err
	}
	return a.do(r, engine.Op{Kind: engine.OpRerun, Run: id, Reason: b.Reason})
}

func (a *admin) setLimits(r *http.Request) (any, error) {
	var b struct {
		Global *float64           `json:"global"`
		Groups map[string]float64 `json:"groups"`
		Reason string             `json:"reason"`
	}
	if err := decodeBody(r, &b); err != nil {
		return nil, err
	}
	if b.Global == nil && len(b.Groups) == 0 {
		return nil, errf(http.StatusBadRequest, `give {"global": N} or {"groups": {"NAME": N}} (per second; 0 lifts a limit)`)
	}
	v, err := a.do(r, engine.Op{Kind: engine.OpLimits, Global: b.Global, Groups: b.Groups, Reason: b.Reason})
	var ae *apiErr
	if errors.As(err, &ae) && ae.code == http.StatusConflict {
		ae.code = http.StatusBadRequest // a bad rate or group, not a state conflict
	}
	return v, err
}

func (a *admin) cancelBackfill(r *http.Request) (any, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return nil, err
	}
	bs, err := a.st.Backfills(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if len(bs) == 0 {
		return nil, errf(http.StatusNotFound, "no backfill %d", id)
	}
	return a.do(r, engine.Op{Kind: engine.OpCancelBackfill, Backfill: id})
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
	p := a.g.Pipeline(b.Pipeline)
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
	spec, err := engine.PlanBackfill(a.g, engine.BackfillParams{Pipeline: b.Pipeline, From: from, To: to, Select: b.Select,
		MaxActiveRuns: b.MaxActiveRuns, Reverse: b.Reverse, Rerun: b.Rerun, StopOnFailure: b.StopOnFailure})
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

// --- reads ---

func (a *admin) status(r *http.Request) (any, error) {
	if _, err := parseQuery(r); err != nil {
		return nil, err
	}
	out := map[string]any{"role": "standby", "now": a.now().UTC()}
	if a.eng != nil {
		s := a.eng.Stats()
		if s.Leader {
			out["role"] = "primary"
		}
		out["loop"] = s
	}
	if l, err := a.st.GetLease(r.Context(), ""); err == nil {
		out["lease"] = map[string]any{"holder": l.Holder, "epoch": l.Epoch, "expires_at": l.ExpiresAt, "held": a.now().Before(l.ExpiresAt)}
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	out["store"] = a.st.String()
	return out, nil
}

// runView is a run with its instance counts and the state they add up to.
type runView struct {
	store.Run
	State  string              `json:"state"` // waiting, running, success, failed
	Counts map[store.State]int `json:"counts"`
}

func summarize(run store.Run, ins []store.Instance) runView {
	v := runView{Run: run, Counts: map[store.State]int{}}
	for _, in := range ins {
		v.Counts[in.State]++
	}
	c := v.Counts
	switch {
	case c[store.Running]+c[store.Retrying] > 0 || (c[store.Scheduled] > 0 && c[store.Success]+c[store.Failed] > 0):
		v.State = "running"
	case c[store.Failed]+c[store.Killed] > 0:
		v.State = "failed"
	case len(ins) > 0 && c[store.Success] == len(ins):
		v.State = "success"
	default:
		v.State = "waiting"
	}
	return v
}

// latestRun is the pipeline's newest run whose logical time has come (runs
// created ahead, inside the window, are not news), with its instances.
func (a *admin) latestRun(ctx context.Context, pipeline string) (*runView, []store.Instance, error) {
	runs, err := a.st.Runs(ctx, pipeline, 400)
	if err != nil {
		return nil, nil, err
	}
	now := a.now()
	for _, run := range runs {
		if run.LogicalTime.After(now) {
			continue
		}
		ins, err := a.st.Instances(ctx, store.InstanceFilter{RunID: run.ID, Limit: 1 << 20, Ascending: true})
		if err != nil {
			return nil, nil, err
		}
		v := summarize(run, ins)
		return &v, ins, nil
	}
	return nil, nil, nil
}

func (a *admin) pausedScopes(ctx context.Context) (map[string]store.Pause, error) {
	ps, err := a.st.Pauses(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]store.Pause{}
	for _, p := range ps {
		out[string(p.Scope)+"/"+p.Name] = p
	}
	return out, nil
}

func pausedBy(paused map[string]store.Pause, t *defs.Task) *store.Pause {
	for _, k := range []string{"task/" + t.ID(), "group/" + t.Group, "pipeline/" + t.Pipeline} {
		if p, ok := paused[k]; ok {
			return &p
		}
	}
	return nil
}

func (a *admin) pipelines(r *http.Request) (any, error) {
	if _, err := parseQuery(r); err != nil {
		return nil, err
	}
	paused, err := a.pausedScopes(r.Context())
	if err != nil {
		return nil, err
	}
	type item struct {
		Name     string       `json:"name"`
		Group    string       `json:"group"`
		File     string       `json:"file"`
		Timezone string       `json:"timezone"`
		Schedule string       `json:"schedule,omitempty"`
		Tasks    int          `json:"tasks"`
		Paused   *store.Pause `json:"paused,omitempty"`
		Latest   *runView     `json:"latest_run,omitempty"`
	}
	out := []item{}
	for _, p := range a.g.Pipelines() {
		it := item{Name: p.Name, Group: p.Group, File: p.File, Timezone: p.Timezone, Schedule: p.ScheduleSpec, Tasks: len(p.Tasks)}
		if pp, ok := paused["pipeline/"+p.Name]; ok {
			it.Paused = &pp
		}
		if it.Latest, _, err = a.latestRun(r.Context(), p.Name); err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, nil
}

// taskView is a task as the API shows it.
type taskView struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Group     string          `json:"group"`
	Priority  int             `json:"priority"`
	Executor  string          `json:"executor"`
	DependsOn []string        `json:"depends_on"`
	Cron      string          `json:"cron,omitempty"`
	Delay     string          `json:"delay,omitempty"`
	Manual    bool            `json:"manual,omitempty"`
	Timeout   string          `json:"timeout"`
	Retry     string          `json:"retry"`
	Misfire   defs.Misfire    `json:"misfire"`
	Overlap   defs.Overlap    `json:"overlap"`
	State     store.State     `json:"state,omitempty"` // of the latest instance
	Latest    *store.Instance `json:"latest_instance,omitempty"`
	NextFire  *time.Time      `json:"next_fire,omitempty"`
	Paused    *store.Pause    `json:"paused,omitempty"`
}

func viewTask(t *defs.Task) taskView {
	v := taskView{ID: t.ID(), Name: t.Name, Group: t.Group, Priority: t.Priority, Executor: string(t.Executor.Kind), DependsOn: []string{},
		Cron: t.Cron, Manual: t.Manual, Timeout: t.Timeout.String(), Misfire: t.Misfire, Overlap: t.Overlap,
		Retry: fmt.Sprintf("%d × %s", t.Retry.Count, t.Retry.Interval)}
	if t.Delay > 0 {
		v.Delay = t.Delay.String()
	}
	for _, d := range t.DependsOn {
		v.DependsOn = append(v.DependsOn, d.String())
	}
	return v
}

func (a *admin) pipeline(r *http.Request) (any, error) {
	p, err := a.pipelineOf(r)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	paused, err := a.pausedScopes(ctx)
	if err != nil {
		return nil, err
	}
	latest, _, err := a.latestRun(ctx, p.Name)
	if err != nil {
		return nil, err
	}
	var tasks []taskView
	for _, t := range p.Tasks {
		v := viewTask(t)
		v.Paused = pausedBy(paused, t)
		ins, err := a.st.Instances(ctx, store.InstanceFilter{TaskID: t.ID(), Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(ins) == 1 {
			v.Latest, v.State = &ins[0], ins[0].State
		}
		if sum, err := a.st.TaskSummary(ctx, t.ID()); err == nil && !sum.NextFireAt.IsZero() {
			v.NextFire = &sum.NextFireAt
		}
		tasks = append(tasks, v)
	}
	type edge struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	edges := []edge{}
	for _, t := range p.Tasks {
		for _, d := range t.DependsOn {
			edges = append(edges, edge{From: d.String(), To: t.Name})
		}
	}
	var layers [][]string
	for _, l := range a.g.Layers(p.Name) {
		var names []string
		for _, t := range l {
			names = append(names, t.Name)
		}
		layers = append(layers, names)
	}
	return map[string]any{"name": p.Name, "group": p.Group, "file": p.File, "timezone": p.Timezone, "schedule": p.ScheduleSpec,
		"misfire": p.Misfire, "overlap": p.Overlap, "paused": pausedByPipeline(paused, p.Name), "tasks": tasks, "edges": edges,
		"layers": layers, "latest_run": latest}, nil
}

func pausedByPipeline(paused map[string]store.Pause, name string) *store.Pause {
	if p, ok := paused["pipeline/"+name]; ok {
		return &p
	}
	return nil
}

func (a *admin) runs(r *http.Request) (any, error) {
	p, err := a.pipelineOf(r)
	if err != nil {
		return nil, err
	}
	q, err := parseQuery(r, "state", "from", "to", "limit")
	if err != nil {
		return nil, err
	}
	limit := q.int("limit", 50, 1, 1000)
	from, to := q.time("from"), q.time("to")
	state := q.str("state")
	if state != "" && !slices.Contains([]string{"waiting", "running", "success", "failed"}, state) {
		q.errs = append(q.errs, fmt.Sprintf("state=%q: use waiting, running, success or failed", state))
	}
	if err := q.err(); err != nil {
		return nil, err
	}
	runs, err := a.st.Runs(r.Context(), p.Name, 5000)
	if err != nil {
		return nil, err
	}
	out := []runView{}
	for _, run := range runs {
		if (!from.IsZero() && run.LogicalTime.Before(from)) || (!to.IsZero() && run.LogicalTime.After(to)) {
			continue
		}
		ins, err := a.st.Instances(r.Context(), store.InstanceFilter{RunID: run.ID, Limit: 1 << 20})
		if err != nil {
			return nil, err
		}
		v := summarize(run, ins)
		if state != "" && v.State != state {
			continue
		}
		if out = append(out, v); len(out) >= int(limit) {
			break
		}
	}
	return out, nil
}

func (a *admin) run(r *http.Request) (any, error) {
	id, err := pathID(r, "run")
	if err != nil {
		return nil, err
	}
	run, err := a.st.Run(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errf(http.StatusNotFound, "no run %d", id)
	}
	if err != nil {
		return nil, err
	}
	ins, err := a.st.Instances(r.Context(), store.InstanceFilter{RunID: id, Limit: 1 << 20, Ascending: true})
	if err != nil {
		return nil, err
	}
	return map[string]any{"run": summarize(run, ins), "instances": ins}, nil
}

func (a *admin) task(r *http.Request) (any, error) {
	t, err := a.taskOf(r)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	v := viewTask(t)
	paused, err := a.pausedScopes(ctx)
	if err != nil {
		return nil, err
	}
	v.Paused = pausedBy(paused, t)
	sum, err := a.st.TaskSummary(ctx, t.ID())
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if sum.Last != nil {
		v.Latest, v.State = sum.Last, sum.Last.State
	}
	out := map[string]any{"task": v, "summary": sum, "next_fires": []time.Time{}, "last_fires": []engine.Fire{}}
	if a.eng != nil {
		x, err := a.eng.Explain(ctx, t.ID())
		if err != nil {
			return nil, err
		}
		out["next_fires"], out["last_fires"] = x.NextFires, x.LastFires
	}
	return out, nil
}

func (a *admin) explain(r *http.Request) (any, error) {
	t, err := a.taskOf(r)
	if err != nil {
		return nil, err
	}
	if a.eng == nil {
		return nil, errf(http.StatusServiceUnavailable, "no scheduler runs in this process")
	}
	return a.eng.Explain(r.Context(), t.ID())
}

func (a *admin) instances(r *http.Request) (any, error) {
	q, err := parseQuery(r, "pipeline", "task", "run", "state", "from", "to", "before", "limit")
	if err != nil {
		return nil, err
	}
	f := store.InstanceFilter{Pipeline: q.str("pipeline"), TaskID: q.str("task"), RunID: q.int("run", 0, 1, 1<<62), States: q.states("state"),
		LogicalFrom: q.time("from"), LogicalTo: q.time("to"), BeforeID: q.int("before", 0, 1, 1<<62), Limit: int(q.int("limit", 100, 1, 1000))}
	if f.Pipeline != "" && a.g.Pipeline(f.Pipeline) == nil {
		q.errs = append(q.errs, fmt.Sprintf("pipeline=%q: no such pipeline", f.Pipeline))
	}
	if f.TaskID != "" && a.g.Task(f.TaskID) == nil {
		q.errs = append(q.errs, fmt.Sprintf("task=%q: no such task (write pipeline.task)", f.TaskID))
	}
	if err := q.err(); err != nil {
		return nil, err
	}
	ins, err := a.st.Instances(r.Context(), f)
	if ins == nil {
		ins = []store.Instance{}
	}
	return ins, err
}

// logFilter parses the paging and filters of history and actions.
func (a *admin) logFilter(r *http.Request, extra ...string) (store.LogFilter, *query, error) {
	q, err := parseQuery(r, append([]string{"task", "instance", "after", "before", "newest", "limit"}, extra...)...)
	if err != nil {
		return store.LogFilter{}, nil, err
	}
	f := store.LogFilter{TaskID: q.str("task"), InstanceID: q.int("instance", 0, 1, 1<<62), AfterID: q.int("after", 0, 1, 1<<62),
		BeforeID: q.int("before", 0, 1, 1<<62), Newest: q.bool("newest"), Limit: int(q.int("limit", 100, 1, 1000))}
	if f.TaskID != "" && a.g.Task(f.TaskID) == nil {
		q.errs = append(q.errs, fmt.Sprintf("task=%q: no such task (write pipeline.task)", f.TaskID))
	}
	return f, q, nil
}

func (a *admin) history(r *http.Request) (any, error) {
	f, q, err := a.logFilter(r)
	if err != nil {
		return nil, err
	}
	if err := q.err(); err != nil {
		return nil, err
	}
	h, err := a.st.History(r.Context(), f)
	if h == nil {
		h = []store.HistoryRow{}
	}
	return h, err
}

func (a *admin) actions(r *http.Request) (any, error) {
	f, q, err := a.logFilter(r, "pipeline", "action")
	if err != nil {
		return nil, err
	}
	f.Pipeline, f.Action = q.str("pipeline"), q.str("action")
	if err := q.err(); err != nil {
		return nil, err
	}
	acts, err := a.st.Actions(r.Context(), f)
	if acts == nil {
		acts = []store.Action{}
	}
	return acts, err
}

func (a *admin) executors(r *http.Request) (any, error) {
	if _, err := parseQuery(r); err != nil {
		return nil, err
	}
	exs, err := a.st.Executors(r.Context(), "")
	if err != nil {
		return nil, err
	}
	type view struct {
		store.Executor
		Live     bool   `json:"live"`
		Excluded string `json:"excluded,omitempty"` // why it gets no work
	}
	out := []view{}
	now := a.now()
	for _, x := range exs {
		v := view{Executor: x, Live: true}
		if silent := now.Sub(x.LastHeartbeat); silent > engine.ExecutorLiveness {
			v.Live = false
			v.Excluded = fmt.Sprintf("no heartbeat for %s (more than %s): it gets no new work until it sends one", silent.Round(time.Second), engine.ExecutorLiveness)
		}
		out = append(out, v)
	}
	return out, nil
}

func (a *admin) limits(r *http.Request) (any, error) {
	if _, err := parseQuery(r); err != nil {
		return nil, err
	}
	if a.eng == nil || !a.eng.Stats().Leader {
		set, err := a.st.Settings(r.Context())
		if err != nil {
			return nil, err
		}
		var l engine.Limits
		if raw := set["dispatch_limits"]; raw != "" {
			_ = json.Unmarshal([]byte(raw), &l)
		}
		return map[string]any{"limits": l, "source": "store (this process is a standby: the primary may run with its flags' limits if none were set at run time)"}, nil
	}
	return map[string]any{"limits": a.eng.Stats().Limits, "source": "primary"}, nil
}

// backfillView is a backfill record with its spec decoded and its progress.
type backfillView struct {
	store.Backfill
	Spec      json.RawMessage `json:"spec"`
	Instances struct {
		Ended int `json:"ended"`
		Total int `json:"total"`
	} `json:"instances"`
}

func (a *admin) viewBackfill(ctx context.Context, b store.Backfill) (backfillView, error) {
	v := backfillView{Backfill: b, Spec: json.RawMessage(b.Spec)}
	var err error
	v.Instances.Ended, v.Instances.Total, err = a.st.BackfillProgress(ctx, b.ID)
	return v, err
}

func (a *admin) backfills(r *http.Request) (any, error) {
	q, err := parseQuery(r, "limit")
	if err != nil {
		return nil, err
	}
	limit := q.int("limit", 50, 1, 1000)
	if err := q.err(); err != nil {
		return nil, err
	}
	bs, err := a.st.Backfills(r.Context(), 0) // newest first
	if err != nil {
		return nil, err
	}
	out := []backfillView{}
	for _, b := range bs[:min(len(bs), int(limit))] {
		v, err := a.viewBackfill(r.Context(), b)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (a *admin) backfill(r *http.Request) (any, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return nil, err
	}
	bs, err := a.st.Backfills(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if len(bs) == 0 {
		return nil, errf(http.StatusNotFound, "no backfill %d", id)
	}
	return a.viewBackfill(r.Context(), bs[0])
}

// checkListen refuses a non-loopback listen address without a token,
// unless insecure says the operator means it.
func checkListen(addr, token string, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageErr("--listen %q: give host:port, such as 127.0.0.1:8080", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	if token == "" && !insecure {
		return usageErr("--listen %s is not a loopback address: set AX_ADMIN_TOKEN so that writes need a bearer token, or pass --insecure to serve the API to the network without one", addr)
	}
	return nil
}

// apiDoc renders the route table as the README's API section.
func apiDoc() string {
	var b strings.Builder
	b.WriteString("| method | path | needs the token | what it does |\n| --- | --- | --- | --- |\n")
	for _, rt := range adminRoutes() {
		tok := "when reads are not open"
		if rt.write {
			tok = "yes (refused on a standby)"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", rt.method, rt.path, tok, rt.doc)
	}
	b.WriteString("| GET | `/metrics` | when reads are not open | Prometheus metrics |\n")
	b.WriteString("| GET | `/readyz` | no | 200 when this process serves: primary, or standby with a reachable store |\n")
	b.WriteString("| GET | `/healthz` | no | 200 while the process runs |\n")
	b.WriteString("| POST | `/api/v1/executors/register`, `/api/v1/executors/heartbeat`, `/api/v1/results` | no | the executor protocol (below) |\n")
	return b.String()
}
