package runner

import (
	"context"
	"fmt"
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
	lost     func(address string, silentFor time.Duration)

	mu       sync.Mutex
	next     map[string]int             // round-robin position per task
	dead     map[string]bool            // executors reported lost (until they heartbeat again)
	inFlight map[string]map[string]bool // executor address → tickets it runs asynchronously
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
	// Silence excludes an executor whose last heartbeat is older; default 30 s.
	Silence time.Duration
	// Lost, when set, is called once when an executor goes silent (an alert).
	Lost func(address string, silentFor time.Duration)
	// Now reads the clock; default time.Now.
	Now func() time.Time
}

// NewRouted returns a routing HTTP executor.
func NewRouted(c RoutedConfig) *Routed {
	if c.Silence == 0 {
		c.Silence = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Routed{direct: NewHTTP(c.Client, c.URL), client: c.Client, url: c.URL, registry: c.Registry, now: c.Now,
		silence: c.Silence, lost: c.Lost, next: map[string]int{}, dead: map[string]bool{}, inFlight: map[string]map[string]bool{}}
}

// Live returns the executors of task that heartbeat within the silence
// window, reporting newly silent ones once.
func (r *Routed) Live(ctx context.Context, task string) ([]Endpoint, error) {
	all, err := r.registry(ctx, task)
	if err != nil {
		return nil, err
	}
	now := r.now()
	var live []Endpoint
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ep := range all {
		silent := now.Sub(ep.LastHeartbeat)
		if silent <= r.silence {
			delete(r.dead, ep.Address)
			live = append(live, ep)
			continue
		}
		if !r.dead[ep.Address] {
			r.dead[ep.Address] = true
			if r.lost != nil {
				r.lost(ep.Address, silent)
			}
			// Its in-flight attempts fail now, to be retried per their policy,
			// rather than wait for their deadline.
			for ticket := range r.inFlight[ep.Address] {
				r.direct.Deliver(Report{Ticket: ticket, Status: StatusFailed,
					Error: fmt.Sprintf("executor %s lost: no heartbeat for %s", ep.Address, silent.Round(time.Second))})
			}
			delete(r.inFlight, ep.Address)
		}
	}
	return live, nil
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
			r.inFlight[addr] = map[string]bool{}
		}
		r.inFlight[addr][ticket] = true
		return
	}
	delete(r.inFlight[addr], ticket)
}
