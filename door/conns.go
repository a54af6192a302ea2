package door

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
	conns     map[net.Conn]*entry
	byIP      map[string]int
}

type entry struct {
	ip    string
	state http.ConnState
	since time.Time // accepted, or last became idle
}

func newTracker(max, perClient int) *tracker {
	return &tracker{max: max, perClient: perClient, conns: map[net.Conn]*entry{}, byIP: map[string]int{}}
}

// admit registers c; over a cap it picks the oldest connection that holds
// nothing (new without a request yet, or idle between requests) to close,
// of the same client when that client is over its own cap. When every
// connection is busy, c itself is closed. It returns what to close.
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
		if k == c || (e.state != http.StateNew && e.state != http.StateIdle) || (sameClient && e.ip != ip) {
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
