// Package door is what every HTTP server of ax puts between the network and
// its handlers: the admin API and console of ax server, its executor
// endpoints, the executor SDK's server and the example executor.
//
// It refuses cross-site requests a browser could be tricked into sending
// (mutations need Content-Type: application/json, which no form and no
// simple cross-origin fetch can send; a foreign Origin is refused), refuses
// requests whose Host is foreign on a loopback listener (DNS rebinding:
// evil.example resolving to 127.0.0.1), and bounds what idle or trickling
// clients can hold: server timeouts, and caps on connections, in total and
// per client address, where a new connection over a cap evicts the oldest
// connection that has not sent a request (so 5,000 idle connections cost
// the scheduler nothing and an API call still gets through).
//
// It must not know anything about scheduling; it imports only the standard
// library.
package door

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
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
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are the
	// server's. Defaults 5 s, 30 s, 60 s and 60 s.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
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
		if mutating(r.Method) {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				refuse(w, http.StatusUnsupportedMediaType, "%s %s needs Content-Type: application/json (got %q): send a JSON body, {} when there is nothing to say", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
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
// Serve keeps the connection caps.
type Server struct {
	*http.Server
	t *tracker
}

// NewServer returns the server of h behind Guard.
func NewServer(c Config, h http.Handler) *Server {
	c = c.withDefaults()
	t := newTracker(c.MaxConns, c.MaxConnsPerClient)
	return &Server{Server: &http.Server{Handler: Guard(c, h), ReadHeaderTimeout: c.ReadHeaderTimeout, ReadTimeout: c.ReadTimeout,
		WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout, ConnState: t.state}, t: t}
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
