package httpguard

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// tracker counts a server's open connections, in total and per client IP,
// with the state http.Server reports for each. Safe for concurrent use.
type tracker struct {
	mu        sync.Mutex
	max       int
	perClient int
	kindCap   func(kind string) int
	conns     map[net.Conn]*entry
	byIP      map[string]int
	inFlight  map[string]int // requests in progress, by kind of client
}

type entry struct {
	ip      string
	state   http.ConnState
	busy    bool      // a request of it is in its handler
	closing bool      // its request was refused, or left its body unread: it closes after the answer
	since   time.Time // accepted, or last began or ended a request, or became idle
}

func newTracker(max, perClient int, kindCap func(string) int) *tracker {
	return &tracker{max: max, perClient: perClient, kindCap: kindCap, conns: map[net.Conn]*entry{}, byIP: map[string]int{}, inFlight: map[string]int{}}
}

// holdsNothing reports whether e may be closed to make room: new without a
// request yet (http.Server reports a connection active only once its
// request's headers are read, so one that never finishes them is new),
// idle between requests, or closing after its answer.
func (e *entry) holdsNothing() bool {
	return !e.busy && (e.state == http.StateNew || e.state == http.StateIdle || e.closing)
}

// begin counts a request of kind on c, unless kind has its cap of requests
// in progress: then it reports false, and the request is to be refused
// before its body is read. Requests in handlers are bounded by the sum of
// the kinds' caps, below the connection caps, so there is always a
// connection that holds nothing to close for a newcomer: a flood of one
// kind cannot keep another kind's connections out.
func (t *tracker) begin(c net.Conn, kind string) (ok bool, limit int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	limit = t.kindCap(kind)
	if t.inFlight[kind] >= limit {
		if e := t.conns[c]; e != nil {
			e.closing = true
		}
		return false, limit
	}
	t.inFlight[kind]++
	if e := t.conns[c]; e != nil {
		e.busy, e.since = true, time.Now()
	}
	return true, limit
}

// end counts the end of a request of kind on c; closing says c closes
// after its answer (its body was not read to the end).
func (t *tracker) end(c net.Conn, kind string, closing bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inFlight[kind]--; t.inFlight[kind] <= 0 {
		delete(t.inFlight, kind)
	}
	if e := t.conns[c]; e != nil {
		e.busy, e.since, e.closing = false, time.Now(), closing
	}
}

// admit registers c; over a cap it picks the oldest connection that holds
// nothing (see holdsNothing) to close, of the same client when that client
// is over its own cap. When every connection is busy, c itself is closed.
// It returns what to close.
func (t *tracker) admit(c net.Conn, ip string) (victim net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.conns[c] = &entry{ip: ip, state: http.StateNew, since: time.Now()}
	t.byIP[ip]++
	sameClient := t.byIP[ip] > t.perClient
	if !sameClient && len(t.conns) <= t.max {
		return nil
	}
	var oldest *entry
	for k, e := range t.conns {
		if k == c || !e.holdsNothing() || (sameClient && e.ip != ip) {
			continue
		}
		if oldest == nil || e.since.Before(oldest.since) {
			oldest, victim = e, k
		}
	}
	if victim == nil {
		victim = c
	}
	t.dropLocked(victim)
	return victim
}

func (t *tracker) dropLocked(c net.Conn) {
	e := t.conns[c]
	if e == nil {
		return
	}
	delete(t.conns, c)
	if t.byIP[e.ip]--; t.byIP[e.ip] <= 0 {
		delete(t.byIP, e.ip)
	}
}

func (t *tracker) drop(c net.Conn) {
	t.mu.Lock()
	t.dropLocked(c)
	t.mu.Unlock()
}

// state is the http.Server's ConnState hook.
func (t *tracker) state(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateClosed, http.StateHijacked:
		t.drop(c)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.conns[c]; e != nil {
		e.state = s
		if s == http.StateIdle {
			e.since = time.Now()
		}
	}
}

// capped is a listener whose connections the tracker admits.
type capped struct {
	net.Listener
	t *tracker
}

func (l *capped) Accept() (net.Conn, error) {
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &conn{Conn: raw, t: l.t}
		ip := hostOnly(raw.RemoteAddr().String())
		victim := l.t.admit(c, ip)
		if victim != nil {
			_ = victim.Close()
		}
		if victim == net.Conn(c) {
			continue // every connection busy: this one waits for none
		}
		return c, nil
	}
}

// conn leaves the tracker when closed, whoever closes it.
type conn struct {
	net.Conn
	t    *tracker
	once sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() { c.t.drop(c) })
	return c.Conn.Close()
}
