package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Endpoint is a registered executor that serves a task, with its last heartbeat.
type Endpoint struct {
	Address       string
	LastHeartbeat time.Time
}

// Routed runs HTTP tasks on the executors registered for them (R21): round
// robin among those that sent a heartbeat within Silence, failing over to
// the next on a refusal (busy, re-entrant: 409, 429, 503) or a connection
// error. A task no live executor serves is called at its own URL directly.
// When every executor refuses, the result has Refused set: the scheduler
// tries again later without counting a failure.
type Routed struct {
	direct   *HTTP
	client   *http.Client
	url      func(Attempt) (string, error)
	registry func(ctx context.Context, task string) ([]Endpoint, error)
	now      func() time.Time
	silence  time.Duration

	mu       sync.Mutex
	next     map[string]int               // round-robin position per task
	inFlight map[string]map[string]string // executor address → tickets it runs asynchronously → boot id of the process that accepted each
	heard    map[string]time.Time         // executor address → when it last accepted a dispatch from this process
}

var _ Executor = (*Routed)(nil)

// RoutedConfig configures a Routed executor.
type RoutedConfig struct {
	Client *http.Client
	// URL gives an attempt's own URL (the pipeline's http:), for tasks no
	// registered executor serves.
	URL func(Attempt) (string, error)
	// Registry lists the executors registered for a task id (pipeline.task).
	Registry func(ctx context.Context, task string) ([]Endpoint, error)
	// Silence excludes an executor whose last heartbeat is older; default
	// Silence (30 s).
	Silence time.Duration
	// Now reads the clock; default time.Now.
	Now func() time.Time
}

// NewRouted returns a routing HTTP executor.
func NewRouted(c RoutedConfig) *Routed {
	if c.Silence == 0 {
		c.Silence = Silence
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Routed{direct: NewHTTP(c.Client, c.URL), client: c.Client, url: c.URL, registry: c.Registry, now: c.Now,
		silence: c.Silence, next: map[string]int{}, inFlight: map[string]map[string]string{}, heard: map[string]time.Time{}}
}

// Silence is how long an executor may go without a heartbeat and still get
// work (R21): after it, it is excluded (not deleted) until it sends one.
const Silence = 30 * time.Second

// Alive reports whether an executor whose last heartbeat was at hb still
// gets work at now: the one liveness rule of routing, the engine's sweep,
// the API and the console.
func Alive(hb, now time.Time) bool { return now.Sub(hb) <= Silence }

// Live returns the executors of task heard from within the silence window:
// by heartbeat, or by a dispatch they accepted (LastHeard).
func (r *Routed) Live(ctx context.Context, task string) ([]Endpoint, error) {
	all, err := r.registry(ctx, task)
	if err != nil {
		return nil, err
	}
	now := r.now()
	var live []Endpoint
	for _, ep := range all {
		if now.Sub(r.LastHeard(ep.Address, ep.LastHeartbeat)) <= r.silence {
			live = append(live, ep)
		}
	}
	return live, nil
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
// executor at address, with reason as their error, so that they are retried
// per their policy at once rather than at their deadline: all of them when
// boot is empty (the executor is lost), else those accepted by a process
// with another boot id (it restarted: their work is gone). It returns how
// many it failed.
func (r *Routed) Failover(address, boot, reason string) int {
	r.mu.Lock()
	var gone []string
	for ticket, b := range r.inFlight[address] {
		if boot == "" || (b != "" && b != boot) {
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

// Deliver hands a result that arrived at the callback to its waiting attempt.
func (r *Routed) Deliver(rep Report) bool { return r.direct.Deliver(rep) }

// Execute sends the attempt to the next live executor of its task.
func (r *Routed) Execute(ctx context.Context, a Attempt) (Result, error) {
	task := a.Pipeline + "." + a.Task
	live, err := r.Live(ctx, task)
	if err != nil || len(live) == 0 {
		return r.direct.Execute(ctx, a) // a plain URL: no registry
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

// Status asks the executor at address what it knows of tickets (R43): a
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
