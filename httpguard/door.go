// Package httpguard is what every HTTP server of ax puts between the network and
// its handlers: the admin API and console of ax server, its executor
// endpoints, the executor SDK's server and the example executor.
//
// It refuses cross-site requests a browser could be tricked into sending
// (mutations need Content-Type: application/json, which no form and no
// simple cross-origin fetch can send; a foreign Origin is refused), refuses
// requests whose Host is foreign on a loopback listener (DNS rebinding:
// evil.example resolving to 127.0.0.1), and bounds what idle or trickling
// clients can hold: server timeouts, a deadline on request bodies, caps on
// connections, in total and per client address, where a new connection
// over a cap evicts the oldest connection that holds nothing (new, or idle
// between requests: so 5,000 idle connections, or connections that never
// finish their headers, cost the scheduler nothing and an API call still
// gets through), and caps on the requests in progress of each kind of client
// (executors, operators, metrics), checked from the request's headers
// before its body is read, so that a flood of one kind, slow bodies
// included, never keeps another kind out.
//
// It must not know anything about scheduling; it imports only the standard
// library.
package httpguard

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Config says which names a listener answers to and what a client may hold.
// A zero field means its documented default.
type Config struct {
	// Listen is the address listened on (host:port). When its host is a
	// loopback address or name, only Host headers naming a loopback name
	// (localhost, 127.0.0.0/8, ::1), Listen itself or one of Hosts are served.
	Listen string
	// Hosts are further names the server is reached by (the host of an
	// advertised URL, say), with or without a port.
	Hosts []string
	// MaxConns caps open connections. Default 1024.
	MaxConns int
	// MaxConnsPerClient caps open connections per client IP address. Default 256.
	MaxConnsPerClient int
	// KindOf sorts requests into kinds of client (executors, operators,
	// metrics) by their request line and headers, never their body. Nil:
	// every request is of one kind, "".
	KindOf func(*http.Request) string
	// KindCaps caps the requests of each kind in their handlers at once;
	// a request over its kind's cap is refused 503 (Retry-After: 1,
	// Connection: close) before its body is read. A kind not listed gets
	// MaxConnsPerClient/2. The caps must add up to less than
	// MaxConnsPerClient (and MaxConns), so that a flood of one kind always
	// leaves connections that hold nothing for the others' newcomers to
	// displace.
	KindCaps map[string]int
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are the
	// server's. Defaults 5 s, 30 s, 60 s and 60 s.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// BodyTimeout is how long a request's body may take to arrive, from
	// its headers: a body still unfinished then is cut (the handler reads
	// an error, answered 408 by ax's endpoints) and its connection closed.
	// Default 10 s.
	BodyTimeout time.Duration
}

// kindCap returns the cap of requests in progress of kind.
func (c Config) kindCap(kind string) int {
	if n, ok := c.KindCaps[kind]; ok && n > 0 {
		return n
	}
	return max(c.MaxConnsPerClient/2, 1)
}

func (c Config) withDefaults() Config {
	if c.MaxConns <= 0 {
		c.MaxConns = 1024
	}
	if c.MaxConnsPerClient <= 0 {
		c.MaxConnsPerClient = 256
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = 5 * time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 30 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 60 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 60 * time.Second
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = 10 * time.Second
	}
	return c
}

// Guard wraps h with the request rules: Host (on a loopback listener),
// Origin, and the JSON content type of mutations. A refused request gets
// 403 or 415 with a JSON error that names the rule and the fix, and never
// reaches h, so it changes nothing.
func Guard(c Config, h http.Handler) http.Handler {
	loopback := isLoopbackHost(hostOnly(c.Listen))
	allowed := map[string]bool{}
	for _, n := range append([]string{c.Listen}, c.Hosts...) {
		if n == "" {
			continue
		}
		allowed[strings.ToLower(n)] = true
		allowed[strings.ToLower(hostOnly(n))] = true
	}
	ok := func(host string) bool {
		host = strings.ToLower(host)
		return allowed[host] || allowed[hostOnly(host)] || isLoopbackHost(hostOnly(host))
	}
	// An origin is scheme, host and port: a page of this server comes from
	// the address it was called by, or the listen address or a configured
	// name, port included. Another port on loopback is another site (a dev
	// server, a notebook). The listener speaks plain HTTP, so a page of it
	// is http:// (https:// only over TLS); a configured name may sit behind
	// a proxy that ends TLS, so either scheme is its own.
	origins := map[string]bool{}
	for _, n := range c.Hosts {
		origins[strings.ToLower(n)] = n != ""
	}
	sameOrigin := func(u *url.URL, r *http.Request) bool {
		if origins[strings.ToLower(u.Host)] {
			return u.Scheme == "http" || u.Scheme == "https"
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		return u.Scheme == scheme && (strings.EqualFold(u.Host, r.Host) || strings.EqualFold(u.Host, c.Listen))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loopback && !ok(r.Host) {
			refuse(w, http.StatusForbidden, "Host %q is not a name of this server (it listens on loopback %s): refused against DNS rebinding; call it as http://%s", r.Host, c.Listen, c.Listen)
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || u.Host == "" || !sameOrigin(u, r) {
				refuse(w, http.StatusForbidden, "Origin %q is foreign: a page of another site cannot call this server; open the console at http://%s/", o, r.Host)
				return
			}
		}
		if mutating(r.Method) && !bodilessDelete(r) {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				refuse(w, http.StatusUnsupportedMediaType, "%s %s needs Content-Type: application/json (got %q): send a JSON body, {} when there is nothing to say", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// bodilessDelete is a DELETE without a body (curl -X DELETE): no form
// and no simple cross-origin fetch can send a DELETE (a browser asks first,
// and ax answers no preflight), so it needs no JSON type.
func bodilessDelete(r *http.Request) bool {
	return r.Method == http.MethodDelete && r.ContentLength == 0 && r.Header.Get("Content-Type") == ""
}

func mutating(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

func refuse(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(w, "{\"error\":%q}\n", msg)
}

// hostOnly returns the host of host:port (or host alone), without brackets.
func hostOnly(hp string) string {
	if h, _, err := net.SplitHostPort(hp); err == nil {
		return h
	}
	return strings.Trim(hp, "[]")
}

// isLoopbackHost reports whether h is localhost or a loopback IP address.
func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") || strings.HasSuffix(strings.ToLower(h), ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Server is an http.Server behind Guard, with Config's timeouts, whose
// Serve keeps the connection caps and the caps of each kind of client.
type Server struct {
	*http.Server
	t *tracker
}

// connKey is the context key of a request's connection (a *conn).
type connKey struct{}

// NewServer returns the server of h behind Guard.
func NewServer(c Config, h http.Handler) *Server {
	c = c.withDefaults()
	t := newTracker(c.MaxConns, c.MaxConnsPerClient, c.kindCap)
	return &Server{Server: &http.Server{Handler: shares(c, t, Guard(c, h)), ReadHeaderTimeout: c.ReadHeaderTimeout, ReadTimeout: c.ReadTimeout,
		WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout, ConnState: t.state,
		ConnContext: func(ctx context.Context, nc net.Conn) context.Context { return context.WithValue(ctx, connKey{}, nc) }}, t: t}
}

// shares wraps h with the caps of each kind of client, decided from the
// request's headers before anything reads its body, and the body's
// deadline.
func shares(c Config, t *tracker, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := ""
		if c.KindOf != nil {
			kind = c.KindOf(r)
		}
		nc, _ := r.Context().Value(connKey{}).(net.Conn)
		ok, limit := t.begin(nc, kind)
		if !ok {
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			name := kind
			if name == "" {
				name = "all"
			}
			refuse(w, http.StatusServiceUnavailable, "%d requests of this kind of client (%s) are in progress, its share of the server: try again in a moment", limit, name)
			return
		}
		unread := false
		defer func() { t.end(nc, kind, unread) }() // deferred: a handler's panic ends it too
		if nc == nil || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		b := &timedBody{ReadCloser: r.Body}
		r.Body = b
		cut := time.AfterFunc(c.BodyTimeout, func() {
			if !b.done.Load() {
				_ = nc.SetReadDeadline(time.Now()) // the handler's next read fails
			}
		})
		h.ServeHTTP(w, r)
		cut.Stop()
		if unread = !b.done.Load(); unread {
			// The handler answered without the body (a refusal before it,
			// say): http.Server would read what is left of it before the
			// answer, for as long as the client trickles it. It is not
			// waited for: the answer goes out now and the connection closes.
			_ = nc.SetReadDeadline(time.Now())
		}
	})
}

// timedBody is a request body that says when it has been read to its end.
type timedBody struct {
	io.ReadCloser
	done atomic.Bool
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done.Store(true)
	}
	return n, err
}

// Serve serves on ln with the connection caps; see http.Server.Serve.
func (s *Server) Serve(ln net.Listener) error {
	return s.Server.Serve(&capped{Listener: ln, t: s.t})
}

// Conns returns the connections open now, for tests and metrics.
func (s *Server) Conns() int {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	return len(s.t.conns)
}
