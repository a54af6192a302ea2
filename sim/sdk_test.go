package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/runner/executor"
)

// The HTTP side of the world: HTTP tasks run on executors of the real SDK
// (runner/executor), two processes at the addresses http://x1 and
// http://x2, which register with the scheduler and heartbeat; the engines
// dispatch to them through runner.Routed in the asynchronous form, and
// results come back to the scheduler's results endpoint, all over the
// world's memnet. The scheduler's endpoints are package api's (server
// below).

// simToken is the secret the engines and the executors share: the SDK
// answers status queries only to a caller that shows it (the memnet has no
// loopback address to trust).
const simToken = "sim-token"

// schedulerURL is where executors register, heartbeat and post results.
const schedulerURL = "http://ax"

// sdkHosts are the executors' addresses.
var sdkHosts = []string{"x1", "x2"}

// sdkProc is one process of an SDK executor.
type sdkProc struct {
	host    string
	name    string // host#n: the n-th process at that address
	journal bool   // it keeps a ticket journal: a restart forgets no ticket
	x       *executor.Executor
	cancel  context.CancelFunc
	dead    chan struct{} // closed when the process is killed: its work never returns
	done    sync.WaitGroup
}

// rogueHost is the address of an executor whose token was revoked (one
// world in three, drawn apart): it sends a token the scheduler no longer
// takes, so it never registers, never runs a dispatch, and a result it
// forges never lands (I8).
const rogueHost = "x9"

// revokedToken is the rogue executor's token.
const revokedToken = "revoked-token"

// startSDK starts a process of the executor at host; with a journal, on the
// state directory its earlier processes used.
func (w *world) startSDK(host string, journal bool) {
	token := simToken
	if host == rogueHost {
		token = revokedToken
	}
	w.sdkSeq++
	p := &sdkProc{host: host, name: fmt.Sprintf("%s#%d", host, w.sdkSeq), journal: journal, dead: make(chan struct{})}
	funcs := map[string]runner.Func{}
	for name := range w.httpTasks() {
		funcs[name] = func(ctx context.Context, a runner.Attempt) error { return p.work(ctx, w, a) }
	}
	cfg := executor.Config{Address: "http://" + host, Scheduler: schedulerURL, Core: 8, Max: 8, Queue: 64, Token: token,
		Client: &http.Client{Transport: &lossy{w: w, next: w.net.client(host).Transport}}}
	if journal {
		cfg.StateDir = filepath.Join(w.sdkDir, host)
	}
	x, err := executor.New(cfg, funcs)
	if err != nil {
		w.violate("setup", "executor.New(%s): %v", host, err)
		return
	}
	p.x = x
	ln := w.net.listen(host)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.done.Add(2)
	go func() { defer p.done.Done(); _ = x.Run(ctx) }()
	go func() { defer p.done.Done(); _ = x.Serve(ctx, ln) }()
	w.sdks[host] = p
	w.logf("start executor %s (journal %v)", p.name, journal)
}

// work is every task function of the process: an attempt as perform draws it.
func (p *sdkProc) work(ctx context.Context, w *world, a runner.Attempt) error {
	res := w.perform(ctx, p.name, p.dead, a, p)
	switch {
	case res.Status == runner.StatusSuccess:
		return nil
	case res.Permanent:
		return fmt.Errorf("%s: %w", res.Error, runner.ErrPermanent)
	default:
		return errors.New(res.Error)
	}
}

// killSDK ends the process at host as kill -9 does: its connections break,
// its work never returns, its journal keeps what it synced.
func (w *world) killSDK(host string) *sdkProc {
	p := w.sdks[host]
	if p == nil {
		return nil
	}
	delete(w.sdks, host)
	close(p.dead)
	p.cancel()
	p.x.Close() // the journal's file and lock go with the process; nothing more is written to it
	w.net.drop(host)
	w.dead = append(w.dead, p)
	return p
}

// sdkFault is one executor fault, drawn from xrng (not the driver's rng, so
// that the driver's steps of a seed stay those of a world without HTTP
// executors): a crash and restart (on its journal or, without one, as a new
// boot: the scheduler fails over what the old one ran), or a silence
// longer than runner.Silence (cut off the network: no heartbeats, no
// results; the sweep declares it lost and fails its attempts over).
func (w *world) sdkFault() {
	if len(w.sdks) == 0 && len(w.dead) == 0 || w.xrng.IntN(12) != 0 {
		return
	}
	host := sdkHosts[w.xrng.IntN(len(sdkHosts))]
	switch w.xrng.IntN(3) {
	case 0, 1:
		journal := w.xrng.IntN(2) == 0
		if p := w.killSDK(host); p != nil {
			w.logf("kill executor %s", p.name)
			w.stats.ExecutorCrashes++
		}
		d := time.Duration(w.xrng.IntN(20000)) * time.Millisecond
		w.advance(d)
		w.startSDK(host, journal)
	default:
		d := runner.Silence + time.Duration(5000+w.xrng.IntN(30000))*time.Millisecond
		w.logf("silence executor %s for %s", host, d)
		w.stats.ExecutorSilences++
		w.net.setCut(host, true)
		w.advance(d)
		w.net.setCut(host, false)
	}
}

// sdkOutage runs pass while every scheduler is down: the scheduler's
// endpoints are unreachable (the executors keep their results and deliver
// them later); through an outage of more than an hour the executors go down
// too, and come back with the schedulers (the site was down; a process
// that keeps its journal resumes its tickets). Ten-second heartbeats
// through a day-long jump would cost the seed more than the rest of it.
func (w *world) sdkOutage(d time.Duration, pass func()) {
	if w.sdkDir == "" {
		pass()
		return
	}
	long := d > time.Hour
	if long {
		for _, h := range sdkHosts {
			w.killSDK(h)
		}
		w.killSDK(rogueHost)
	}
	w.net.setCut("ax", true)
	pass()
	w.net.setCut("ax", false)
	if long {
		for _, h := range sdkHosts {
			w.startSDK(h, w.xrng.IntN(2) == 0)
		}
		if w.rogue {
			w.startSDK(rogueHost, false)
		}
	}
}

// httpTasks returns the HTTP tasks of the world by task name (the name the
// SDK registers and a dispatch carries) with their ids.
func (w *world) httpTasks() map[string][]string {
	out := map[string][]string{}
	for _, t := range w.g.Order() {
		if t.Executor.Kind == defs.ExecHTTP {
			out[t.Name] = append(out[t.Name], t.ID())
		}
	}
	return out
}

// routed is an engine's HTTP executor: runner.Routed on the memnet, routing
// by the registry in the store, asynchronous (results by callback), or in
// the synchronous form (the result in the dispatch's answer) in the worlds
// drawn so (w.syncHTTP).
func (w *world) routed(n *node) *runner.Routed {
	r := runner.NewRouted(runner.RoutedConfig{
		Client: w.net.client(n.name),
		URL:    func(runner.Attempt) (string, error) { return "http://" + sdkHosts[0] + "/dispatch", nil },
		Registry: func(ctx context.Context, task string) ([]runner.Endpoint, error) {
			exs, err := w.st.Executors(ctx, task)
			if err != nil {
				return nil, err
			}
			eps := make([]runner.Endpoint, len(exs))
			for i, x := range exs {
				eps[i] = runner.Endpoint{Address: x.Address, LastHeartbeat: x.LastHeartbeat}
			}
			return eps, nil
		},
		Now: n.now,
	}).WithToken(simToken)
	if w.syncHTTP {
		return r
	}
	return r.WithCallback(schedulerURL + "/api/v1/results")
}

// startHTTP brings up the HTTP side when the world has HTTP tasks: the
// scheduler's endpoints and one process per executor address.
func (w *world) startHTTP() {
	w.net = newMemnet()
	w.sdks = map[string]*sdkProc{}
	if len(w.httpTasks()) == 0 {
		return
	}
	w.sdkDir = filepath.Join(w.dir(), "executors")
	if err := os.MkdirAll(w.sdkDir, 0o700); err != nil {
		w.violate("setup", "executors' state dir: %v", err)
		return
	}
	srv := &http.Server{Handler: w.server()}
	ln := w.net.listen("ax")
	w.wg.Add(1)
	go func() { defer w.wg.Done(); _ = srv.Serve(ln) }()
	if w.syncHTTP {
		w.logf("HTTP tasks dispatched in the synchronous form (no callback)")
	}
	for _, h := range sdkHosts {
		w.startSDK(h, w.xrng.IntN(2) == 0)
	}
	if !w.opts.Classic && w.tokRng.IntN(3) == 0 {
		w.rogue = true
		w.startSDK(rogueHost, false)
	}
}

// stopHTTP ends the executors and closes the network, after the engines.
func (w *world) stopHTTP() {
	if w.net == nil {
		return
	}
	for _, h := range sdkHosts {
		w.killSDK(h)
	}
	w.killSDK(rogueHost)
	close(w.over)
	for _, p := range w.dead {
		p.done.Wait()
	}
	w.net.closeAll()
}

// server is the scheduler's HTTP surface, package api's (the executor
// endpoints are what the world's executors call: registration, heartbeats,
// results into the inbox), with no engine in its process: the engines read
// the inbox as the primary of a server farm does.
func (w *world) server() http.Handler {
	// A registration that claims a live executor's address under another
	// boot id is checked with the process at that address, as ax server does.
	ask := runner.NewRouted(runner.RoutedConfig{Client: w.net.client("ax")}).WithToken(simToken)
	whoIs := func(ctx context.Context, address string) (string, error) {
		ans, err := ask.Status(ctx, address, []string{"ax-who-is"})
		return ans.Boot, err
	}
	return api.Handler(api.Config{Store: w.st, Graph: w.g, ExecToken: simToken, Self: schedulerURL, Gather: prometheus.NewRegistry(), WhoIs: whoIs})
}

// rogueProbe runs, in the worlds with a revoked executor, after a step (one
// in four, drawn apart): the revoked executor must not be in the registry,
// and a success it forges for an attempt that runs, with its revoked token
// or none, must be refused (401) and not land in the inbox (I8).
func (w *world) rogueProbe() {
	if !w.rogue || w.tokRng.IntN(4) != 0 {
		return
	}
	ctx := context.Background()
	addr := "http://" + rogueHost
	for _, ids := range w.httpTasks() {
		for _, id := range ids {
			exs, err := w.st.Executors(ctx, id)
			if err != nil {
				return // a store fault: probed again later
			}
			for _, x := range exs {
				if x.Address == addr {
					w.violate(invBadVerb, "executor %s, whose token was revoked, is registered for %s", addr, id)
				}
			}
		}
	}
	in, ok := w.randomInstanceOf(w.tokRng, func(t *defs.Task) bool { return t.Executor.Kind == defs.ExecHTTP }, axtype.Running)
	if !ok || in.Ticket == "" {
		return
	}
	body, _ := json.Marshal(runner.Report{Ticket: in.Ticket, InstanceID: in.ID, Status: runner.StatusSuccess, Output: "forged by " + rogueHost})
	req, _ := http.NewRequest(http.MethodPost, schedulerURL+"/api/v1/results", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if w.tokRng.IntN(2) == 0 {
		req.Header.Set("Authorization", "Bearer "+revokedToken)
	}
	resp, err := w.net.client(rogueHost).Do(req)
	if err != nil {
		return // the scheduler's address is cut off (an outage)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	w.stats.Forged++
	w.logf("forged result for instance %d: %d", in.ID, resp.StatusCode)
	if resp.StatusCode != http.StatusUnauthorized {
		w.violate(invBadVerb, "a result forged without the executor token for instance %d was answered %d, not 401", in.ID, resp.StatusCode)
	}
	if e, err := w.st.InboxEntryOf(ctx, in.Ticket); err == nil && strings.Contains(e.Report, "forged by") {
		w.violate(invBadVerb, "a result forged without the executor token landed in the inbox for instance %d: %s", in.ID, e.Report)
	}
}

// lossy is an executor's side of the network: results it posts take a
// latency drawn from the seed and the ticket, and the first deliveries of
// a result the task's behaviour lost never arrive (the SDK delivers again),
// and a duplicated one arrives twice.
type lossy struct {
	w    *world
	next http.RoundTripper
}

func (l *lossy) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path != "/api/v1/results" || req.Body == nil {
		return l.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	var rep struct {
		Ticket     string `json:"ticket"`
		InstanceID int64  `json:"instance_id"`
	}
	_ = json.Unmarshal(body, &rep)
	lose, twice, nth := l.w.net.fate(rep.Ticket)
	again := func() *http.Request {
		r := req.Clone(req.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		return r
	}
	w := l.w
	if w.opts.scenario == nil {
		// From the instance and the delivery, not the ticket (random): a
		// seed replays the same latencies.
		t := time.NewTimer(time.Duration(mix(uint64(w.seed), uint64(rep.InstanceID), uint64(nth))%300) * time.Millisecond)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		}
	}
	if lose {
		return nil, fmt.Errorf("sim: the result of ticket %.8s was lost on the way", rep.Ticket)
	}
	resp, err := l.next.RoundTrip(again())
	if err != nil || !twice {
		return resp, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return l.next.RoundTrip(again())
}
