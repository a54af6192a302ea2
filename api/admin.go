package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ax-sched/ax/access"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/reload"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// admin serves the admin API under /api/v1, the web console, /metrics,
// /healthz and /readyz. Reads come from the store, so a standby answers
// them; writes go through the primary's engine loop, and a standby refuses
// them with a pointer to the primary.
type admin struct {
	st        *store.Store
	g         *dag.Graph
	eng       *engine.Engine  // nil: no scheduler in this process (reads only)
	reload    *reload.Watcher // nil: the pipelines are never reloaded
	gather    prometheus.Gatherer
	auth      authConfig
	openReads bool // reads need no sign-in
	now       func() time.Time
	opWait    time.Duration // how long a write waits for the engine loop
	retain    time.Duration // the server's --retain, for dry runs (0: keeps everything)
	// pruneBudget bounds an operator's pruning pass (zero: pruneBudget).
	pruneBudget time.Duration
	pools       *pools // executors' pool figures, from their heartbeats here
}

// graph returns the pipelines in force: the engine's, which a reload
// replaces, or the ones given.
func (a *admin) graph() *dag.Graph {
	if a.eng != nil {
		return a.eng.Graph()
	}
	return a.g
}

// checkTaskFilter refuses a task= filter of a read that names no task,
// in the running set or among the stored definitions: a task removed or
// renamed by a reload keeps its instances, history and logs until
// retention prunes them, and they stay readable under its name.
func (a *admin) checkTaskFilter(ctx context.Context, q *query, id string) error {
	if id == "" || a.graph().Task(id) != nil {
		return nil
	}
	ts, err := a.st.Tasks(ctx, store.TaskFilter{ID: id, IncludeRemoved: true})
	if err != nil {
		return err
	}
	if len(ts) == 0 {
		q.errs = append(q.errs, fmt.Sprintf("task=%q: no such task%s", id, a.suggestTask(id)))
	}
	return nil
}

// suggestTask is what to tell of an unknown task id: the tasks of its
// pipeline it is close to, or how to write one.
func (a *admin) suggestTask(id string) string {
	p, _, ok := strings.Cut(id, ".")
	pl := a.graph().Pipeline(p)
	if !ok || pl == nil {
		return " (write pipeline.task)"
	}
	ids := make([]string, len(pl.Tasks))
	for i, t := range pl.Tasks {
		ids[i] = t.ID()
	}
	return defs.DidYouMean(id, ids)
}

// checkPipelineFilter is checkTaskFilter for a pipeline= filter.
func (a *admin) checkPipelineFilter(ctx context.Context, q *query, name string) error {
	if name == "" || a.graph().Pipeline(name) != nil {
		return nil
	}
	_, err := a.st.PipelineDefinition(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		var names []string
		for _, p := range a.graph().Pipelines() {
			names = append(names, p.Name)
		}
		q.errs = append(q.errs, fmt.Sprintf("pipeline=%q: no such pipeline%s", name, defs.DidYouMean(name, names)))
		return nil
	}
	return err
}

// maxBody bounds every request body the admin API reads.
const maxBody = 64 << 10

// route is one endpoint. The table of routes drives the mux, access
// control and the API reference docs/api.md (see TestAPIDocMatchesRoutes).
type route struct {
	method, path string
	write        bool // changes state: refused on a standby
	// role is the least role that may call the route (access.None: anyone,
	// signed in or not); a write also checks the user's scope.
	role access.Role
	doc  string
	h    func(*admin, *http.Request) (any, error)
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
		{"GET", "/api/v1/session", false, access.None, "who is signed in: `user`, `role`, `groups` and `pipelines` (the scope of their actions), `how` (token, session, proxy), `expires_at`; `needed` (false: the server asks nobody to sign in); 401 naming why a session cookie or token sent is refused (expired, signed by a server on another store, signed out, user removed)", (*admin).session},
		{"POST", "/api/v1/session", false, access.None, "sign in: `{\"name\", \"token\"}` (a users file entry, or `admin` with AX_ADMIN_TOKEN); sets the session cookie `ax_session` (HttpOnly, SameSite=Strict, expiring); 401 for a wrong name or token, nothing set", (*admin).signIn},
		{"DELETE", "/api/v1/session", false, access.None, "sign out: the session of the cookie sent is ended (refused from now on) and the cookie cleared", (*admin).signOut},
		{"GET", "/api/v1/status", false, access.Viewer, "the lease holder, this process's role, loop counters and limits", (*admin).status},
		{"GET", "/api/v1/pipelines", false, access.Viewer, "pipelines with the run that happened last (its instance states) and `recent_failure`: the newest failed run of the last five, with the failures that ended it; `name` (one pipeline), `summary` (true: without their runs, in constant time)", (*admin).pipelines},
		{"GET", "/api/v1/pipelines/{pipeline}", false, access.Viewer, "one pipeline with a page of its tasks (file order), each with its latest instance, the edges into them, their layers, the latest run, `task_count` and `next_page`; `task` (names starting with it), `page` (the `next_page` of the previous answer), `limit` (200 by default, at most 1000), `summary` (true: the pipeline without tasks, edges, layers or latest run, in constant time)", (*admin).pipeline},
		{"GET", "/api/v1/pipelines/{pipeline}/runs", false, access.Viewer, "runs, newest logical time first, each with what holds it when it is not over (`waiting`: judged now, from live state) and, when it ended failed, the `failures` that ended it with their errors; `state` (waiting, running, awaiting approval, success, failed), `from`, `to` (logical time), `before` (the id of the last run of the previous page: keyset paging), `recent` (true: the first page as `ax status` shows it, by when runs happened, leaving out runs created ahead that nothing happened in yet), `limit`", (*admin).runs},
		{"GET", "/api/v1/runs/{run}", false, access.Viewer, "one run with a page of its instances (by task) and `next_page`; `state` (repeatable), `page` (the `next_page` of the previous answer), `limit` (200 by default, at most 1000)", (*admin).run},
		{"GET", "/api/v1/pipelines/{pipeline}/tasks/{task}", false, access.Viewer, "one task: definition, `runs` (what its executor runs as the file says it: `command` with its templates, `url` or `function`), `last_attempt` (the record of its attempt that ended last: executor, `argv` as rendered for it, status), summary, latest instance, next ten fires, last ten dispatches (due vs actual)", (*admin).task},
		{"GET", "/api/v1/pipelines/{pipeline}/tasks/{task}/explain", false, access.Viewer, "why the task is not running, or ran late (R31a); the findings give times in the pipeline's zone, `utc` (true) in UTC", (*admin).explain},
		{"POST", "/api/v1/pipelines/{pipeline}/tasks/{task}/pause", true, access.Operator, "pause the task; body `{\"reason\"}`", taskOp(func(t string) engine.Request { return engine.Pause{Scope: store.ScopeTask, Target: t} })},
		{"POST", "/api/v1/pipelines/{pipeline}/tasks/{task}/resume", true, access.Operator, "resume the task (misfire policy for missed fires)", taskOp(func(t string) engine.Request { return engine.Resume{Scope: store.ScopeTask, Target: t} })},
		{"POST", "/api/v1/pipelines/{pipeline}/tasks/{task}/trigger", true, access.Operator, "run now, in a manual run of its own (for a manual task: approve its oldest waiting instance, or run it when none waits; one already approved and waiting for its upstreams is left as it is); body `{\"downstream\": true, \"at\": \"2026-03-01T02:00:00\", \"params\": {\"k\": \"v\"}, \"hold\": true, \"in\": \"10m\", \"reason\"}`, all optional (`at`: logical time in the pipeline's zone, a time to come delays the run until then; `in`: a delay, the run's logical time that long from now, at most 366 days, not with `at`); `params` are strings, or numbers and booleans taken as written (`{\"n\": 5, \"full\": true}`), checked against the names the run's tasks declare and the pipeline's typed params (400 naming the param); a disabled pipeline or task cron: 409 with the reason; under a pause 409, nothing created, unless `hold` (created held PAUSED until the resume)", (*admin).taskTrigger},
		{"POST", "/api/v1/pipelines/{pipeline}/tasks/{task}/mark", true, access.Operator, "set the outcome of a waiting, failed or killed instance: `{\"state\": \"success\"|\"failed\", \"run\": RUN | \"at\": TIME, \"reason\"}`; success releases its downstream, failed fails it", (*admin).taskMark},
		{"POST", "/api/v1/pipelines/{pipeline}/tasks/{task}/kill", true, access.Operator, "kill the task's running instances", taskOp(func(t string) engine.Request { return engine.Kill{Target: t} })},
		{"POST", "/api/v1/pipelines/{pipeline}/tasks/{task}/rerun", true, access.Operator, "rerun the task's latest failed or killed instance; under a pause 409, nothing changed, unless `{\"hold\": true}` (held PAUSED until the resume)", taskOp(func(t string) engine.Request { return engine.Rerun{Target: t} })},
		{"POST", "/api/v1/pipelines/{pipeline}/trigger", true, access.Operator, "run the whole pipeline now: `{\"at\", \"in\", \"params\", \"hold\", \"reason\"}`, all optional, as for a task's trigger; under a pause of any of its tasks 409, nothing created, unless `hold`", (*admin).pipelineTrigger},
		{"POST", "/api/v1/pipelines/{pipeline}/pause", true, access.Operator, "pause every task of the pipeline", scopeOp(store.ScopePipeline, pauseOf)},
		{"POST", "/api/v1/pipelines/{pipeline}/resume", true, access.Operator, "resume the pipeline", scopeOp(store.ScopePipeline, resumeOf)},
		{"POST", "/api/v1/groups/{group}/pause", true, access.Operator, "pause every task of the group, in every pipeline", scopeOp(store.ScopeGroup, pauseOf)},
		{"POST", "/api/v1/groups/{group}/resume", true, access.Operator, "resume the group", scopeOp(store.ScopeGroup, resumeOf)},
		{"GET", "/api/v1/instances", false, access.Viewer, "instances, newest first; `pipeline`, `task`, `run`, `state` (repeatable), `from`, `to`, `before` (id), `ran` (true: only instances dispatched at least once), `order` (`id`, the default, or `started`: the task's latest attempt first, with `task` and without `before`), `limit`", (*admin).instances},
		{"GET", "/api/v1/instances/{id}/logs", false, access.Viewer, "the output of one attempt (the latest by default) with its header (executor, the command as rendered for it (`argv`), start, end, exit status); `attempt`, `task` (must be the instance's), `after` (chunk seq), `follow` (true: NDJSON stream until the attempt ends)", (*admin).logs},
		{"POST", "/api/v1/instances/{id}/kill", true, access.Operator, "kill one running instance", instanceOp(func(id int64) engine.Request { return engine.Kill{Instance: id} })},
		{"POST", "/api/v1/instances/{id}/rerun", true, access.Operator, "rerun one instance (failed, killed or succeeded); under a pause 409 unless `{\"hold\": true}`", instanceOp(func(id int64) engine.Request { return engine.Rerun{Instance: id} })},
		{"POST", "/api/v1/instances/{id}/mark", true, access.Operator, "set the outcome of one waiting, failed or killed instance: `{\"state\": \"success\"|\"failed\", \"reason\"}`", (*admin).instanceMark},
		{"POST", "/api/v1/runs/{run}/rerun", true, access.Operator, "rerun a run's failed and killed instances (those that never ran wait for their upstreams again)", (*admin).runRerun},
		{"POST", "/api/v1/runs/{run}/cancel", true, access.Operator, "end every unfinished instance of a run: running ones are killed, the others fail as cancelled", (*admin).runCancel},
		{"GET", "/api/v1/history", false, access.Viewer, "state transitions; `task`, `instance`, `after`/`before` (id), `newest`, `limit`", (*admin).history},
		{"GET", "/api/v1/actions", false, access.Viewer, "the action log; `task`, `pipeline`, `action` (its kind: pause, trigger, dispatch…), `actor` (exactly, such as operator:api), `by` (`operator`: every actor's but the scheduler's; `scheduler`: the scheduler's own rows), `after`/`before` (id), `newest`, `limit`; a malformed or unknown value is a 400 naming the parameter", (*admin).actions},
		{"GET", "/api/v1/prune", false, access.Admin, "what retention would delete now (dry run): runs, instances, history, actions, output; `retain` (such as 30d; default the server's --retain)", (*admin).pruneDry},
		{"POST", "/api/v1/prune", true, access.Admin, "run a retention pass now (the server's --retain)", (*admin).pruneNow},
		{"GET", "/api/v1/executors", false, access.Admin, "registered executors: address, tasks, last heartbeat, excluded and why", (*admin).executors},
		{"GET", "/api/v1/limits", false, access.Viewer, "dispatch limits in force (per second; 0 is unlimited)", (*admin).limits},
		{"PUT", "/api/v1/limits", true, access.Admin, "change limits at run time: dispatch rates `{\"global\": 50, \"groups\": {\"etl\": 10}}` (per second, 0 to 1000000) and concurrency caps `{\"max_running\": 32, \"group_max_running\": {\"etl\": 10}}` (0 to 1000000); 0 lifts one; stored, so they survive restarts", (*admin).setLimits},
		{"GET", "/api/v1/reload", false, access.Viewer, "the last reload of the pipeline files (when, why, what changed, or the errors that kept the running set) the fingerprints and schedules of the pipelines in force, for `ax diff`; `task` (repeatable, up to 100): the definitions in force of those tasks, for its field-level changes; `users_refused` when the users file changed but was not loaded", (*admin).reloadStatus},
		{"GET", "/api/v1/backfills", false, access.Viewer, "backfills, newest first, each with its spec (range `from`/`to`, `select` and the tasks it selects), state, progress (`instances.awaiting`: gates nobody approved) and its first 50 `runs` (id, logical time); `before` (id: the next page), `limit`", (*admin).backfills},
		{"POST", "/api/v1/backfills", true, access.Operator, "start a backfill: `{\"pipeline\", \"from\", \"to\", \"select\", \"max_active_runs\", \"reverse\", \"rerun\", \"stop_on_failure\", \"approve_manual\", \"wait_cross\", \"hold\", \"dry_run\", \"params\"}` (`params`: given to every run, checked as a trigger's); `approve_manual` needs the role of `…/approve` (403 otherwise, nothing created); under a pause of a selected task 409 unless `hold`", (*admin).startBackfill},
		{"GET", "/api/v1/backfills/{id}", false, access.Viewer, "one backfill with its progress", (*admin).backfill},
		{"POST", "/api/v1/backfills/{id}/cancel", true, access.Operator, "stop a backfill from starting more runs (those in flight finish)", (*admin).cancelBackfill},
		{"POST", "/api/v1/backfills/{id}/resume", true, access.Operator, "continue a cancelled, failed or interrupted backfill without rerunning what it ran", (*admin).resumeBackfill},
		{"POST", "/api/v1/backfills/{id}/approve", true, access.Admin, "approve the manual gates of every run of a backfill in one action: those its runs wait at and those of the runs it has yet to start; 404 for an unknown backfill, 409 for a finished one, one that selects no gate, or under a pause of a gate unless `{\"hold\": true}`", (*admin).approveBackfill},
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
	mux.Handle("GET /metrics", a.guard(route{method: "GET", path: "/metrics", role: access.Viewer}, metrics.ServeHTTP))
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		// A path served under another method is a 405, with the methods it takes.
		var allow []string
		for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "/api/" && pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeJSON(w, http.StatusMethodNotAllowed, ErrorBody{Error: fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, strings.Join(allow, " or "))})
			return
		}
		writeJSON(w, http.StatusNotFound, ErrorBody{Error: fmt.Sprintf("no endpoint %s %s: docs/api.md lists the API", r.Method, r.URL.Path)})
	})
}

// guard lets through the requests the caller of may make: see authorize.
func (a *admin) guard(rt route, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in := r
		r, err := a.authorize(rt, r)
		if err != nil {
			if ae, ok := err.(*apiErr); ok && ae.code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="ax"`)
				if _, err := in.Cookie(access.CookieName); err == nil { // a refused session is forgotten
					http.SetCookie(w, clearedCookie(in))
				}
			}
			writeErr(w, err)
			return
		}
		next(w, r)
	}
}

func (a *admin) serve(rt route) http.HandlerFunc {
	return a.guard(rt, func(w http.ResponseWriter, r *http.Request) {
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
		if stream, ok := v.(streamer); ok {
			stream(w)
			return
		}
		code := http.StatusOK
		if c, ok := v.(withCookie); ok {
			http.SetCookie(w, c.c)
			v = c.v
		}
		if e, ok := v.(error); ok { // a refusal that sets a cookie
			writeErr(w, e)
			return
		}
		if c, ok := v.(created); ok {
			code, v = http.StatusCreated, c.v
		}
		if c, ok := v.(accepted); ok {
			code, v = http.StatusAccepted, c.v
		}
		writeJSON(w, code, v)
	})
}

// created marks a handler's answer as 201 Created.
type created struct{ v any }

// accepted marks a handler's answer as 202 Accepted: the request is being
// applied, and was not finished when the answer was sent.
type accepted struct{ v any }

// writeJSON answers v as JSON with code. What cannot be encoded (a time
// past year 9999 in the store) is a 500 naming why, not a 200 with an
// empty body that every client reads as "unexpected end of JSON input".
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.MarshalIndent(ErrorBody{Error: fmt.Sprintf("the answer cannot be written as JSON (%v): a time outside years 0-9999 is in the store (refused on input now); narrow the read, e.g. by run or time, to leave it out", err)}, "", "  ")
	}
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func writeErr(w http.ResponseWriter, err error) {
	var ae *apiErr
	if !errors.As(err, &ae) {
		ae = &apiErr{code: http.StatusServiceUnavailable, msg: err.Error()}
		if errors.Is(err, store.ErrNotFound) {
			ae.code = http.StatusNotFound
		}
	}
	writeJSON(w, ae.code, ErrorBody{Error: ae.msg, Primary: ae.primary})
}

// PrimarySetting is where the primary records its API's URL, so that a
// standby can point writers to it.
const PrimarySetting = "primary_api"

// primary refuses a write unless this process is the primary scheduler.
func (a *admin) primary(ctx context.Context) error {
	if a.eng != nil && a.eng.Stats().Leader {
		return nil
	}
	msg := "this server is a standby and takes no writes"
	e := &apiErr{code: http.StatusServiceUnavailable}
	if l, err := a.st.GetLease(ctx, ""); err == nil && a.now().Before(l.ExpiresAt) {
		msg += "; the primary is " + l.Holder
		if set, err := a.st.Settings(ctx); err == nil && set[PrimarySetting] != "" {
			e.primary = set[PrimarySetting]
			msg += " at " + e.primary
		}
	} else {
		msg += "; no primary holds the lease right now: retry shortly"
	}
	e.msg = msg
	return e
}

// readyz is 200 when this process can serve: as the primary, or as a
// standby whose store answers reads; and, with a scheduler, when its last
// write to the store (a renewal or request of the lease, a turn of its
// loop) succeeded: 503 says why it cannot write, until it writes again.
func (a *admin) readyz(w http.ResponseWriter, r *http.Request) {
	role := "standby"
	if a.eng != nil && a.eng.Stats().Leader {
		role = "primary"
	}
	if a.eng != nil {
		if err := a.eng.WriteFault(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, Ready{Role: role, Error: err.Error()})
			return
		}
	}
	if err := a.st.Check(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, Ready{Role: role, Error: err.Error()})
		return
	}
	if err := a.st.Ping(r.Context()); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, Ready{Role: role, Error: "store: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, Ready{Ready: true, Role: role})
}

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
			return errf(http.StatusRequestEntityTooLarge, "request body over %d bytes: a reason holds at most %d characters, a param value %d",
				maxBody, axtype.MaxReasonLen, axtype.MaxParamLen)
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
	t, err := ParseWhen(s, time.UTC, k == "to")
	if err != nil {
		q.errs = append(q.errs, fmt.Sprintf("%s: %v", k, err))
	}
	return t
}

func (q *query) states(k string) []axtype.State {
	var out []axtype.State
	for _, s := range q.v[k] {
		st := axtype.State(strings.ToUpper(s))
		if !slices.Contains(axtype.States, st) {
			q.errs = append(q.errs, fmt.Sprintf("%s=%q: not a state; use one of %v", k, s, axtype.States))
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
	if p := a.graph().Pipeline(name); p != nil {
		return p, nil
	}
	var names []string
	for _, p := range a.graph().Pipelines() {
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

// apiDoc renders the route table as the API reference, docs/api.md.
func apiDoc() string {
	var b strings.Builder
	b.WriteString("| method | path | least role | what it does |\n| --- | --- | --- | --- |\n")
	for _, rt := range adminRoutes() {
		role := rt.role.String()
		switch {
		case rt.role == access.None:
			role = "none"
		case rt.role == access.Viewer:
			role = "viewer (none when reads are open)"
		case rt.write:
			role += ", in scope (refused on a standby)"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", rt.method, rt.path, role, rt.doc)
	}
	b.WriteString("| GET | `/metrics` | viewer (none when reads are open) | Prometheus metrics |\n")
	b.WriteString("| GET | `/readyz` | no | 200 when this process serves: primary, or standby with a reachable store; 503 with the reason while its store cannot be read or written |\n")
	b.WriteString("| GET | `/healthz` | no | 200 while the process runs |\n")
	b.WriteString("| POST | `/api/v1/executors/register`, `/api/v1/executors/heartbeat`, `/api/v1/results` | the executor credential, never the admin token | the executor protocol ([protocol.md](protocol.md)) |\n")
	return b.String()
}
