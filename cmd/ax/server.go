package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/engine/breaker"
	"github.com/ax-sched/ax/examples/functions"
	"github.com/ax-sched/ax/reload"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// serverFlags are the flags of ax server (and, later, of the standalone
// commands that run the same engine).
type serverFlags struct {
	store      string
	pipelines  []string
	rate       float64
	logLevel   string
	logFormat  string
	holder     string
	leaseTTL   time.Duration
	listen     string
	advertise  string
	brkWindow  time.Duration
	brkMin     int
	brkRatio   float64
	insecure   bool
	openReads  bool
	webhooks   []string
	watch      time.Duration
	taskLabels bool
	grace      time.Duration
	maxRun     int
	retain     string
	logMax     string
}

func newServerCmd() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the scheduler on the given pipelines",
		Long: `Run the scheduler. With no flags it uses an embedded SQLite file, ./ax.db,
and the pipelines in ./examples. It refuses to start when a pipeline file is
invalid (with the messages of ax validate) or when another scheduler holds
the store's lease.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServer(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.store, "store", store.DefaultPath, "store: a SQLite file path, or mysql://user:pass@tcp(host:3306)/db")
	fl.StringSliceVar(&f.pipelines, "pipelines", []string{"examples"}, "pipeline files or directories")
	fl.Float64Var(&f.rate, "dispatch-rate", 0, "global dispatch limit in tasks per second (0: unlimited)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fl.StringVar(&f.holder, "holder", "", "name of this process in the leader lease (default host:pid)")
	fl.DurationVar(&f.brkWindow, "breaker-window", 5*time.Minute, "circuit breaker: the sliding window of outcomes judged, for tasks whose file sets no breaker window")
	fl.IntVar(&f.brkMin, "breaker-min-outcomes", 10, "circuit breaker: outcomes judged at least (fewer in the window: the last N), for tasks whose file sets none")
	fl.Float64Var(&f.brkRatio, "breaker-ratio", 0.5, "circuit breaker: failure ratio above which a task's dispatch rate drops to a tenth, for tasks whose file sets none")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", 15*time.Second, "lifetime of the leader lease; it is renewed every third of it")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address of the admin API, the web console, /metrics and the executor endpoints (empty: none)")
	fl.StringVar(&f.advertise, "advertise-url", "", "base URL at which executors reach this server (callbacks, registration), such as http://10.0.0.5:8080; required when --listen has no host (0.0.0.0, ::, :8080); default http://LISTEN")
	fl.BoolVar(&f.insecure, "insecure", false, "allow a non-loopback --listen without AX_ADMIN_TOKEN (writes then need no token)")
	fl.BoolVar(&f.openReads, "open-reads", false, "serve read-only endpoints (GET, /metrics) without the token when AX_ADMIN_TOKEN is set")
	fl.BoolVar(&f.taskLabels, "metrics-task-labels", true, "label the per-task metrics (ax_task_*) by task as well as pipeline; false keeps the pipeline only, for very many tasks")
	fl.DurationVar(&f.watch, "watch", 2*time.Second, "how often to look for changed pipeline files and reload them (0: only on SIGHUP)")
	fl.IntVar(&f.maxRun, "max-running", engine.DefaultMaxRunning(), "local attempts (functions and commands) running at once; the rest wait in the queue in priority order (0: unlimited; ax limits changes it at run time)")
	fl.DurationVar(&f.grace, "shutdown-grace", 30*time.Second, "on SIGTERM: how long running attempts may finish before they are stopped and given back to run again (not counted as attempts)")
	fl.StringVar(&f.retain, "retain", "30d", "keep finished runs this long (30d, 12h; 0 keeps everything): older ones are pruned with their history, actions and output, in small batches; waiting, running and paused work never")
	fl.StringVar(&f.logMax, "log-max", "1MiB", "task output kept per attempt: the last this many bytes (such as 1MiB, 256KiB); what is dropped is counted and shown")
	fl.StringArrayVar(&f.webhooks, "alert-webhook", nil, "where alerts go, repeatable: a URL (every alert, as JSON), or kind=K1|K2,group=G1|G2,url=URL[,format=slack] (queued and retried; never blocks dispatch)")
	return cmd
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErr("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageErr("--log-format %q: use text or json", format)
}

func runServer(ctx context.Context, f serverFlags, stderr io.Writer) error {
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	var routes []alertRoute // checked before anything starts
	for _, spec := range f.webhooks {
		r, err := parseAlertRoute(spec)
		if err != nil {
			return usageErr("--alert-webhook %v", err)
		}
		routes = append(routes, r)
	}
	filesAtStart := reload.FilesSum(f.pipelines) // before reading them: a change from here on is reloaded
	g, errs, err := dag.Load(f.pipelines, defs.Options{}, dag.Options{DispatchRate: reload.WarnRate(f.rate)})
	if err != nil {
		return usageErr("%v", err)
	}
	if g == nil {
		for _, e := range errs {
			fmt.Fprintln(stderr, e.Error())
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("not starting: %d error(s) in the pipeline files (see ax validate)", len(errs.Fatal()))}
	}
	for _, w := range errs.Warnings() {
		log.Warn("pipeline_warning", "at", w.Pos.String(), "task", w.Task, "msg", w.Msg)
	}
	token, execToken := os.Getenv("AX_ADMIN_TOKEN"), os.Getenv("AX_EXECUTOR_TOKEN")
	var ln net.Listener
	self, err := advertiseURL(f.listen, f.advertise)
	if err != nil {
		return err
	}
	if f.listen != "" {
		if err := checkListen(f.listen, token, execToken, f.insecure); err != nil {
			return err
		}
		// Bound first: a busy port stops the server before it has touched the store.
		if ln, err = listenAPI(f.listen); err != nil {
			return &exitError{code: exitFailed, err: err}
		}
		defer ln.Close()
	}
	if f.maxRun < 0 || f.maxRun > engine.MaxRunningBound {
		return usageErr("--max-running %d: give 0 (unlimited) to %d", f.maxRun, engine.MaxRunningBound)
	}
	if f.grace <= 0 {
		return usageErr("--shutdown-grace %s: use a positive duration such as 30s", f.grace)
	}
	if f.leaseTTL < 3*time.Second {
		return usageErr("--lease-ttl %s: use at least 3s", f.leaseTTL)
	}
	switch {
	case f.brkWindow < 10*time.Second:
		return usageErr("--breaker-window %s: use at least 10s (outcomes are counted in 10-second buckets)", f.brkWindow)
	case f.brkMin < 1 || f.brkMin > 10000:
		return usageErr("--breaker-min-outcomes %d: use 1 to 10000", f.brkMin)
	case !(f.brkRatio > 0 && f.brkRatio < 1):
		return usageErr("--breaker-ratio %v: use a failure ratio above 0 and below 1, such as 0.5", f.brkRatio)
	}
	retain, err := api.ParseRetain(f.retain)
	if err != nil {
		return usageErr("--retain %v", err)
	}
	logMax, err := parseSize(f.logMax)
	if err != nil || logMax < 4<<10 {
		return usageErr("--log-max %q: give a size of at least 4KiB, such as 1MiB or 256KiB", f.logMax)
	}
	st, err := store.Open(ctx, f.store, store.Options{})
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	defer st.Close()
	storeOpened(st)
	var eng *engine.Engine // set below; executors raise alerts through it
	// The pipelines in force: the engine's, which a reload replaces.
	graph := func() *dag.Graph {
		if eng != nil {
			return eng.Graph()
		}
		return g
	}
	execs, err := executorsOf(graph, st, alertVia(&eng))
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), api.NewExecutorCollector(st))
	var sinks []func(engine.Alert)
	if len(routes) > 0 {
		hookCtx, stopHook := context.WithCancel(ctx)
		defer stopHook()
		send, err := startAlertRoutes(hookCtx, routes, log)
		if err != nil {
			return usageErr("--alert-webhook: %v", err)
		}
		sinks = append(sinks, send)
	}
	eng, err = engine.New(engine.Config{Breaker: breaker.Config{Window: f.brkWindow, MinSamples: f.brkMin, Threshold: f.brkRatio}, DispatchRate: f.rate, Holder: f.holder, Logger: log, LeaseTTL: f.leaseTTL, LeaseRenew: f.leaseTTL / 3,
		Grace: f.grace, MaxRunning: cmp.Or(f.maxRun, -1), Registerer: reg, NoTaskLabels: !f.taskLabels, Retain: retain, LogMax: logMax, OnAlert: func(a engine.Alert) {
			for _, s := range sinks {
				s(a)
			}
		}}, st, g, execs)
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	rl := reload.New(f.pipelines, filesAtStart, f.rate, eng, log)
	go rl.Run(ctx, f.watch)
	if f.listen != "" {
		// Executors report results asynchronously to this API.
		web := execs[defs.ExecHTTP].(*runner.Routed).WithCallback(self + "/api/v1/results")
		execs[defs.ExecHTTP] = web
		mux := api.Handler(api.Config{Store: st, Graph: g, Engine: eng, Reload: rl, Gather: reg, Token: token, ExecToken: execToken,
			OpenReads: f.openReads, Self: self, Deliver: web.Deliver, Retain: retain})
		apiCtx, stopAPI := context.WithCancel(ctx)
		defer stopAPI()
		apiErr := make(chan error, 1)
		go func() { apiErr <- api.Serve(apiCtx, ln, mux, f.listen) }()
		go announcePrimary(apiCtx, st, eng, self, log)
		log.Info("api_listening", "addr", f.listen, "console", "http://"+f.listen+"/", "token_required", token != "")
	}
	log.Info("server_starting", "store", st.String(), "pipelines", len(g.Pipelines()), "tasks", len(g.Order()), "dispatch_rate", f.rate)
	if err := eng.Run(ctx); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	return nil
}

// alertVia raises executors' alerts (an executor gone silent) through the
// engine *e points to, once it exists.
func alertVia(e **engine.Engine) func(engine.Alert) {
	return func(a engine.Alert) {
		if *e != nil {
			(*e).Alert(context.Background(), a)
		}
	}
}

// announcePrimary records this server's API URL while it is the primary,
// so that standbys can point writers to it.
func announcePrimary(ctx context.Context, st *store.Store, eng *engine.Engine, url string, log *slog.Logger) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	announced := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		stats := eng.Stats()
		leader := stats.Leader
		if leader && !announced {
			// Fenced like every write of the primary: a stale one records nothing.
			if err := st.Fence(stats.Epoch).SetSetting(ctx, api.PrimarySetting, url, time.Now()); err != nil {
				log.Warn("primary_url_not_recorded", "err", err)
				continue
			}
		}
		announced = leader
	}
}

// storeOpened sees the server's store once open: nothing in the stock
// binary; a binary built with -tags axfault installs its fault hook there
// (fault_axfault.go).
var storeOpened = func(*store.Store) {}

// executors builds the executors of the stock binary: the example functions,
// commands, and HTTP tasks routed among the executors registered in st for
// them (or called at their own URL when none is), each looking its task up
// in the pipelines in force.
func executors(g *dag.Graph, st *store.Store, alert func(engine.Alert)) (engine.Executors, error) {
	return executorsOf(func() *dag.Graph { return g }, st, alert)
}

// executorsOf is executors for pipelines that a reload may replace: graph
// returns the ones in force.
func executorsOf(graph func() *dag.Graph, st *store.Store, alert func(engine.Alert)) (engine.Executors, error) {
	funcs := runner.NewFunctions(func(a runner.Attempt) string {
		if t := graph().Task(a.Pipeline + "." + a.Task); t != nil {
			return t.Executor.Function
		}
		return ""
	})
	if err := functions.Register(funcs); err != nil {
		return nil, err
	}
	commands := runner.NewCommands(func(a runner.Attempt) (runner.CommandSpec, error) {
		t := graph().Task(a.Pipeline + "." + a.Task)
		if t == nil {
			return runner.CommandSpec{}, fmt.Errorf("unknown task %s.%s", a.Pipeline, a.Task)
		}
		spec := runner.CommandSpec{Argv: t.Executor.Command, Templates: t.Executor.Templates}
		if tr := graph().TriggerOf(t.ID()); tr != nil {
			spec.Schedule = tr.Schedule
		}
		return spec, nil
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}}
	web := runner.NewRouted(runner.RoutedConfig{Client: client,
		URL: func(a runner.Attempt) (string, error) {
			t := graph().Task(a.Pipeline + "." + a.Task)
			if t == nil || t.Executor.URL == "" {
				return "", fmt.Errorf("task %s.%s has no http executor", a.Pipeline, a.Task)
			}
			return t.Executor.URL, nil
		},
		Registry: registryCache(time.Second, func(ctx context.Context, task string) ([]runner.Endpoint, error) {
			exs, err := st.Executors(ctx, task)
			if err != nil {
				return nil, err
			}
			eps := make([]runner.Endpoint, len(exs))
			for i, x := range exs {
				eps[i] = runner.Endpoint{Address: x.Address, LastHeartbeat: x.LastHeartbeat}
			}
			return eps, nil
		}),
	})
	// Executors that share AX_EXECUTOR_TOKEN with the scheduler refuse dispatches without it.
	web = web.WithToken(os.Getenv("AX_EXECUTOR_TOKEN"))
	return engine.Executors{defs.ExecFunction: funcs, defs.ExecCommand: commands, defs.ExecHTTP: web}, nil
}

func newStatusCmd() *cobra.Command {
	var (
		target string
		limit  int
		af     apiFlags
	)
	cmd := &cobra.Command{
		Use:   "status [PIPELINE]",
		Short: "Show the scheduler's lease, and pipelines with their latest runs and instance states",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !viaStore(cmd) {
				return statusAPI(cmd.Context(), cmd.OutOrStdout(), af, args, limit)
			}
			st, err := store.Open(cmd.Context(), target, store.Options{})
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			defer st.Close()
			return writeStatus(cmd.Context(), cmd.OutOrStdout(), st, args, limit, api.StoreZones(cmd.Context(), st, af.utc))
		},
	}
	cmd.Flags().StringVar(&target, "store", store.DefaultPath, "read this store instead of calling the API: a SQLite file path, or mysql://user:pass@tcp(host:3306)/db")
	cmd.Flags().IntVarP(&limit, "runs", "n", 5, "latest runs per pipeline")
	af.add(cmd)
	return cmd
}

func writeStatus(ctx context.Context, w io.Writer, st *store.Store, only []string, limit int, zs *api.Zones) error {
	var b strings.Builder
	if l, err := st.GetLease(ctx, ""); err == nil {
		state := "held until"
		if time.Now().After(l.ExpiresAt) {
			state = "released or expired at"
		}
		fmt.Fprintf(&b, "scheduler: %s (epoch %d, lease %s %s)\n", l.Holder, l.Epoch, state, api.Stamp(l.ExpiresAt, time.UTC))
	} else if errors.Is(err, store.ErrNotFound) {
		b.WriteString("scheduler: never started on this store\n")
	} else {
		return err
	}
	tasks, err := st.Tasks(ctx, store.TaskFilter{})
	if err != nil {
		return err
	}
	pipelines := map[string]int{}
	var names []string
	for _, t := range tasks {
		if pipelines[t.Pipeline] == 0 {
			names = append(names, t.Pipeline)
		}
		pipelines[t.Pipeline]++
	}
	if len(only) == 1 {
		if pipelines[only[0]] == 0 {
			return &exitError{code: exitFailed, err: fmt.Errorf("no pipeline %q in the store%s", only[0], defs.DidYouMean(only[0], names))}
		}
		names = only
	}
	gates := map[string]bool{}
	for _, t := range tasks {
		var d struct {
			Manual bool `json:"manual"`
		}
		if json.Unmarshal(t.Definition, &d) == nil && d.Manual {
			gates[t.ID] = true
		}
	}
	manual := func(task string) bool { return gates[task] }
	for _, p := range names {
		fmt.Fprintf(&b, "\npipeline %s (%d tasks)\n", p, pipelines[p])
		runs, err := api.RecentRuns(ctx, st, p, time.Now(), limit)
		if err != nil {
			return err
		}
		ids := make([]int64, len(runs))
		for i, r := range runs {
			ids[i] = r.ID
		}
		insOf, err := st.InstancesOfRuns(ctx, ids)
		if err != nil {
			return err
		}
		var views []api.RunView
		for _, r := range runs {
			views = append(views, api.Summarize(r, insOf[r.ID], manual))
		}
		loc, err := zs.Of(p)
		if err != nil {
			return err
		}
		writeRuns(&b, views, limit, loc)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// writeRuns prints up to limit runs with their instance counts, leaving out
// those created ahead (inside the window) that nothing happened in yet.
func writeRuns(b *strings.Builder, runs []api.RunView, limit int, loc *time.Location) {
	shown := 0
	for _, r := range runs {
		if r.LogicalTime.After(time.Now()) && r.State == "waiting" {
			continue // created ahead, inside the window: not news
		}
		var parts []string
		for _, s := range axtype.States {
			if n := r.Counts[s]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", s, n))
			}
		}
		fmt.Fprintf(b, "  run %-6d %-8s %s  %s\n", r.ID, r.Kind, api.Stamp(r.LogicalTime, loc), strings.Join(parts, ", "))
		writeWaits(b, r, loc)
		if shown++; shown >= limit {
			break
		}
	}
	if shown == 0 {
		b.WriteString("  no runs yet\n")
	}
}

// writeWaits says, for a run that is not over, why: each waiting instance
// and what it waits on, gates awaiting approval first.
func writeWaits(b *strings.Builder, r api.RunView, loc *time.Location) {
	if r.Over || len(r.Waiting) == 0 {
		return
	}
	tasks := make([]string, 0, len(r.Waiting))
	for t := range r.Waiting {
		tasks = append(tasks, t)
	}
	slices.SortFunc(tasks, func(x, y string) int {
		gx, gy := slices.Contains(r.Awaiting, x), slices.Contains(r.Awaiting, y)
		switch {
		case gx && !gy:
			return -1
		case gy && !gx:
			return 1
		}
		return strings.Compare(x, y)
	})
	for _, t := range tasks {
		fmt.Fprintf(b, "      %s: %s\n", t, r.Waiting[t])
	}
	if len(r.Awaiting) > 0 {
		fmt.Fprintf(b, "      approve with: ax trigger %s --at %s\n", r.Awaiting[0], api.Stamp(r.LogicalTime, loc))
	}
}

// registryCache keeps each task's executors for ttl, so that routing does
// not read the registry from the store on every dispatch.
func registryCache(ttl time.Duration, load func(context.Context, string) ([]runner.Endpoint, error)) func(context.Context, string) ([]runner.Endpoint, error) {
	type entry struct {
		at  time.Time
		eps []runner.Endpoint
	}
	var (
		mu    sync.Mutex
		cache = map[string]entry{}
	)
	return func(ctx context.Context, task string) ([]runner.Endpoint, error) {
		mu.Lock()
		e, ok := cache[task]
		mu.Unlock()
		if ok && time.Since(e.at) < ttl {
			return e.eps, nil
		}
		eps, err := load(ctx, task)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		cache[task] = entry{at: time.Now(), eps: eps}
		mu.Unlock()
		return eps, nil
	}
}

// advertiseURL returns the base URL executors are given for this server:
// --advertise-url, or http://LISTEN when --listen names a host. A --listen
// without one (0.0.0.0:8080, [::]:8080, :8080) is refused without
// --advertise-url: executors could not call it back.
func advertiseURL(listen, advertise string) (string, error) {
	if advertise != "" {
		u, err := url.Parse(advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return "", usageErr("--advertise-url %q: give the base URL executors reach this server at, such as http://10.0.0.5:8080", advertise)
		}
		return strings.TrimSuffix(advertise, "/"), nil
	}
	if listen == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", usageErr("--listen %q: give host:port, such as 127.0.0.1:8080", listen)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return "", usageErr("--listen %s listens on every address, so executors cannot be told where to call back: give --advertise-url, such as --advertise-url http://10.0.0.5:%s", listen, port)
	}
	return "http://" + listen, nil
}
