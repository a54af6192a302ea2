package main

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
	"time"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// executorAPI serves the endpoints executors call: registration and
// heartbeats (R21). Registration is idempotent on (task, address).
type executorAPI struct {
	st      *store.Store
	g       *dag.Graph
	graphOf func() *dag.Graph        // the pipelines in force, when they can be reloaded (else g)
	deliver func(runner.Report) bool // to the attempt waiting for it
	report  func(runner.Report)      // to the engine, by ticket
	token   string                   // AX_EXECUTOR_TOKEN: required on every endpoint here when set
}

func (a *executorAPI) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/executors/register", a.guard(a.register))
	mux.HandleFunc("POST /api/v1/executors/heartbeat", a.guard(a.heartbeat))
	mux.HandleFunc("POST /api/v1/results", a.guard(a.result))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
}

// guard requires the executor token, when one is configured: without it,
// anyone who reaches the API could register an executor for a task and
// receive its dispatches.
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
	writeJSON(w, code, map[string]string{"error": fmt.Sprintf(format, args...)})
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
	}
	if err := runner.DecodeStrict(r, &req, 1<<20); err != nil {
		apiError(w, http.StatusBadRequest, "malformed registration: %v", err)
		return
	}
	u, err := url.Parse(req.Address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		apiError(w, http.StatusBadRequest, "address %q is not a URL such as http://10.0.0.5:9090", req.Address)
		return
	}
	if req.Protocol != "" && req.Protocol != "http" {
		apiError(w, http.StatusBadRequest, "protocol %q: only http is served", req.Protocol)
		return
	}
	ids, err := a.taskIDs(req.Tasks)
	if err != nil {
		apiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err := a.st.RegisterExecutor(r.Context(), store.RegisterParams{Address: req.Address, Protocol: "http", Tasks: ids, Now: time.Now()}); err != nil {
		apiError(w, http.StatusServiceUnavailable, "%v", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"registered": ids})
}

func (a *executorAPI) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Address string `json:"address"`
	}
	if err := runner.DecodeStrict(r, &req, 1<<20); err != nil || req.Address == "" {
		apiError(w, http.StatusBadRequest, "malformed heartbeat: want {\"address\": \"…\"}")
		return
	}
	err := a.st.Heartbeat(r.Context(), req.Address, time.Now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		apiError(w, http.StatusNotFound, "executor %s is not registered: register first", req.Address)
	case err != nil:
		apiError(w, http.StatusServiceUnavailable, "%v", err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// serveAPI serves h on ln until ctx ends.
func serveAPI(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
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

// result takes a Report an executor posts to its callback. A malformed one is
// refused with 400 and recorded; any well-formed one is acknowledged (so the
// executor stops retrying) and applied once if its ticket is current.
func (a *executorAPI) result(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 1<<20+1024))
	var rep runner.Report
	if err == nil {
		rep, err = runner.ParseReport(data)
	}
	if err != nil {
		_ = a.st.AppendAction(r.Context(), store.Action{At: time.Now(), Actor: "executor:" + r.RemoteAddr, Action: "malformed_result",
			Reason: err.Error()})
		apiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if a.deliver == nil || !a.deliver(rep) {
		if a.report == nil {
			apiError(w, http.StatusServiceUnavailable, "no scheduler runs in this process")
			return
		}
		a.report(rep)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"ticket": rep.Ticket, "received": "ok"})
}
