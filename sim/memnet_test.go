package sim

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// memnet is the world's network: hosts that listen by name ("ax", "x1"),
// connections made of net.Pipe pairs. Everything is created inside the
// bubble, so a goroutine blocked reading a connection is durably blocked and
// synctest.Wait sees the world at rest; a real socket would not be.
//
// A host can be cut off (an executor that falls silent): dials to and from it
// fail, and the connections it has are closed. A crashed host's connections
// are closed too, so that requests in flight to it fail as they would
// against a killed process.
type memnet struct {
	mu    sync.Mutex
	hosts map[string]*memListener
	cut   map[string]bool
	conns []memConn

	lost  map[string]int  // by ticket: deliveries of its result still to lose
	dup   map[string]bool // by ticket: its result arrives twice
	sends map[string]int  // by ticket: deliveries of its result so far

	// What routing is judged by (I12): the dispatches sent, and when each
	// executor was last heard from, by a heartbeat or registration the
	// scheduler took, or by a dispatch it accepted.
	dispatches []sentDispatch
	heartbeats map[string][]time.Time // executor host → heartbeats and registrations answered 2xx
	accepts    map[string][]time.Time // engine|executor host → dispatches it accepted (202)
}

// sentDispatch is one dispatch an engine sent to an executor host.
type sentDispatch struct {
	from, host string
	at         time.Time
}

// memConn is one connection: both ends and the hosts they belong to.
type memConn struct {
	from, to   string
	client, sv net.Conn
}

func newMemnet() *memnet {
	return &memnet{hosts: map[string]*memListener{}, cut: map[string]bool{}, lost: map[string]int{}, dup: map[string]bool{}, sends: map[string]int{},
		heartbeats: map[string][]time.Time{}, accepts: map[string][]time.Time{}}
}

// memListener is a net.Listener on one host of a memnet.
type memListener struct {
	host   string
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

// listen makes host reachable; a host listening already is replaced (a
// restarted process on the same address).
func (m *memnet) listen(host string) *memListener {
	l := &memListener{host: host, ch: make(chan net.Conn), closed: make(chan struct{})}
	m.mu.Lock()
	m.hosts[host] = l
	m.mu.Unlock()
	return l
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr(l.host) }

type memAddr string

func (a memAddr) Network() string { return "mem" }
func (a memAddr) String() string  { return string(a) }

// dial connects from host from to addr ("host:port"; the port is ignored).
func (m *memnet) dial(ctx context.Context, from, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	m.mu.Lock()
	l := m.hosts[host]
	cut := m.cut[from] || m.cut[host]
	m.mu.Unlock()
	if l == nil || cut {
		return nil, fmt.Errorf("sim: dial %s from %s: connection refused", host, from)
	}
	client, sv := net.Pipe()
	select {
	case l.ch <- sv:
	case <-l.closed:
		return nil, fmt.Errorf("sim: dial %s from %s: connection refused", host, from)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	m.mu.Lock()
	m.conns = append(m.conns, memConn{from: from, to: host, client: client, sv: sv})
	m.mu.Unlock()
	return client, nil
}

// client returns an HTTP client for the processes of host from. Its
// transport must be closed with the world (closeAll closes its connections).
func (m *memnet) client(from string) *http.Client {
	tr := &http.Transport{
		DialContext:         func(ctx context.Context, _, addr string) (net.Conn, error) { return m.dial(ctx, from, addr) },
		MaxIdleConnsPerHost: 8,
	}
	return &http.Client{Transport: &recorder{m: m, from: from, base: tr}}
}

// recorder is the transport of a host's clients: it records the
// dispatches an engine sends and what makes an executor heard from (I12).
type recorder struct {
	m    *memnet
	from string
	base *http.Transport
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Hostname()
	dispatch := strings.HasSuffix(req.URL.Path, "/dispatch")
	if dispatch {
		r.m.mu.Lock()
		r.m.dispatches = append(r.m.dispatches, sentDispatch{from: r.from, host: host, at: time.Now()})
		r.m.mu.Unlock()
	}
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	heard := strings.HasSuffix(req.URL.Path, "/executors/heartbeat") || strings.HasSuffix(req.URL.Path, "/executors/register")
	r.m.mu.Lock()
	switch {
	case dispatch && resp.StatusCode == http.StatusAccepted:
		r.m.accepts[r.from+"|"+host] = append(r.m.accepts[r.from+"|"+host], time.Now())
	case heard && resp.StatusCode/100 == 2:
		r.m.heartbeats[r.from] = append(r.m.heartbeats[r.from], time.Now())
	}
	r.m.mu.Unlock()
	return resp, nil
}

// CloseIdleConnections lets the world close the transport's connections.
func (r *recorder) CloseIdleConnections() { r.base.CloseIdleConnections() }

// drop closes the connections to and from host (a crash or a cut).
func (m *memnet) drop(host string) {
	m.mu.Lock()
	var keep, gone []memConn
	for _, c := range m.conns {
		if c.from == host || c.to == host {
			gone = append(gone, c)
		} else {
			keep = append(keep, c)
		}
	}
	m.conns = keep
	m.mu.Unlock()
	for _, c := range gone {
		c.client.Close()
		c.sv.Close()
	}
}

// setCut cuts host off the network (on) or lets it back (off).
func (m *memnet) setCut(host string, on bool) {
	m.mu.Lock()
	m.cut[host] = on
	m.mu.Unlock()
	if on {
		m.drop(host)
	}
}

// closeAll closes every listener and connection: the end of the world, so
// that no goroutine stays blocked on the network past the bubble.
func (m *memnet) closeAll() {
	m.mu.Lock()
	ls, cs := m.hosts, m.conns
	m.hosts, m.conns = map[string]*memListener{}, nil
	m.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	for _, c := range cs {
		c.client.Close()
		c.sv.Close()
	}
}

// lose makes the next n deliveries of ticket's result fail on the way.
func (m *memnet) lose(ticket string, n int) {
	m.mu.Lock()
	m.lost[ticket] = n
	m.mu.Unlock()
}

// twice makes ticket's result arrive twice.
func (m *memnet) twice(ticket string) {
	m.mu.Lock()
	m.dup[ticket] = true
	m.mu.Unlock()
}

// fate says what becomes of this delivery of ticket's result, and which
// delivery of it this is.
func (m *memnet) fate(ticket string) (lose, twice bool, nth int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sends[ticket]++
	nth = m.sends[ticket]
	if m.lost[ticket] > 0 {
		m.lost[ticket]--
		return true, false, nth
	}
	twice = m.dup[ticket]
	delete(m.dup, ticket)
	return false, twice, nth
}
