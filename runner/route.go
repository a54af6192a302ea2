package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Endpoint is a registered executor that serves a task, with its last heartbeat.
type Endpoint struct {
	Address       string
	LastHeartbeat time.Time
}

// Routed runs HTTP tasks on the executors registered for them: round
// robin among those heard from within Silence, failing over to the next on
// a refusal (busy, re-entrant: 409, 429, 503) or a connection error. A
// task no executor is registered for is called at its own URL directly.
// It never sends work to an excluded executor (registered, and not heard
// from within Silence): a task whose registered executors are all
// excluded, or whose own URL is an excluded executor's address, is refused
// without a dispatch. When every executor refuses, the result has Refused
// set: the scheduler tries again later without counting a failure.
type Routed struct {
	direct   *HTTP
	client   *http.Client
	url      func(Attempt) (string, error)
	registry func(ctx context.Context, task string) ([]Endpoint, error)
	now      func() time.Time

	mu       sync.Mutex
	next     map[string]int               // round-robin position per task
	inFlight map[string]map[string]string // executor address → tickets it runs asynchronously → boot id of the process that accepted each
	heard    map[string]time.Time         // executor address → when it last accepted a dispatch from this process
	unkilled map[string]map[string]bool   // executor address → tickets whose kill did not reach it, to send again (RetryKills)
	env      *envSource                   // gives attempts their env (WithEnv); nil: none
}

var _ Executor = (*Routed)(nil)

// RoutedConfig configures a Routed executor.
type RoutedConfig struct {
	Client *http.Client
	// URL gives an attempt's own URL (the pipeline's http:), for tasks no
	// registered executor serves.
	URL func(Attempt) (string, error)
	// Registry lists the executors registered for a task id (pipeline.task),
	// or every registered executor for "".
	Registry func(ctx context.Context, task string) ([]Endpoint, error)
	// Now reads the clock; default time.Now.
	Now func() time.Time
}

// NewRouted returns a routing HTTP executor.
func NewRouted(c RoutedConfig) *Routed {
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Routed{direct: NewHTTP(c.Client, c.URL), client: c.Client, url: c.URL, registry: c.Registry, now: c.Now,
		next: map[string]int{}, inFlight: map[string]map[string]string{}, heard: map[string]time.Time{},
		unkilled: map[string]map[string]bool{}}
}

// Silence is how long an executor may go without a heartbeat and still get
// work: after it, it is excluded (not deleted) until it sends one.
const Silence = 30 * time.Second

// Alive reports whether an executor whose last heartbeat was at hb still
// gets work at now: the one liveness rule of routing, the engine's sweep,
// the API and the console.
func Alive(hb, now time.Time) bool { return now.Sub(hb) <= Silence }

// NoLiveExecutor says why work of task goes nowhere: every executor
// registered for it (addrs) is excluded.
func NoLiveExecutor(task string, addrs []string) string {
	return fmt.Sprintf("no live executor of %s: its %d registered executor(s) (%s) are excluded, not heard from within %s",
		task, len(addrs), strings.Join(addrs, ", "), Silence)
}

// URLExcluded says why work sent to a task's own url goes nowhere: it is
// the address of addr, an excluded executor.
func URLExcluded(url, addr string) string {
	return fmt.Sprintf("its URL %s is executor %s, which is excluded: not heard from within %s", url, addr, Silence)
}

// excluded reports whether ep gets no work at now: not heard from (a
// heartbeat, or a dispatch it accepted) within Silence (Alive). Routing
// decides every dispatch by it.
func (r *Routed) excluded(ep Endpoint, now time.Time) bool {
	return !Alive(r.LastHeard(ep.Address, ep.LastHeartbeat), now)
}

// ServedBy reports whether url is at the executor address addr.
func ServedBy(url, addr string) bool {
	addr = strings.TrimSuffix(addr, "/")
	return url == addr || strings.HasPrefix(url, addr+"/")
}

// LastHeard returns when the executor at address was last heard from: its
// last heartbeat hb (from the registry), or the last dispatch it accepted
// from this process, whichever is later. An executor that answered a
// dispatch is not silent, even when its heartbeats did not land (the
// scheduler's store failed them, say): the engine's sweep must not fail
// over as lost the attempt it accepted a moment ago.
func (r *Routed) LastHeard(address string, hb time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.heard[address]; t.After(hb) {
		return t
	}
	return hb
}

// Failover fails the attempts this process runs asynchronously on the
// executor at address that were accepted by a process with another boot id
// than boot (it restarted: their work is gone), with reason as their error,
// so that they are retried per their policy at once rather than at their
// deadline. It returns how many it failed. An executor that is only silent
// is not failed over: its work may still run (see InFlight).
func (r *Routed) Failover(address, boot, reason string) int {
	if boot == "" {
		return 0
	}
	r.mu.Lock()
	var gone []string
	for ticket, b := range r.inFlight[address] {
		if b != "" && b != boot {
			gone = append(gone, ticket)
			delete(r.inFlight[address], ticket)
		}
	}
	r.mu.Unlock()
	n := 0
	for _, ticket := range gone {
		if r.direct.Deliver(Report{Ticket: ticket, Status: StatusFailed, Error: reason}) {
			n++
		}
	}
	return n
}

// InFlight returns the tickets this process has dispatched to the executor
// at address and has no result for yet.
func (r *Routed) InFlight(address string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.inFlight[address]))
	for t := range r.inFlight[address] {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Unkilled returns how many kills wait to be sent again to the executor at
// address: kills of its attempts that did not reach it (silent, cut off).
func (r *Routed) Unkilled(address string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.unkilled[address])
}

// RetryKills sends again the kills that did not reach the executor at
// address, and returns the tickets whose kill it took now.
func (r *Routed) RetryKills(address string) []string {
	r.mu.Lock()
	tickets := make([]string, 0, len(r.unkilled[address]))
	for t := range r.unkilled[address] {
		tickets = append(tickets, t)
	}
	r.mu.Unlock()
	slices.Sort(tickets)
	var sent []string
	for _, t := range tickets {
		if r.direct.kill(strings.TrimSuffix(address, "/")+"/dispatch", t) == nil {
			sent = append(sent, t)
			r.mu.Lock()
			delete(r.unkilled[address], t)
			r.mu.Unlock()
		}
	}
	return sent
}

// unkill records that the kill of ticket did not reach the executor at address.
func (r *Routed) unkill(address, ticket string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unkilled[address] == nil {
		r.unkilled[address] = map[string]bool{}
	}
	r.unkilled[address][ticket] = true
}

// WithToken makes r send token with dispatches and kills (see HTTP.WithToken).
func (r *Routed) WithToken(token string) *Routed {
	r.direct = r.direct.WithToken(token)
	return r
}

// WithCallback switches r to the asynchronous form (see HTTP.WithCallback).
func (r *Routed) WithCallback(callback string) *Routed {
	r.direct = r.direct.WithCallback(callback)
	return r
}

// WithEnv makes r give each attempt its task's env, as EnvExecutor does
// (rendered, secrets resolved by secrets, masked in what is reported), in
// the dispatch's env and secret_env.
func (r *Routed) WithEnv(spec func(Attempt) (EnvSpec, error), secrets Secrets) *Routed {
	r.env = &envSource{spec: spec, secrets: secrets}
	return r
}

// Deliver hands a result that arrived at the callback to its waiting attempt.
func (r *Routed) Deliver(rep Report) bool { return r.direct.Deliver(rep) }

// Execute sends the attempt to the next live executor of its task; to its
// own URL when no executor is registered for it, unless that URL is an
// excluded executor's. Work an excluded executor would get is refused
// instead, not sent.
func (r *Routed) Execute(ctx context.Context, a Attempt) (Result, error) {
	if r.env != nil {
		return r.env.run(ctx, a, r.send)
	}
	return r.send(ctx, a)
}

// send is Execute once the attempt has its env.
func (r *Routed) send(ctx context.Context, a Attempt) (Result, error) {
	task := a.Pipeline + "." + a.Task
	live, why, err := r.route(ctx, task, a)
	switch {
	case err != nil:
		return Result{}, err
	case why != "":
		return Result{Ticket: a.Ticket, Status: StatusFailed, Refused: true, Error: why}, nil
	case len(live) == 0:
		h := *r.direct
		if url, err := h.url(a); err == nil {
			h.unkilled = func(ticket string) { r.unkill(strings.TrimSuffix(url, "/dispatch"), ticket) }
		}
		return h.Execute(ctx, a) // a plain URL: no registry
	}
	r.mu.Lock()
	start := r.next[task]
	r.next[task] = start + 1
	r.mu.Unlock()
	var refusals []string
	for i := range live {
		ep := live[(start+i)%len(live)]
		h := *r.direct // shares the waiters of asynchronous results
		h.url = func(Attempt) (string, error) { return strings.TrimSuffix(ep.Address, "/") + "/dispatch", nil }
		h.accepted = func(ticket, boot string) { r.booted(ep.Address, ticket, boot) }
		h.unkilled = func(ticket string) { r.unkill(ep.Address, ticket) }
		r.track(ep.Address, a.Ticket, true)
		res, err := h.Execute(ctx, a)
		res.Executor = ep.Address
		r.track(ep.Address, a.Ticket, false)
		if err != nil {
			return Result{}, err
		}
		if res.Refused {
			refusals = append(refusals, ep.Address+": "+res.Error)
			continue
		}
		return res, nil
	}
	return Result{Ticket: a.Ticket, Status: StatusFailed, Refused: true,
		Error: fmt.Sprintf("every executor of %s refused: %s", task, strings.Join(refusals, "; "))}, nil
}

// route decides where an attempt of task may go at this moment: the live
// executors registered for it; none (its own URL) when no executor is
// registered for it and its URL is no excluded executor's; else why it
// goes nowhere now.
func (r *Routed) route(ctx context.Context, task string, a Attempt) ([]Endpoint, string, error) {
	all, err := r.registry(ctx, task)
	if err != nil {
		return nil, "the executor registry cannot be read: " + err.Error(), nil
	}
	now := r.now()
	var live, out []Endpoint
	for _, ep := range all {
		if r.excluded(ep, now) {
			out = append(out, ep)
		} else {
			live = append(live, ep)
		}
	}
	if len(live) > 0 {
		return live, "", nil
	}
	if len(out) > 0 {
		addrs := make([]string, len(out))
		for i, ep := range out {
			addrs[i] = ep.Address
		}
		return nil, NoLiveExecutor(task, addrs), nil
	}
	url, err := r.url(a)
	if err != nil {
		return nil, "", err
	}
	every, err := r.registry(ctx, "")
	if err != nil {
		return nil, "the executor registry cannot be read: " + err.Error(), nil
	}
	for _, ep := range every {
		if ServedBy(url, ep.Address) && r.excluded(ep, now) {
			return nil, URLExcluded(url, ep.Address), nil
		}
	}
	return nil, "", nil
}

func (r *Routed) track(addr, ticket string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if on {
		if r.inFlight[addr] == nil {
			r.inFlight[addr] = map[string]string{}
		}
		r.inFlight[addr][ticket] = ""
		return
	}
	delete(r.inFlight[addr], ticket)
}

// booted records the boot id of the executor process that accepted ticket,
// and that the executor was heard from now.
func (r *Routed) booted(addr, ticket, boot string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heard[addr] = r.now()
	if _, ok := r.inFlight[addr][ticket]; ok {
		r.inFlight[addr][ticket] = boot
	}
}

// Status asks the executor at address what it knows of tickets: a
// scheduler that took over resolves the attempts it inherited by asking,
// rather than by their timeout. An answer that is not a well-formed status
// for every ticket asked is an error.
func (r *Routed) Status(ctx context.Context, address string, tickets []string) (StatusAnswer, error) {
	body, err := json.Marshal(StatusQuery{Tickets: tickets})
	if err != nil {
		return StatusAnswer{}, err
	}
	url := strings.TrimSuffix(address, "/") + "/status"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return StatusAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Ax-Protocol", fmt.Sprint(ProtocolVersion))
	r.direct.authorize(req)
	resp, err := r.client.Do(req)
	if err != nil {
		return StatusAnswer{}, fmt.Errorf("status query to %s: %w", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return StatusAnswer{}, fmt.Errorf("status answer from %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return StatusAnswer{}, fmt.Errorf("status query to %s: %s: %s", url, resp.Status, firstLine(data))
	}
	var ans StatusAnswer
	if err := json.Unmarshal(data, &ans); err != nil {
		return StatusAnswer{}, fmt.Errorf("status answer from %s: %v", url, err)
	}
	for _, t := range tickets {
		st, ok := ans.Tickets[t]
		switch {
		case !ok:
			return StatusAnswer{}, fmt.Errorf("status answer from %s: ticket %s missing", url, t)
		case st.State == TicketDone && (st.Result == nil || st.Result.Ticket != t ||
			(st.Result.Status != StatusSuccess && st.Result.Status != StatusFailed)):
			return StatusAnswer{}, fmt.Errorf("status answer from %s: ticket %s done without a well-formed result", url, t)
		case st.State != TicketDone && st.State != TicketRunning && st.State != TicketUnknown:
			return StatusAnswer{}, fmt.Errorf("status answer from %s: ticket %s in state %q", url, t, st.State)
		}
	}
	return ans, nil
}
