package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/httpguard"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// executorAPI serves the endpoints executors call: registration and
// heartbeats. Registration is idempotent on (task, address).
type executorAPI struct {
	st       *store.Store
	g        *dag.Graph
	graphOf  func() *dag.Graph        // the pipelines in force, when they can be reloaded (else g)
	deliver  func(runner.Report) bool // to the attempt waiting for it in this process
	self     string                   // this server's URL, recorded with the results it receives
	token    string                   // the executor credential: required on every endpoint here (empty: none, in tests)
	refusals refusalLog               // how many refusals each client address had recorded lately
	repeats  prometheus.Counter       // results delivered again for a ticket the inbox holds (nil: not counted)
	// whoIs asks the executor at an address for its boot id (its /status).
	whoIs func(ctx context.Context, address string) (boot string, err error)
	clock func() time.Time // nil: time.Now
	// secrets resolve the secrets of a result's task, masked in the
	// report before it is stored (nil: not masked here).
	secrets runner.Secrets
	pools   *pools // the pool figures of each executor's last heartbeat here
}

// masked returns the report of an attempt of task, as data, with the
// values of the task's secrets masked: an executor that did not mask them
// (one not built on the SDK) leaves none in the inbox. A secret that cannot
// be resolved now cannot have been given to the attempt unless it was
// removed since: it is not masked.
func (a *executorAPI) masked(ctx context.Context, task string, rep runner.Report, data []byte) []byte {
	if a.secrets == nil || a.graph() == nil {
		return data
	}
	t := a.graph().Task(task)
	if t == nil || len(t.Secrets()) == 0 {
		return data
	}
	var values []string
	for _, ref := range t.Secrets() {
		if v, err := a.secrets.Resolve(ctx, ref); err == nil {
			values = append(values, v)
		}
	}
	out, err := json.Marshal(runner.MaskReport(rep, values...))
	if err != nil {
		return data
	}
	return out
}

func (a *executorAPI) now() time.Time {
	if a.clock != nil {
		return a.clock()
	}
	return time.Now()
}

// refusalsPerMinute bounds the refusals (and results delivered again)
// recorded in the action log for one client address a minute: refused
// results and heartbeats are recorded (their reasons matter to an
// operator), but a client sending junk must not fill the log; past the
// bound it is still refused, with the reason, and not recorded.
const refusalsPerMinute = 20

// refusalLog counts the refusals recorded per client address, a minute at
// a time. Safe for concurrent use.
type refusalLog struct {
	mu     sync.Mutex
	minute int64
	counts map[string]int
}

// newRepeatsCounter counts results delivered again for a ticket the inbox
// holds (ax_results_repeated_total).
func newRepeatsCounter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "ax_results_repeated_total",
		Help: "Results delivered again for a ticket received already: answered 200 and ignored; the action log records at most 20 a minute per client address."})
}

// take reports whether a refusal of the client at remote (host:port) may
// be recorded now, and counts it.
func (l *refusalLog) take(remote string, now time.Time) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := now.Unix() / 60; m != l.minute || l.counts == nil {
		l.minute, l.counts = m, map[string]int{}
	}
	l.counts[host]++
	return l.counts[host] <= refusalsPerMinute
}

// recordRefusal appends act to the action log unless its client is past
// its bound; it returns what to add to the answer's reason.
func (a *executorAPI) recordRefusal(r *http.Request, act store.Action) string {
	if !a.refusals.take(r.RemoteAddr, act.At) {
		return fmt.Sprintf(" (not recorded: more than %d refusals a minute from this address)", refusalsPerMinute)
	}
	if err := a.st.AppendAction(r.Context(), act); err != nil {
		return " (not recorded: " + err.Error() + ")"
	}
	return ""
}

func (a *executorAPI) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/executors/register", a.guard(a.register))
	mux.HandleFunc("POST /api/v1/executors/heartbeat", a.guard(a.heartbeat))
	mux.HandleFunc("POST "+ResultsPath, a.guard(a.result))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
}

// guard requires the executor credential, from the headers, before the
// handler reads the body: without it, anyone who reaches the API could
// register an executor for a task and receive its dispatches, or hold
// connections with bodies that never end.
func (a *executorAPI) guard(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !runner.BearerOK(r, a.token) {
			apiError(w, http.StatusUnauthorized, "missing or wrong bearer token: executors send AX_EXECUTOR_TOKEN (the SDK's Config.Token)")
			return
		}
		next(w, r)
	}
}

// apiError writes {"error": "…"} with code, the error form of every endpoint.
func apiError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, ErrorBody{Error: fmt.Sprintf(format, args...)})
}

// graph returns the pipelines in force.
func (a *executorAPI) graph() *dag.Graph {
	if a.graphOf != nil {
		return a.graphOf()
	}
	return a.g
}

// taskIDs maps the names an executor serves to the http tasks of the graph:
// `pipeline.task`, or a bare task name, which matches that task in every pipeline.
func (a *executorAPI) taskIDs(names []string) ([]string, error) {
	var ids, unknown []string
	for _, n := range names {
		found := false
		for _, t := range a.graph().Order() {
			if t.Executor.Kind == defs.ExecHTTP && (t.ID() == n || t.Name == n) {
				ids = append(ids, t.ID())
				found = true
			}
		}
		if !found {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("no http task named %s in the pipelines", strings.Join(unknown, ", "))
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

func (a *executorAPI) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Address  string   `json:"address"`
		Protocol string   `json:"protocol"`
		Tasks    []string `json:"tasks"`
		Boot     string   `json:"boot"` // the executor process's id: a new one means it restarted
	}
	if err := runner.DecodeStrict(r, &req, 1<<20); err != nil {
		apiError(w, badBody(err), "malformed registration: %v", err)
		return
	}
	u, err := url.Parse(req.Address)
	if err != nil {
		// Not echoed: it may carry credentials, and the parse error quotes it whole.
		apiError(w, http.StatusBadRequest, "address is not a URL such as http://10.0.0.5:9090 (not repeated here: it may carry credentials)")
		return
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		apiError(w, http.StatusBadRequest, "address %q is not a URL such as http://10.0.0.5:9090", u.Redacted())
		return
	}
	if u.User != nil {
		// It would be stored, listed by GET /api/v1/executors and logged.
		apiError(w, http.StatusBadRequest, "address %s carries credentials: register the address alone (http://host:port); the scheduler authenticates with AX_EXECUTOR_TOKEN", u.Redacted())
		return
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(req.Address, "#") {
		apiError(w, http.StatusBadRequest, "address %q has a query or fragment: register the base URL alone (http://host:port[/path])", u.Redacted())
		return
	}
	if req.Protocol != "" && req.Protocol != "http" {
		apiError(w, http.StatusBadRequest, "protocol %q: only http is served", req.Protocol)
		return
	}
	if len(req.Tasks) == 0 {
		apiError(w, http.StatusBadRequest, `registration of %s names no tasks: list the tasks it runs, {"tasks": ["pipeline.task", …]}`, u.Redacted())
		return
	}
	ids, err := a.taskIDs(req.Tasks)
	if err != nil {
		apiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	now := a.now()
	if code, why := a.claim(r.Context(), req.Address, req.Boot, now); code != 0 {
		apiError(w, code, "%s", why)
		return
	}
	if err := a.st.RegisterExecutor(r.Context(), store.RegisterParams{Address: req.Address, Protocol: "http", Tasks: ids, Boot: req.Boot, Now: now}); err != nil {
		apiError(w, http.StatusServiceUnavailable, "%v", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(Registered{Registered: ids})
}

// whoIsTimeout bounds the question a registration asks the executor at
// the address it claims.
const whoIsTimeout = 3 * time.Second

// claim decides whether a registration with boot may take address: it may
// when nobody holds the address, when its holder is that boot already, when
// the holder has been silent past the exclusion time (runner.Alive), or
// when the process that answers /status at the address says it is that boot
// (the executor restarted). Anything else is another process claiming a
// live executor's address, which would fail that executor's attempts as
// "restarted" while their work goes on: refused 409 with the reason, and
// nothing is written. Without whoIs (tests that have no executors to ask),
// a live holder's address is taken as before.
func (a *executorAPI) claim(ctx context.Context, address, boot string, now time.Time) (int, string) {
	exs, err := a.st.Executors(ctx, "")
	if err != nil {
		return http.StatusServiceUnavailable, fmt.Sprintf("cannot read the executor registry: %v; register again later", err)
	}
	i := slices.IndexFunc(exs, func(x store.Executor) bool { return x.Address == address })
	if i < 0 || exs[i].Boot == boot || !runner.Alive(exs[i].LastHeartbeat, now) || a.whoIs == nil {
		return 0, ""
	}
	held := exs[i]
	ask, cancel := context.WithTimeout(ctx, whoIsTimeout)
	defer cancel()
	answer, err := a.whoIs(ask, address)
	switch {
	case err != nil:
		return http.StatusConflict, fmt.Sprintf("executor %s (boot %s) is live (heartbeat %s ago) and could not be asked who answers there now (%v): "+
			"a registration with boot %q is taken once the process at that address answers /status with it, or after %s without a heartbeat",
			address, held.Boot, now.Sub(held.LastHeartbeat).Round(time.Millisecond), err, boot, runner.Silence)
	case answer != boot:
		return http.StatusConflict, fmt.Sprintf("executor %s answers there as boot %s, not %q: another process cannot register a live executor's address; "+
			"register this executor at its own address", address, answer, boot)
	}
	return 0, ""
}

func (a *executorAPI) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Address string            `json:"address"`
		Pool    *runner.PoolStats `json:"pool,omitempty"` // an SDK executor's worker pool now
	}
	if err := runner.DecodeStrict(r, &req, 1<<20); err != nil || req.Address == "" {
		why := "no address"
		if err != nil {
			why = err.Error()
		}
		apiError(w, badBody(err), "malformed heartbeat (%s): want {\"address\": \"…\"}", why)
		return
	}
	now := a.now()
	err := a.st.Heartbeat(r.Context(), req.Address, now)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Recorded (the SDK registers again at once, so this is rare) and
		// refused: nothing is changed in the registry.
		msg := fmt.Sprintf("executor %s is not registered: register first", req.Address)
		msg += a.recordRefusal(r, store.Action{At: now, Actor: "executor:" + r.RemoteAddr, Action: "refused_heartbeat", Reason: msg})
		apiError(w, http.StatusNotFound, "%s", msg)
	case err != nil:
		apiError(w, http.StatusServiceUnavailable, "%v", err)
	default:
		a.pools.set(req.Address, req.Pool)
		w.WriteHeader(http.StatusNoContent)
	}
}

// badBody is the status for a request body that could not be read: 413
// when it was over the endpoint's limit, 408 when it did not arrive in
// time (the door's body deadline), 400 otherwise.
func badBody(err error) int {
	var tooLarge *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.As(err, &netErr) && netErr.Timeout():
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

// Kinds of client, each with its share of the server (kindCaps).
const (
	kindExecutor = "executor" // registrations, heartbeats and results
	kindOperator = "operator" // the admin API and the console
	kindMetrics  = "metrics"  // /metrics, /healthz, /readyz
)

// kindCaps are the requests each kind of client may have in progress at
// once on ax server; past its cap a request is refused 503 before its body
// is read. They add up to less than the door's 256 connections per client
// address, so that a flood of one kind from an address (all of loopback
// is one) never closes another kind's connections.
func kindCaps() map[string]int {
	return map[string]int{kindExecutor: 96, kindOperator: 64, kindMetrics: 16}
}

// clientKind says which kind of client sends r, from its method and path.
func clientKind(r *http.Request) string {
	switch p := r.URL.Path; {
	case r.Method == http.MethodPost && (p == "/api/v1/results" || strings.HasPrefix(p, "/api/v1/executors/")):
		return kindExecutor
	case p == "/metrics" || p == "/healthz" || p == "/readyz":
		return kindMetrics
	}
	return kindOperator
}

// Serve serves h on ln until ctx ends, behind the door: JSON mutations,
// no foreign Origin, no foreign Host on a loopback listener, timeouts and
// connection caps (see package httpguard). hosts are the further names the
// server is reached by (the host of its advertised URL).
func Serve(ctx context.Context, ln net.Listener, h http.Handler, listen string, hosts ...string) error {
	srv := httpguard.NewServer(httpguard.Config{Listen: listen, Hosts: hosts, KindOf: clientKind, KindCaps: kindCaps()}, h)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

// result takes a Report an executor posts to its callback, on any server,
// primary or standby. It is stored in the inbox by ticket before the
// answer: 200 means durably received, and the primary applies it once; a
// server that cannot store it answers 503 so that the executor retries. A
// malformed report (400), an oversized output (413), an unknown ticket (404)
// or a ticket of another instance (409) is recorded in the action log (up
// to refusalsPerMinute per client address), refused with the reason, and
// nothing is applied.
func (a *executorAPI) result(w http.ResponseWriter, r *http.Request) {
	ctx, now := r.Context(), a.now()
	actor := "executor:" + r.RemoteAddr
	refuse := func(code int, action, ticket string, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		msg += a.recordRefusal(r, store.Action{At: now, Actor: actor, Action: action, Ticket: ticket, Reason: msg})
		apiError(w, code, "%s", msg)
	}
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 1<<20+1024))
	var rep runner.Report
	if err == nil {
		rep, err = runner.ParseReport(data)
	}
	if err != nil {
		if code := badBody(err); code == http.StatusRequestTimeout {
			apiError(w, code, "the result's body did not arrive in time (%v): send it whole, at once", err) // not a report: nothing recorded
			return
		}
		refuse(badBody(err), "malformed_result", "", "%v", err)
		return
	}
	if n := len(rep.Output) + len(rep.Log); n > runner.MaxReportOutput {
		refuse(http.StatusRequestEntityTooLarge, "refused_result", rep.Ticket,
			"result of ticket %s carries %d bytes of output, more than %d: send the tail of the output", rep.Ticket, n, runner.MaxReportOutput)
		return
	}
	in, err := a.st.InstanceByTicket(ctx, rep.Ticket)
	switch {
	case errors.Is(err, store.ErrNotFound):
		refuse(http.StatusNotFound, "refused_result", rep.Ticket, "ticket %s is unknown: no attempt was dispatched with it", rep.Ticket)
		return
	case err != nil:
		apiError(w, http.StatusServiceUnavailable, "cannot check ticket %s: %v; deliver it again later", rep.Ticket, err)
		return
	case rep.InstanceID != 0 && rep.InstanceID != in.ID:
		refuse(http.StatusConflict, "refused_result", rep.Ticket, "ticket %s belongs to instance %d, not to instance %d", rep.Ticket, in.ID, rep.InstanceID)
		return
	}
	data = a.masked(ctx, in.TaskID, rep, data)
	dup, err := a.st.ReceiveResult(ctx, store.InboxEntry{Ticket: rep.Ticket, InstanceID: in.ID, Report: string(data), ReceivedBy: a.self, ReceivedAt: now})
	if err != nil {
		apiError(w, http.StatusServiceUnavailable, "cannot store the result of ticket %s: %v; deliver it again later", rep.Ticket, err)
		return
	}
	if dup {
		// Delivered again (the acknowledgement was lost, or a client
		// replays it): counted and ignored; recorded in the action log
		// within the same per-address bound as refusals, so that a replay
		// loop cannot flood it.
		if a.repeats != nil {
			a.repeats.Inc()
		}
		if a.refusals.take(r.RemoteAddr, now) {
			_ = a.st.AppendAction(ctx, store.Action{At: now, Actor: actor, Action: "stale_result", InstanceID: in.ID, Ticket: rep.Ticket,
				Reason: "result delivered again for a ticket received already: ignored", Detail: string(rep.Status)})
		}
	} else if a.deliver != nil {
		a.deliver(rep) // the attempt waiting in this process, if any, at once; the primary reads the inbox for the others
	}
	writeJSON(w, http.StatusOK, Receipt{Ticket: rep.Ticket, Received: "stored", Duplicate: dup})
}
