package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/engine/breaker"
	"github.com/ax-sched/ax/engine/tracing"
	"github.com/ax-sched/ax/reload"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/taskexec"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
)

// serverFlags are the flags of ax server (and, later, of the standalone
// commands that run the same engine).
type serverFlags struct {
	store         string
	pipelines     []string
	rate          float64
	logLevel      string
	logFormat     string
	holder        string
	leaseTTL      time.Duration
	listen        string
	advertise     string
	execTokenFile string
	brkWindow     time.Duration
	brkMin        int
	brkRatio      float64
	insecure      bool
	openReads     bool
	webhooks      []string
	mail          mailFlags
	watch         time.Duration
	taskLabels    bool
	grace         time.Duration
	maxRun        int
	nice          int
	retain        string
	logMax        string
	secretsDir    string
	auth          authFlags
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
	fl.StringVar(&f.store, "store", store.DefaultPath, "store: a SQLite file path, mysql://user:pass@tcp(host:3306)/db or postgres://user:pass@host:5432/db")
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
	fl.StringVar(&f.execTokenFile, "executor-token-file", "", "file of the credential executors authenticate with when AX_EXECUTOR_TOKEN is not set: created with a random token (mode 0600) when missing; default executor.token beside a SQLite store (required, or AX_EXECUTOR_TOKEN, on MySQL)")
	fl.BoolVar(&f.openReads, "open-reads", false, "serve read-only endpoints (GET, /metrics) without the token when AX_ADMIN_TOKEN is set")
	fl.BoolVar(&f.taskLabels, "metrics-task-labels", true, "label the per-task metrics (ax_task_*) by task as well as pipeline; false keeps the pipeline only, for very many tasks")
	fl.DurationVar(&f.watch, "watch", 2*time.Second, "how often to look for changed pipeline files and reload them (0: only on SIGHUP)")
	fl.IntVar(&f.maxRun, "max-running", engine.DefaultMaxRunning(), "local attempts (functions and commands) running at once; the rest wait in the queue in priority order (0: unlimited; ax limits changes it at run time)")
	fl.IntVar(&f.nice, "command-nice", taskexec.DefaultCommandNice, "raise the nice value of command tasks by this much (0 to 19) above the server's, so that under contention they yield the CPU to the scheduler (and to every other process of the host: a command's timeout is wall time); 0 runs them at the server's own")
	fl.DurationVar(&f.grace, "shutdown-grace", 30*time.Second, "on SIGTERM: how long running attempts may finish before they are stopped and given back to run again (not counted as attempts)")
	fl.StringVar(&f.retain, "retain", "30d", "keep finished runs this long (30d, 12h; 0 keeps everything): older ones are pruned with their history, actions and output, in small batches; waiting, running and paused work never")
	fl.StringVar(&f.logMax, "log-max", "1MiB", "task output kept per attempt: the last this many bytes (such as 1MiB, 256KiB); what is dropped is counted and shown")
	cli.AddSecretsFlag(fl, &f.secretsDir)
	addAuthFlags(fl, &f.auth)
	addMailFlags(fl, &f.mail)
	fl.StringArrayVar(&f.webhooks, "alert-webhook", nil, "where alerts go, repeatable: a URL (every alert, as JSON), or kind=K1|K2,group=G1|G2,url=URL[,format=slack] (queued and retried; never blocks dispatch)")
	return cmd
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, cli.Usage("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, cli.Usage("--log-format %q: use text or json", format)
}

// runServer checks the flags and the pipeline files, opens the store,
// assembles the engine with its executors, alert routes, reloader and API,
// and runs the engine until ctx ends. Every flag is checked before the
// store is touched, and the API's port is bound before it.
func runServer(ctx context.Context, f serverFlags, stderr io.Writer) error {
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	routes, err := alertRoutes(f) // checked before anything starts
	if err != nil {
		return err
	}
	if err := tracing.CheckEnv(os.Getenv); err != nil {
		return cli.Usage("%v", err)
	}
	filesAtStart := reload.FilesSum(f.pipelines) // before reading them: a change from here on is reloaded
	g, err := loadPipelines(f, stderr, log)
	if err != nil {
		return err
	}
	secrets, warnSecrets, err := serverSecrets(ctx, f, log)
	if err != nil {
		return err
	}
	warnSecrets(g)
	token := os.Getenv("AX_ADMIN_TOKEN")
	var eng *engine.Engine // set below; executors raise alerts through it
	fr, err := openFront(f, token, func() *dag.Graph { return graphInForce(eng, g) }, log)
	if err != nil {
		return err
	}
	if fr.ln != nil {
		defer fr.ln.Close()
	}
	auth, self, ln, lim := fr.auth, fr.self, fr.ln, fr.lim
	st, err := store.Open(ctx, f.store, store.Options{Logger: log})
	if err != nil {
		return cli.Fail(err)
	}
	defer st.Close()
	storeOpened(st)
	execToken, err := serverExecutorToken(f, token)
	if err != nil {
		return err
	}
	execs, err := serverExecutors(&eng, g, st, f, secrets)
	if err != nil {
		return cli.Fail(err)
	}
	reg := metricsRegistry(st)
	// The alert routes outlive ctx: they take the alerts of the engine's
	// shutdown, then send their last mails once it returned.
	hookCtx, stopHook := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHook()
	onAlert, waitAlerts, err := alertSinks(hookCtx, routes, secrets, self, log, reg)
	if err != nil {
		return err
	}
	defer func() { stopHook(); waitAlerts() }() // the last mails go, or are logged as lost
	cfg := engineConfig(f, lim, log, reg, onAlert)
	cfg.Observer, err = startTracing(ctx, log, st, reg, &eng)
	if err != nil {
		return err
	}
	eng, err = engine.New(cfg, st, g, execs)
	if err != nil {
		return cli.Fail(err)
	}
	rl := reload.New(f.pipelines, filesAtStart, f.rate, eng, log)
	rl.Loaded = warnSecrets
	go rl.Run(ctx, f.watch)
	go auth.watch(ctx, f.watch)
	if f.listen != "" {
		stopAPI := serveAPI(ctx, apiServer{f: f, auth: auth, ln: ln, self: self, token: token, execToken: execToken, lim: lim, secrets: secrets,
			st: st, g: g, eng: eng, rl: rl, reg: reg, execs: execs, log: log})
		defer stopAPI()
	}
	log.Info("server_starting", "store", st.String(), "pipelines", len(g.Pipelines()), "tasks", len(g.Order()), "dispatch_rate", f.rate)
	if err := eng.Run(ctx); err != nil {
		return cli.Fail(err)
	}
	return nil
}

// front is what a server checks and binds before it opens its store: who
// may call it, the URL it advertises, its listener and its limits.
type front struct {
	auth serverAuth
	self string
	ln   net.Listener
	lim  serverLimits
}

// openFront reads the users file, the advertised URL and the limits, and
// binds the listener; on an error nothing stays bound.
func openFront(f serverFlags, token string, graph func() *dag.Graph, log *slog.Logger) (front, error) {
	auth, err := openAuth(f.auth, graph, log)
	if err != nil {
		return front{}, err
	}
	self, err := advertiseURL(f.listen, f.advertise)
	if err != nil {
		return front{}, err
	}
	lim, err := checkServerLimits(f)
	if err != nil {
		return front{}, err
	}
	ln, err := bindAPI(f, token)
	if err != nil {
		return front{}, err
	}
	return front{auth: auth, self: self, ln: ln, lim: lim}, nil
}

// serverExecutors builds the executors tasks run with. They read the
// pipelines in force: the engine's once *eng is set (a reload replaces
// them), g before; and they raise alerts through *eng.
func serverExecutors(eng **engine.Engine, g *dag.Graph, st *store.Store, f serverFlags, secrets runner.Secrets) (engine.Executors, error) {
	graph := func() *dag.Graph {
		if *eng != nil {
			return (*eng).Graph()
		}
		return g
	}
	return taskexec.ExecutorsOf(graph, st, taskexec.AlertVia(eng), f.nice, secrets)
}

// metricsRegistry is /metrics' registry: the Go runtime's and the
// process's collectors and the registered executors'.
func metricsRegistry(st *store.Store) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), api.NewExecutorCollector(st))
	return reg
}

// serverSecrets opens --secrets-dir and returns, with the provider, the
// check that logs every secret the pipelines name and it cannot resolve
// (at start and after each reload).
func serverSecrets(ctx context.Context, f serverFlags, log *slog.Logger) (runner.Secrets, func(*dag.Graph), error) {
	secrets, err := cli.OpenSecrets(f.secretsDir)
	if err != nil {
		return nil, nil, err
	}
	warn := func(g *dag.Graph) {
		for _, u := range taskexec.Unresolved(ctx, g, secrets) {
			log.Warn("secret_unresolved", "task", u.Task, "err", u.Err)
		}
	}
	return secrets, warn, nil
}

// loadPipelines loads and compiles the pipeline files; the server does not
// start on an error in them (printed as ax validate prints it), and logs
// their warnings.
func loadPipelines(f serverFlags, stderr io.Writer, log *slog.Logger) (*dag.Graph, error) {
	g, errs, err := dag.Load(f.pipelines, defs.Options{}, dag.Options{DispatchRate: reload.WarnRate(f.rate)})
	if err != nil {
		return nil, cli.Usage("%v", err)
	}
	if g == nil {
		for _, e := range errs {
			fmt.Fprintln(stderr, e.Error())
		}
		return nil, cli.Fail(fmt.Errorf("not starting: %d error(s) in the pipeline files (see ax validate)", len(errs.Fatal())))
	}
	for _, w := range errs.Warnings() {
		log.Warn("pipeline_warning", "at", w.Pos.String(), "task", w.Task, "message", w.Msg)
	}
	return g, nil
}

// bindAPI binds --listen, when given, after checking that a non-loopback
// address has a token: a busy port stops the server before it has touched
// the store. Without --listen it returns no listener.
func bindAPI(f serverFlags, token string) (net.Listener, error) {
	if f.listen == "" {
		return nil, nil
	}
	if err := checkListen(f.listen, cmp.Or(token, f.auth.users), f.insecure); err != nil { // a users file asks a sign-in as the token does
		return nil, err
	}
	ln, err := listenAPI(f.listen)
	if err != nil {
		return nil, cli.Fail(err)
	}
	return ln, nil
}

// serverLimits are the flags checkServerLimits parsed.
type serverLimits struct {
	retain time.Duration
	logMax int
}

// checkServerLimits checks the flags that bound the engine (running
// attempts, nice, grace, lease, breaker, retention, output kept) and
// returns those it parsed.
func checkServerLimits(f serverFlags) (serverLimits, error) {
	if f.maxRun < 0 || f.maxRun > engine.MaxRunningBound {
		return serverLimits{}, cli.Usage("--max-running %d: give 0 (unlimited) to %d", f.maxRun, engine.MaxRunningBound)
	}
	if f.nice < 0 || f.nice > 19 {
		return serverLimits{}, cli.Usage("--command-nice %d: give 0 (the server's own) to 19", f.nice)
	}
	if f.grace <= 0 {
		return serverLimits{}, cli.Usage("--shutdown-grace %s: use a positive duration such as 30s", f.grace)
	}
	if f.leaseTTL < 3*time.Second {
		return serverLimits{}, cli.Usage("--lease-ttl %s: use at least 3s", f.leaseTTL)
	}
	switch {
	case f.brkWindow < 10*time.Second:
		return serverLimits{}, cli.Usage("--breaker-window %s: use at least 10s (outcomes are counted in 10-second buckets)", f.brkWindow)
	case f.brkMin < 1 || f.brkMin > 10000:
		return serverLimits{}, cli.Usage("--breaker-min-outcomes %d: use 1 to 10000", f.brkMin)
	case !(f.brkRatio > 0 && f.brkRatio < 1):
		return serverLimits{}, cli.Usage("--breaker-ratio %v: use a failure ratio above 0 and below 1, such as 0.5", f.brkRatio)
	}
	retain, err := api.ParseRetain(f.retain)
	if err != nil {
		return serverLimits{}, cli.Usage("--retain %v", err)
	}
	logMax, err := parseSize(f.logMax)
	if err != nil || logMax < 4<<10 {
		return serverLimits{}, cli.Usage("--log-max %q: give a size of at least 4KiB, such as 1MiB or 256KiB", f.logMax)
	}
	return serverLimits{retain: retain, logMax: logMax}, nil
}

// serverExecutorToken returns the credential executors authenticate with,
// whatever the listen address (anyone on the host could otherwise register,
// heartbeat and post results); none without --listen.
func serverExecutorToken(f serverFlags, adminToken string) (string, error) {
	if f.listen == "" {
		return "", nil
	}
	tokenFile := f.execTokenFile
	if tokenFile == "" {
		tokenFile = defaultExecutorTokenFile(f.store)
	}
	return executorToken(os.Getenv("AX_EXECUTOR_TOKEN"), tokenFile, adminToken, f.store)
}

// engineConfig is the engine's configuration from the server's flags.
func engineConfig(f serverFlags, lim serverLimits, log *slog.Logger, reg *prometheus.Registry, onAlert func(engine.Alert)) engine.Config {
	return engine.Config{Breaker: breaker.Config{Window: f.brkWindow, MinSamples: f.brkMin, Threshold: f.brkRatio}, DispatchRate: f.rate, Holder: f.holder, Logger: log, LeaseTTL: f.leaseTTL, LeaseRenew: f.leaseTTL / 3,
		Grace: f.grace, MaxRunning: cmp.Or(f.maxRun, -1), Registerer: reg, NoTaskLabels: !f.taskLabels, Retain: lim.retain, LogMax: lim.logMax, OnAlert: onAlert}
}

// apiServer is what serveAPI assembles the API from.
type apiServer struct {
	f                      serverFlags
	auth                   serverAuth
	ln                     net.Listener
	self, token, execToken string
	lim                    serverLimits
	st                     *store.Store
	g                      *dag.Graph
	eng                    *engine.Engine
	rl                     *reload.Watcher
	reg                    *prometheus.Registry
	execs                  engine.Executors
	log                    *slog.Logger
	secrets                runner.Secrets
}

// serveAPI serves the admin API, the console and the executor endpoints on
// the bound listener, with HTTP tasks' results called back to it, and
// announces this server's URL while it is the primary; the returned
// function stops both.
func serveAPI(ctx context.Context, s apiServer) (stop func()) {
	// Executors report results asynchronously to this API.
	web := s.execs[defs.ExecHTTP].(*runner.Routed).WithCallback(s.self + api.ResultsPath).WithToken(s.execToken)
	s.execs[defs.ExecHTTP] = web
	cfg := api.Config{Store: s.st, Graph: s.g, Engine: s.eng, Reload: s.rl, Gather: s.reg, Registerer: s.reg, Token: s.token, ExecToken: s.execToken,
		WhoIs: func(ctx context.Context, address string) (string, error) {
			ans, err := web.Status(ctx, address, []string{"ax-who-is"})
			return ans.Boot, err
		},
		OpenReads: s.f.openReads, Self: s.self, Deliver: web.Deliver, Retain: s.lim.retain, Secrets: s.secrets}
	s.auth.config(&cfg, s.f.auth)
	mux := api.Handler(cfg)
	apiCtx, stopAPI := context.WithCancel(ctx)
	apiErr := make(chan error, 1)
	// Executors and browsers call the advertised URL: its host is a
	// name of this server for the door's Host and Origin rules.
	var hosts []string
	if u, err := url.Parse(s.self); err == nil && u.Host != "" {
		hosts = append(hosts, u.Host)
	}
	go func() { apiErr <- api.Serve(apiCtx, s.ln, mux, s.f.listen, hosts...) }()
	go announcePrimary(apiCtx, s.st, s.eng, s.self, s.log)
	s.log.Info("api_listening", "addr", s.f.listen, "console", "http://"+s.f.listen+"/", "sign_in_required", s.f.auth.signInRequired(s.token))
	return stopAPI
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

// advertiseURL returns the base URL executors are given for this server:
// --advertise-url, or http://LISTEN when --listen names a host. A --listen
// without one (0.0.0.0:8080, [::]:8080, :8080) is refused without
// --advertise-url: executors could not call it back.
func advertiseURL(listen, advertise string) (string, error) {
	if advertise != "" {
		u, err := url.Parse(advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return "", cli.Usage("--advertise-url %q: give the base URL executors reach this server at, such as http://10.0.0.5:8080", advertise)
		}
		return strings.TrimSuffix(advertise, "/"), nil
	}
	if listen == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", cli.Usage("--listen %q: give host:port, such as 127.0.0.1:8080", listen)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return "", cli.Usage("--listen %s listens on every address, so executors cannot be told where to call back: give --advertise-url, such as --advertise-url http://10.0.0.5:%s", listen, port)
	}
	return "http://" + listen, nil
}

// startTracing starts the OpenTelemetry tracer when the OTEL_* variables
// name an OTLP endpoint (nil, the default: runs are not traced). It links
// instances to their upstreams' runs through *eng, mixes st's installation
// id into its trace ids, and is flushed when ctx ends.
func startTracing(ctx context.Context, log *slog.Logger, st *store.Store, reg prometheus.Registerer, eng **engine.Engine) (engine.Observer, error) {
	if !tracing.Enabled(os.Getenv) {
		return nil, nil
	}
	inst, err := st.InstallationID(ctx, time.Now())
	if err != nil {
		return nil, cli.Fail(fmt.Errorf("tracing: %w", err))
	}
	tr, err := tracing.New(ctx, log, func(ctx context.Context, task string, logical time.Time) ([]engine.RunRef, error) {
		return (*eng).UpstreamRuns(ctx, task, logical)
	}, tracing.WithInstallation(inst), tracing.WithRegisterer(reg))
	if err != nil {
		return nil, cli.Usage("%v", err)
	}
	log.Info("tracing", "to", tracing.Redact(cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))))
	context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			log.Warn("traces_not_flushed", "err", err)
		}
	})
	return tr, nil
}

// parseSize reads a size in bytes: a number, or with KiB, MiB, KB or MB.
func parseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"KB", 1000}, {"MB", 1000 * 1000}, {"K", 1 << 10}, {"M", 1 << 20}, {"B", 1}} {
		if v, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	n, err := strconv.Atoi(t)
	if err != nil || n <= 0 || n > (1<<30)/mult {
		return 0, fmt.Errorf("%q: give a size such as 1MiB, 512KiB or 65536 (bytes)", s)
	}
	return n * mult, nil
}
