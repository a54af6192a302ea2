// Package executor is the SDK a Go service embeds to run ax tasks over HTTP
// . It registers task functions by name, serves the dispatch
// endpoint of protocol v1, registers itself with the scheduler and sends a
// heartbeat every 10 s, and runs each dispatch in a bounded worker pool:
//
//   - a full pool refuses the dispatch with a reason (503), which the
//     scheduler treats as "try another executor, or later", never as a
//     task failure;
//   - a ticket seen before gets the earlier result, never a second
//     execution; entries expire after the task's longest retry span plus
//     five minutes (the scheduler sends that span with the dispatch);
//   - the same task is refused (409) while it already runs here;
//   - the work runs under a context with the dispatch deadline, which a kill
//     request cancels, and receives the ticket as its idempotency key; work
//     killed or past its deadline before a worker takes it never starts.
//
// A dispatch with a callback URL is answered at once (202) and its result is
// delivered to the callback at least once, retried with backoff until the
// scheduler acknowledges it. A dispatch without one is answered with its
// result when the work ends (the synchronous form of the protocol); when
// its caller hangs up first, the work is cancelled.
package executor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/ax-sched/ax/httpguard"
	"github.com/ax-sched/ax/runner"
)

// Config tunes an Executor; zero fields mean the documented defaults.
type Config struct {
	// Address is the base URL at which the scheduler reaches this executor,
	// such as http://10.0.0.5:9090. Required to register.
	Address string
	// Scheduler is the base URL of ax server; empty means no registration
	// (the pipeline's http: URL points at this executor directly).
	Scheduler string
	// Schedulers are more base URLs of ax servers sharing one store (a
	// primary and its standbys), tried with Scheduler: registrations,
	// heartbeats and results go to whichever answers, following a server's
	// "primary": URL answer, and stay with it while it answers. Every
	// server stores results, so a result never waits for a failover.
	Schedulers []string
	// Core workers are always there; default 2 × CPUs. Max is the most
	// workers; default 2 × Core. Queue is how many dispatches wait for a
	// worker; default 300 (the article: 200 to 500).
	Core, Max, Queue int
	// Heartbeat is the interval of heartbeats; default 10 s.
	Heartbeat time.Duration
	// Token is the secret shared with the scheduler (its AX_EXECUTOR_TOKEN):
	// sent with registrations, heartbeats and results, only to URLs under
	// Scheduler (a dispatch's callback elsewhere never sees it), and
	// required on every dispatch and kill. Empty: none, either way, unless
	// TokenFile is set.
	Token string
	// TokenFile, when Token is empty, is the file that holds the token: ax
	// server's executor credential (its --executor-token-file, by default
	// executor.token beside its SQLite store), created by the server on its
	// first start, readable by its owner only. It is read when first needed
	// and until it can be: an executor that starts before its server
	// refuses dispatches (503) and retries its registration until the file
	// is there.
	TokenFile string
	// StateDir, when set, is a directory of this executor's own where it
	// keeps its ticket journal, so that a restart forgets no ticket: each
	// ticket is recorded (and synced to disk) when accepted, before its work
	// starts, and with its result before the result is reported. A restarted
	// executor answers status queries and repeated dispatches from it,
	// delivers the results its previous process could not, runs the work it
	// had accepted and not started, and reports work that started and never
	// finished as an interrupted failure (retried per the task's policy, never
	// run again silently). It keeps its boot id there too: the scheduler sees
	// the same executor, whose accepted work is not lost. Empty: tickets are
	// kept in memory only, and a restart loses them.
	StateDir string
	// Client sends registrations, heartbeats and results. Required.
	Client *http.Client
	// Logger; default discards.
	Logger *slog.Logger
	// Now reads the clock; default time.Now.
	Now func() time.Time
}

// Dispatch is protocol v1's request.
type Dispatch = runner.Dispatch

// Answer is the immediate answer to an asynchronous dispatch.
type Answer struct {
	Accepted bool           `json:"accepted"`
	Reason   string         `json:"reason,omitempty"`
	Result   *runner.Report `json:"result,omitempty"` // for a ticket that ran already
	// Boot identifies this executor process (as in its registration): the
	// scheduler notices a restart that lost the accepted work.
	Boot string `json:"boot,omitempty"`
}

// Executor runs registered task functions for the scheduler. It is safe for
// concurrent use; serve Handler and run Run.
type Executor struct {
	cfg   Config
	log   *slog.Logger
	funcs map[string]runner.Func

	queue   chan *job
	stopped chan struct{} // closed when Run returns: workers leave, dispatches are refused
	mu      sync.Mutex
	workers int
	active  int              // workers running a job
	refused map[string]int64 // dispatches refused, by reason (see metrics)
	tickets map[string]*job  // by ticket, until it expires
	running map[string]*job  // by task name: the re-entrancy guard
	outbox  chan *job
	boot    string   // this process's id, sent with registrations: a new one tells the scheduler the earlier work is gone
	scheds  []string // Scheduler and Schedulers, without trailing slashes
	prefer  string   // the scheduler that answered last
	jr      *journal // the ticket journal of Config.StateDir, or nil
	tokMu   sync.Mutex
	tok     string // Config.Token, or Config.TokenFile's once read
}

type job struct {
	d       Dispatch
	ctx     context.Context
	cancel  context.CancelCauseFunc
	done    chan struct{}
	report  runner.Report
	expires time.Time
	jstate  string // the ticket's last journal line (guarded by the journal's mutex)
}

// DefaultTicketTTL is used when a dispatch does not say how long to keep its ticket.
const DefaultTicketTTL = 30 * time.Minute

// New returns an executor for funcs, by task name (the name the pipeline's
// task has; the scheduler sends it).
func New(cfg Config, funcs map[string]runner.Func) (*Executor, error) {
	if cfg.Core == 0 {
		cfg.Core = 2 * runtime.NumCPU()
	}
	if cfg.Max == 0 {
		cfg.Max = 2 * cfg.Core
	}
	if cfg.Queue == 0 {
		cfg.Queue = 300
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.Core < 1 || cfg.Max < cfg.Core:
		return nil, fmt.Errorf("executor: Core %d and Max %d: want 1 <= Core <= Max", cfg.Core, cfg.Max)
	case cfg.Queue < 1:
		return nil, fmt.Errorf("executor: Queue %d: want at least 1", cfg.Queue)
	case cfg.Client == nil:
		return nil, errors.New("executor: Client is required")
	case (cfg.Scheduler != "" || len(cfg.Schedulers) > 0) && cfg.Address == "":
		return nil, errors.New("executor: Address is required to register with the scheduler")
	case len(funcs) == 0:
		return nil, errors.New("executor: no task functions")
	}
	var scheds []string
	for _, u := range append([]string{cfg.Scheduler}, cfg.Schedulers...) {
		if u = strings.TrimRight(u, "/"); u != "" && !slices.Contains(scheds, u) {
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				return nil, fmt.Errorf("executor: scheduler URL %q: give a base URL such as http://10.0.0.5:8080", u)
			}
			scheds = append(scheds, u)
		}
	}
	x := &Executor{scheds: scheds, cfg: cfg, log: cfg.Logger, funcs: funcs, queue: make(chan *job, cfg.Queue), stopped: make(chan struct{}),
		tickets: map[string]*job{}, running: map[string]*job{}, refused: map[string]int64{}, boot: newBoot()}
	var restored []*jticket
	if cfg.StateDir != "" {
		var err error
		if x.jr, restored, x.boot, err = openJournal(cfg.StateDir, cfg.Now()); err != nil {
			return nil, err
		}
		for _, p := range x.jr.problems {
			x.log.Warn("journal_line_unreadable", "problem", p)
		}
	}
	x.outbox = make(chan *job, cfg.Queue+cfg.Max+len(restored))
	if err := x.restore(restored); err != nil {
		x.jr.close()
		return nil, err
	}
	return x, nil
}

// interrupted is the error of a ticket whose work started and never
// finished because the executor process ended.
const interrupted = "interrupted: the executor process ended while this work ran (it restarted on its state dir); the work may have taken effect in part"

// restore takes up the tickets the journal held: accepted and never started
// → queued again; started and never finished → done with an interrupted
// failure; done and not acknowledged → delivered again.
func (x *Executor) restore(ts []*jticket) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, t := range ts {
		if t.state == jAccepted && len(x.queue) < cap(x.queue) && x.running[t.d.Task] == nil {
			j := x.newJob(t.d, t.expires)
			j.jstate = jAccepted
			x.enqueue(j)
			x.log.Info("ticket_requeued", "task", t.d.Task, "ticket", t.d.Ticket)
			continue
		}
		j := &job{d: t.d, done: make(chan struct{}), expires: t.expires, jstate: t.state, ctx: context.Background(), cancel: func(error) {}}
		close(j.done)
		x.tickets[t.d.Ticket] = j
		switch t.state {
		case jDone, jAcked:
			j.report = *t.report
		default: // started, or accepted with no room to run it again
			j.report = runner.Report{Ticket: t.d.Ticket, Status: runner.StatusFailed, Error: interrupted, InstanceID: t.d.InstanceID}
			if t.state == jAccepted {
				j.report.Error = "the executor restarted with more accepted work than its queue holds: this work never started"
			}
			if err := x.jr.append(jentry{Ticket: t.d.Ticket, State: jDone, Report: &j.report}, true, j); err != nil {
				return fmt.Errorf("executor: state dir %s: %w", x.cfg.StateDir, err)
			}
			x.log.Warn("ticket_interrupted", "task", t.d.Task, "ticket", t.d.Ticket)
		}
		if j.jstate == jDone && t.d.Callback != "" {
			x.outbox <- j
		}
	}
	return nil
}

// Close releases the state dir (Config.StateDir); call it once Run has
// returned and no request is served any more.
func (x *Executor) Close() error {
	if x.jr == nil {
		return nil
	}
	return x.jr.close()
}

// Tasks returns the task names this executor serves.
func (x *Executor) Tasks() []string {
	out := make([]string, 0, len(x.funcs))
	for n := range x.funcs {
		out = append(out, n)
	}
	return out
}

// maxDispatch bounds a dispatch body.
const maxDispatch = 1 << 20

// Handler serves POST /dispatch, POST /kill, POST /status and GET /healthz. With
// Config.Token set, dispatches and kills must carry it (the scheduler sends
// its AX_EXECUTOR_TOKEN): nobody else can make this executor run a task.
// It stands behind the same door as ax server (package httpguard): dispatches
// and kills need Content-Type: application/json, a foreign Origin is
// refused, and on a loopback address a foreign Host too (DNS rebinding).
func (x *Executor) Handler() http.Handler {
	return httpguard.Guard(x.doorConfig(), x.mux())
}

func (x *Executor) mux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /dispatch", x.fromScheduler(x.serveDispatch))
	mux.HandleFunc("POST /kill", x.fromScheduler(x.serveKill))
	mux.HandleFunc("POST /status", x.fromScheduler(x.schedulersOnly(x.serveStatus)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /metrics", x.serveMetrics)
	return mux
}

func (x *Executor) doorConfig() httpguard.Config {
	c := httpguard.Config{}
	if u, err := url.Parse(x.cfg.Address); err == nil {
		c.Listen = u.Host
	}
	return c
}

// Serve serves Handler on ln until ctx ends, with the door's server
// timeouts and connection caps (idle or trickling clients cannot exhaust
// the executor's descriptors); then it shuts down, letting requests in
// flight finish for up to 10 s.
func (x *Executor) Serve(ctx context.Context, ln net.Listener) error {
	srv := httpguard.NewServer(x.doorConfig(), x.mux())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(shutdown)
		<-errc
		return err
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// token returns the secret shared with the scheduler: Config.Token, or the
// contents of Config.TokenFile once it can be read ("" when neither is set).
func (x *Executor) token() (string, error) {
	if x.cfg.Token != "" || x.cfg.TokenFile == "" {
		return x.cfg.Token, nil
	}
	x.tokMu.Lock()
	defer x.tokMu.Unlock()
	if x.tok == "" {
		tok, err := runner.ReadTokenFile(x.cfg.TokenFile)
		if err != nil {
			return "", err
		}
		x.tok = tok
	}
	return x.tok, nil
}

// fromScheduler requires the shared token on a request, when one is set.
func (x *Executor) fromScheduler(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, err := x.token()
		if err != nil {
			refuse(w, http.StatusServiceUnavailable, "this executor cannot authenticate its scheduler yet (%v): try later", err)
			return
		}
		if !runner.BearerOK(r, tok) {
			refuse(w, http.StatusUnauthorized, "missing or wrong bearer token: the scheduler sends its AX_EXECUTOR_TOKEN")
			return
		}
		next(w, r)
	}
}

// schedulersOnly answers, when no token authenticates the scheduler, only
// callers at the address of a configured scheduler (the IPs its host name
// resolves to), or on the loopback interface when none is configured: a
// status answer carries results and their output, which nobody else may
// read. A refusal is logged (status_refused) and answered 403 with the
// reason; nothing is answered about any ticket.
func (x *Executor) schedulersOnly(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if tok, _ := x.token(); tok != "" { // fromScheduler checked it
			next(w, r)
			return
		}
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		ip := net.ParseIP(host)
		if err != nil || ip == nil {
			x.log.Warn("status_refused", "from", r.RemoteAddr, "reason", "no caller address")
			refuse(w, http.StatusForbidden, "status query from %q: no caller address to check against the configured schedulers", r.RemoteAddr)
			return
		}
		if x.fromSchedulerAddr(r.Context(), ip) {
			next(w, r)
			return
		}
		x.log.Warn("status_refused", "from", r.RemoteAddr, "reason", "not a configured scheduler")
		refuse(w, http.StatusForbidden, "status query from %s, which is not a configured scheduler (%s): give the executor Config.Token (AX_EXECUTOR_TOKEN) to authenticate the scheduler wherever it calls from",
			ip, strings.Join(x.scheds, ", "))
	}
}

// fromSchedulerAddr reports whether ip is the address of a configured
// scheduler, or a loopback address when none is configured.
func (x *Executor) fromSchedulerAddr(ctx context.Context, ip net.IP) bool {
	if len(x.scheds) == 0 {
		return ip.IsLoopback()
	}
	for _, s := range x.scheds {
		u, err := url.Parse(s)
		if err != nil {
			continue
		}
		h := u.Hostname()
		if a := net.ParseIP(h); a != nil {
			if a.Equal(ip) || (a.IsLoopback() && ip.IsLoopback()) || (a.IsUnspecified() && ip.IsLoopback()) {
				return true
			}
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		addrs, err := net.DefaultResolver.LookupIPAddr(lctx, h)
		cancel()
		if err != nil {
			x.log.Warn("status_scheduler_unresolved", "scheduler", s, "err", err)
			continue
		}
		for _, a := range addrs {
			if a.IP.Equal(ip) || (a.IP.IsLoopback() && ip.IsLoopback()) {
				return true
			}
		}
	}
	return false
}

// isHTTPURL reports whether s is an absolute http or https URL: the only
// kind a result can be posted to.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func refuse(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, Answer{Reason: fmt.Sprintf(format, args...)})
}

func (x *Executor) serveDispatch(w http.ResponseWriter, r *http.Request) {
	var d Dispatch
	if err := runner.DecodeStrict(r, &d, maxDispatch); err != nil {
		refuse(w, http.StatusBadRequest, "malformed dispatch: %v", err)
		return
	}
	switch {
	case d.Version != runner.ProtocolVersion:
		refuse(w, http.StatusBadRequest, "protocol version %d: this executor speaks %d", d.Version, runner.ProtocolVersion)
		return
	case d.Ticket == "" || d.Task == "":
		refuse(w, http.StatusBadRequest, "malformed dispatch: ticket and task are required")
		return
	case d.Callback != "" && !isHTTPURL(d.Callback):
		refuse(w, http.StatusBadRequest, "malformed dispatch: callback %q is not an http:// or https:// URL: give the scheduler's result URL", d.Callback)
		return
	case x.funcs[d.Task] == nil:
		refuse(w, http.StatusNotFound, "task %q is not served here (serving %v)", d.Task, x.Tasks())
		return
	}
	j, prior, code, reason := x.admit(d)
	if code != 0 {
		refuse(w, code, "%s", reason)
		return
	}
	if d.Callback != "" {
		ans := Answer{Accepted: true, Boot: x.boot}
		if prior {
			select {
			case <-j.done:
				rep := j.report
				ans.Result = &rep
			default: // still running: the result goes to the callback
			}
		}
		writeJSON(w, http.StatusAccepted, ans)
		return
	}
	select { // synchronous form: answer with the result
	case <-j.done:
		writeJSON(w, http.StatusOK, j.report)
	case <-r.Context().Done():
		// The caller hung up: the scheduler ended the attempt on its side
		// (a kill, a shutdown that gives it back, its deadline, a broken
		// connection it fails and retries) and nobody waits for this
		// result. The work stops rather than run on beside the next
		// attempt. A repeated dispatch of the ticket does not own its work.
		if !prior {
			j.cancel(errHungUp)
		}
	}
}

// errHungUp is the cause of work stopped because its synchronous caller hung up.
var errHungUp = errors.New("stopped: the scheduler hung up before the result (synchronous form)")

// admit finds the ticket's earlier job or queues a new one. It returns a
// non-zero HTTP status with a reason when the dispatch is refused.
func (x *Executor) admit(d Dispatch) (j *job, prior bool, code int, reason string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.cfg.Now()
	x.expire(now)
	if j := x.tickets[d.Ticket]; j != nil {
		return j, true, 0, ""
	}
	select {
	case <-x.stopped:
		x.refused[refusedStopping]++
		return nil, false, http.StatusServiceUnavailable, "this executor is shutting down"
	default:
	}
	if r := x.running[d.Task]; r != nil {
		x.refused[refusedRunning]++
		return nil, false, http.StatusConflict, fmt.Sprintf("task %s is already running here (ticket %s): refused to avoid re-entry", d.Task, r.d.Ticket)
	}
	if len(x.queue) == cap(x.queue) { // only admit and restore send, both under mu: the send below cannot block
		x.refused[refusedFull]++
		return nil, false, http.StatusServiceUnavailable, fmt.Sprintf("worker pool full (%d workers busy, %d of %d queued): try another executor or later", x.workers, len(x.queue), cap(x.queue))
	}
	ttl := time.Duration(d.TicketTTLMS) * time.Millisecond
	if ttl <= 0 {
		ttl = DefaultTicketTTL
	}
	j = x.newJob(d, now.Add(ttl))
	if x.jr != nil {
		// Durable before the scheduler hears it was accepted.
		if err := x.jr.append(jentry{Ticket: d.Ticket, State: jAccepted, Dispatch: &d, Expires: j.expires}, true, j); err != nil {
			j.cancel(nil)
			x.log.Error("journal_failed", "ticket", d.Ticket, "err", err)
			return nil, false, http.StatusServiceUnavailable, fmt.Sprintf("cannot record the ticket in the state dir (%v): try another executor or later", err)
		}
	}
	x.enqueue(j)
	return j, false, 0, ""
}

// newJob makes the job of a dispatch, its context bound by the deadline.
func (x *Executor) newJob(d Dispatch, expires time.Time) *job {
	ctx, cancel := context.WithCancelCause(context.Background())
	if !d.Deadline.IsZero() {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadline(ctx, d.Deadline)
		c := cancel
		cancel = func(err error) { c(err); stop() }
	}
	return &job{d: d, ctx: ctx, cancel: cancel, done: make(chan struct{}), expires: expires}
}

// enqueue queues j for a worker, starting one when needed. Called with mu
// held and room in the queue.
func (x *Executor) enqueue(j *job) {
	x.queue <- j
	x.tickets[j.d.Ticket] = j
	x.running[j.d.Task] = j
	if x.workers < x.cfg.Core || (len(x.queue) > 0 && x.workers < x.cfg.Max) {
		x.workers++
		go x.work()
	}
}

// expire forgets tickets past their time. Called with mu held.
func (x *Executor) expire(now time.Time) {
	for t, j := range x.tickets {
		select {
		case <-j.done:
			if now.After(j.expires) {
				delete(x.tickets, t)
			}
		default:
		}
	}
	if x.jr != nil {
		if err := x.jr.compact(x.tickets); err != nil {
			x.log.Error("journal_compact_failed", "dir", x.cfg.StateDir, "err", err)
		}
	}
}

// work runs queued jobs; a worker beyond Core leaves when the queue is empty.
func (x *Executor) work() {
	idle := time.NewTimer(time.Minute)
	defer idle.Stop()
	for {
		select {
		case <-x.stopped:
			return
		case j := <-x.queue:
			x.mu.Lock()
			x.active++
			x.mu.Unlock()
			x.run(j)
			x.mu.Lock()
			x.active--
			x.mu.Unlock()
		case <-idle.C:
			x.mu.Lock()
			if x.workers > x.cfg.Core {
				x.workers--
				x.mu.Unlock()
				return
			}
			x.mu.Unlock()
		}
		idle.Reset(time.Minute)
	}
}

func (x *Executor) run(j *job) {
	start := x.cfg.Now()
	a := runner.Attempt{Pipeline: j.d.Pipeline, Task: j.d.Task, InstanceID: j.d.InstanceID, Ticket: j.d.Ticket,
		LogicalTime: j.d.LogicalTime, Deadline: j.d.Deadline, Params: j.d.Params, Env: j.d.Env, SecretEnv: j.d.SecretEnv, TraceParent: j.d.TraceParent}
	a, takeOutputs := a.WithOutputs()
	out := runner.NewOutput(runner.MaxReportOutput)
	out.Mask(a.SecretValues()...) // the task's secrets never leave in its report
	// A job killed, or past its deadline, before a worker took it (it
	// waited in the queue, or across a restart on the state dir) never
	// starts: the scheduler has already failed that attempt and may be
	// running its retry.
	started := j.ctx.Err() == nil
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		if !started {
			return nil
		}
		if x.jr != nil {
			// Durable before the work can have any effect: a restart tells
			// work that never started from work that may have.
			if err := x.jr.append(jentry{Ticket: j.d.Ticket, State: jStarted}, true, j); err != nil {
				return fmt.Errorf("not started: cannot record its start in the executor's state dir: %w", err)
			}
		}
		return x.funcs[j.d.Task](runner.WithOutput(withTraceParent(j.ctx, j.d.TraceParent), out), a)
	}()
	rep := runner.Report{Ticket: j.d.Ticket, Status: runner.StatusSuccess, DurationMS: x.cfg.Now().Sub(start).Milliseconds(), InstanceID: j.d.InstanceID}
	// What the function logged through runner.Logger(ctx) goes back with
	// the result, its tail within the scheduler's limit for a report.
	if data, _, dropped := out.Take(true); len(data) > 0 || dropped > 0 {
		rep.Log, rep.LogDropped = bytes.Clone(data), dropped
	}
	switch {
	case errors.Is(context.Cause(j.ctx), runner.ErrKilled):
		rep.Status, rep.Error = runner.StatusFailed, "killed"
	case errors.Is(context.Cause(j.ctx), errHungUp):
		rep.Status, rep.Error = runner.StatusFailed, errHungUp.Error()
	case errors.Is(j.ctx.Err(), context.DeadlineExceeded):
		rep.Status, rep.Error = runner.StatusFailed, "deadline exceeded"
	case err != nil:
		rep.Status, rep.Error, rep.Permanent = runner.StatusFailed, err.Error(), errors.Is(err, runner.ErrPermanent)
	}
	if !started {
		rep.Error += " before the work started: it never ran"
	}
	if outs, err := takeOutputs(); rep.Status == runner.StatusSuccess && err != nil {
		rep.Status, rep.Error = runner.StatusFailed, err.Error()
	} else if rep.Status == runner.StatusSuccess {
		m := runner.MaskReport(runner.Report{Status: rep.Status, Outputs: outs}, a.SecretValues()...)
		rep.Status, rep.Outputs = m.Status, m.Outputs
		if m.Error != "" {
			rep.Error = m.Error
		}
	}
	rep.Error = out.MaskString(rep.Error)
	j.cancel(nil)
	x.mu.Lock()
	j.report = rep
	if x.running[j.d.Task] == j {
		delete(x.running, j.d.Task)
	}
	x.mu.Unlock()
	if x.jr != nil {
		// Durable before anyone hears the result.
		if err := x.jr.append(jentry{Ticket: j.d.Ticket, State: jDone, Report: &rep}, true, j); err != nil {
			x.log.Error("journal_failed", "ticket", j.d.Ticket, "err", err)
		}
	}
	close(j.done)
	x.log.Info("task_done", "task", j.d.Task, "ticket", j.d.Ticket, "status", string(rep.Status))
	if j.d.Callback != "" {
		x.outbox <- j
	}
}

func (x *Executor) serveKill(w http.ResponseWriter, r *http.Request) {
	var k struct {
		Ticket string `json:"ticket"`
	}
	if err := runner.DecodeStrict(r, &k, maxDispatch); err != nil || k.Ticket == "" {
		refuse(w, http.StatusBadRequest, "malformed kill: want {\"ticket\": \"…\"}")
		return
	}
	x.mu.Lock()
	j := x.tickets[k.Ticket]
	x.mu.Unlock()
	if j == nil {
		refuse(w, http.StatusNotFound, "ticket %s is not known here", k.Ticket)
		return
	}
	j.cancel(runner.ErrKilled)
	writeJSON(w, http.StatusOK, Answer{Accepted: true})
}

// Run registers with the scheduler (when one is configured), sends
// heartbeats, and delivers results until ctx ends. When it returns, the
// workers leave once their job is done and new dispatches are refused (503).
func (x *Executor) Run(ctx context.Context) error {
	defer close(x.stopped) // after the deliveries end (deferred below): the workers leave
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); x.deliver(ctx) }()
	defer wg.Wait()
	if len(x.scheds) == 0 {
		<-ctx.Done()
		return nil
	}
	registered := false
	// Until registered, and after a heartbeat that failed, try again soon
	// (1 s, doubling up to the heartbeat interval): the scheduler may simply
	// be starting after the executor, or its store failing for a moment.
	retry := time.Second
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		path, body := "/api/v1/executors/heartbeat", map[string]any{"address": x.cfg.Address, "pool": x.Pool()}
		if !registered {
			path, body = "/api/v1/executors/register", map[string]any{"address": x.cfg.Address, "protocol": "http", "tasks": x.Tasks(), "boot": x.boot}
		}
		code, err := x.toScheduler(ctx, path, body)
		failed := err != nil || code/100 == 5
		switch {
		case failed:
			x.log.Warn("scheduler_unreachable", "path", path, "code", code, "err", err)
		case code == http.StatusNotFound && registered: // the scheduler forgot us: register again
			registered = false
			t.Reset(0)
			continue
		case code/100 == 2:
			registered = true
		default:
			x.log.Error("scheduler_refused", "path", path, "code", code)
		}
		if registered && !failed {
			retry = time.Second
			t.Reset(x.cfg.Heartbeat)
			continue
		}
		// A heartbeat the scheduler did not take (unreachable, or it could
		// not store it) is sent again as soon as a registration would: two
		// missed in a row at the full interval would leave this executor
		// silent for 30 s, excluded from new work.
		t.Reset(min(retry, x.cfg.Heartbeat))
		retry = min(retry*2, x.cfg.Heartbeat)
	}
}

// deliver posts results to their callbacks until acknowledged (2xx) or
// rejected as malformed (4xx), retrying with backoff: at least once.
func (x *Executor) deliver(ctx context.Context) {
	for {
		var j *job
		select {
		case <-ctx.Done():
			return
		case j = <-x.outbox:
		}
		wait := 100 * time.Millisecond
		for {
			code, err := x.post(ctx, j.d.Callback, j.report)
			if (err != nil || code/100 == 5) && len(x.scheds) > 0 {
				// The server that dispatched it is gone or cannot store it: any
				// other server stores it for the primary.
				code, err = x.toScheduler(ctx, "/api/v1/results", j.report)
			}
			if err == nil && code/100 == 2 {
				x.acked(j)
				break
			}
			if err == nil && code/100 == 4 {
				x.log.Error("result_rejected", "task", j.d.Task, "ticket", j.d.Ticket, "code", code)
				x.acked(j)
				break
			}
			x.log.Warn("result_not_delivered", "task", j.d.Task, "ticket", j.d.Ticket, "code", code, "err", err, "retry_in", wait.String())
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			wait = min(2*wait, 30*time.Second)
		}
	}
}

// acked records that a scheduler took j's report: a restart does not
// deliver it again (not synced: at worst it does, and the scheduler ignores
// a report it has).
func (x *Executor) acked(j *job) {
	if x.jr != nil {
		if err := x.jr.append(jentry{Ticket: j.d.Ticket, State: jAcked}, false, j); err != nil {
			x.log.Warn("journal_failed", "ticket", j.d.Ticket, "err", err)
		}
	}
}

// toScheduler POSTs body to path on the scheduler that answered last, then
// on the others, following a "primary": URL in an answer, until one answers
// with less than 500. It returns the last answer's code, or the last error.
func (x *Executor) toScheduler(ctx context.Context, path string, body any) (int, error) {
	x.mu.Lock()
	queue := slices.Clone(x.scheds)
	if x.prefer != "" {
		queue = append([]string{x.prefer}, queue...)
	}
	x.mu.Unlock()
	tried := map[string]bool{}
	code, err := 0, error(nil)
	for len(queue) > 0 {
		base := queue[0]
		queue = queue[1:]
		if tried[base] {
			continue
		}
		tried[base] = true
		var answer []byte
		code, answer, err = x.postRead(ctx, base+path, body)
		if err == nil && code/100 != 5 {
			x.mu.Lock()
			x.prefer = base
			x.mu.Unlock()
			return code, nil
		}
		var hint struct {
			Primary string `json:"primary"`
		}
		if json.Unmarshal(answer, &hint) == nil && strings.HasPrefix(hint.Primary, "http") {
			queue = append([]string{strings.TrimRight(hint.Primary, "/")}, queue...) // a standby's "primary is at …"
		}
	}
	return code, err
}

func (x *Executor) post(ctx context.Context, url string, body any) (int, error) {
	code, _, err := x.postRead(ctx, url, body)
	return code, err
}

// postRead POSTs body as JSON to url and returns the answer's code and
// (the first 64 KiB of) its body. The token goes only to scheduler URLs.
func (x *Executor) postRead(ctx context.Context, url string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Ax-Protocol", fmt.Sprint(runner.ProtocolVersion))
	if x.isScheduler(url) {
		tok, err := x.token()
		if err != nil {
			return 0, nil, err
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	resp, err := x.cfg.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, answer, nil
}

// isScheduler reports whether url is under one of the configured scheduler
// URLs: only they are sent the token (a dispatch's callback elsewhere, or a
// "primary" hint, never sees it).
func (x *Executor) isScheduler(url string) bool {
	for _, s := range x.scheds {
		if strings.HasPrefix(url, s+"/") {
			return true
		}
	}
	return false
}

// newBoot returns a random id for this executor process.
func newBoot() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

// maxStatusTickets bounds the tickets of one status query.
const maxStatusTickets = 10000

// serveStatus answers a scheduler that took over and asks about the tickets
// it inherited, from the ticket cache: done (with the result),
// running, or unknown (never started here, or forgotten after its TTL).
func (x *Executor) serveStatus(w http.ResponseWriter, r *http.Request) {
	var q runner.StatusQuery
	if err := runner.DecodeStrict(r, &q, maxDispatch); err != nil || len(q.Tickets) == 0 {
		refuse(w, http.StatusBadRequest, "malformed status query: want {\"tickets\": [\"…\"]}")
		return
	}
	if len(q.Tickets) > maxStatusTickets {
		refuse(w, http.StatusRequestEntityTooLarge, "status query for %d tickets: at most %d at once", len(q.Tickets), maxStatusTickets)
		return
	}
	ans := runner.StatusAnswer{Boot: x.boot, Tickets: make(map[string]runner.TicketStatus, len(q.Tickets))}
	x.mu.Lock()
	for _, t := range q.Tickets {
		j := x.tickets[t]
		if j == nil {
			ans.Tickets[t] = runner.TicketStatus{State: runner.TicketUnknown}
			continue
		}
		select {
		case <-j.done:
			rep := j.report
			ans.Tickets[t] = runner.TicketStatus{State: runner.TicketDone, Result: &rep}
		default:
			ans.Tickets[t] = runner.TicketStatus{State: runner.TicketRunning}
		}
	}
	x.mu.Unlock()
	writeJSON(w, http.StatusOK, ans)
}

// withTraceParent is ctx with the attempt's span (a W3C traceparent) as
// its remote parent: the spans a function starts from it join the run's
// trace. A malformed traceparent is ignored: they start a fresh trace.
func withTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}
