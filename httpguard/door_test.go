package httpguard

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestGuard(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	h := Guard(Config{Listen: "127.0.0.1:8080", Hosts: []string{"ax.internal:8443"}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	for _, tc := range []struct {
		name, method, host, origin, ctype string
		code                              int
		msg                               string
	}{
		{"get on the listen address", "GET", "127.0.0.1:8080", "", "", 200, ""},
		{"get by localhost", "GET", "localhost:8080", "", "", 200, ""},
		{"get by the advertised name", "GET", "ax.internal:8443", "", "", 200, ""},
		{"post json", "POST", "127.0.0.1:8080", "", "application/json", 200, ""},
		{"post json with charset", "PUT", "127.0.0.1:8080", "", "application/json; charset=utf-8", 200, ""},
		{"same origin", "POST", "127.0.0.1:8080", "http://127.0.0.1:8080", "application/json", 200, ""},
		{"text/plain post (a form)", "POST", "127.0.0.1:8080", "", "text/plain", 415, "needs Content-Type: application/json"},
		{"urlencoded post", "POST", "127.0.0.1:8080", "", "application/x-www-form-urlencoded", 415, "needs Content-Type: application/json"},
		{"post without a type", "POST", "127.0.0.1:8080", "", "", 415, "needs Content-Type: application/json"},
		{"foreign origin", "POST", "127.0.0.1:8080", "https://evil.example", "application/json", 403, `Origin "https://evil.example" is foreign`},
		{"null origin", "POST", "127.0.0.1:8080", "null", "application/json", 403, "is foreign"},
		{"same origin by localhost", "POST", "localhost:8080", "http://localhost:8080", "application/json", 200, ""},
		{"origin of the advertised name", "POST", "ax.internal:8443", "https://ax.internal:8443", "application/json", 200, ""},
		{"origin of the advertised name over http", "POST", "ax.internal:8443", "http://ax.internal:8443", "application/json", 200, ""},
		// The listener speaks plain HTTP: an https page on its address is not one of its pages.
		{"https origin on the listen address", "POST", "127.0.0.1:8080", "https://127.0.0.1:8080", "application/json", 403, `Origin "https://127.0.0.1:8080" is foreign`},
		{"another scheme on localhost", "POST", "localhost:8080", "ftp://localhost:8080", "application/json", 403, "is foreign"},
		// Another port is another origin: a page of another local service
		// (a dev server, a notebook) is foreign. Any loopback origin passed.
		{"another loopback port", "POST", "127.0.0.1:8080", "http://127.0.0.1:3000", "application/json", 403, `Origin "http://127.0.0.1:3000" is foreign`},
		{"localhost on another port", "POST", "localhost:8080", "http://localhost:5173", "application/json", 403, "is foreign"},
		{"another loopback port on a read", "GET", "127.0.0.1:8080", "http://[::1]:9000", "", 403, "is foreign"},
		{"foreign origin on a read", "GET", "127.0.0.1:8080", "https://evil.example", "", 403, "is foreign"},
		{"rebound host", "GET", "evil.example:8080", "", "", 403, "refused against DNS rebinding"},
		{"rebound host posting", "POST", "evil.example:8080", "http://evil.example:8080", "application/json", 403, "DNS rebinding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := reached.Load()
			r := httptest.NewRequest(tc.method, "http://"+tc.host+"/api/v1/x", strings.NewReader("{}"))
			r.Host = tc.host
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if tc.ctype != "" {
				r.Header.Set("Content-Type", tc.ctype)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.code {
				t.Fatalf("code %d, want %d: %s", w.Code, tc.code, w.Body)
			}
			if tc.code != 200 {
				var e struct{ Error string }
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || !strings.Contains(e.Error, tc.msg) {
					t.Errorf("body %s, want a JSON error containing %q", w.Body, tc.msg)
				}
				if reached.Load() != before {
					t.Error("a refused request reached the handler")
				}
			}
		})
	}
}

// A non-loopback listener serves any Host (it is behind a name the operator
// chose), but still refuses foreign origins and non-JSON mutations.
func TestGuardPublicListener(t *testing.T) {
	t.Parallel()
	h := Guard(Config{Listen: "0.0.0.0:8080"}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest("GET", "http://ax.example.com/", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Errorf("GET by a public name: %d", w.Code)
	}
	r = httptest.NewRequest("POST", "http://ax.example.com/", strings.NewReader("x"))
	r.Header.Set("Content-Type", "text/plain")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 415 {
		t.Errorf("text/plain POST: %d", w.Code)
	}
}

// 5,000 idle connections (the limit of many a scheduler's descriptors, if
// it kept them) neither exhaust the server nor keep an API call out: each
// new connection over the cap evicts the oldest one that sent nothing.
func TestIdleConnectionsDoNotShutTheDoor(t *testing.T) {
	t.Parallel()
	srv := NewServer(Config{Listen: "127.0.0.1:0", MaxConns: 256, MaxConnsPerClient: 128},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	var idle []net.Conn
	t.Cleanup(func() {
		for _, c := range idle {
			c.Close()
		}
	})
	for range 5000 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("after %d idle connections: %v", len(idle), err)
		}
		idle = append(idle, c)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatalf("API call behind 5,000 idle connections: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Errorf("answer %q", body)
	}
	if n := srv.Conns(); n > 256 {
		t.Errorf("%d connections held, cap 256", n)
	}
}

// The server sets every timeout, so a trickling client is cut off.
func TestServerTimeouts(t *testing.T) {
	t.Parallel()
	s := NewServer(Config{Listen: "127.0.0.1:0"}, http.NotFoundHandler())
	if s.ReadHeaderTimeout != 5*time.Second || s.ReadTimeout != 30*time.Second || s.WriteTimeout != 60*time.Second || s.IdleTimeout != 60*time.Second {
		t.Errorf("timeouts %s %s %s %s", s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout)
	}
}

// 10,000 connections that start a request to one endpoint and never finish
// its headers (slowloris) are displaced like idle ones, oldest first: an
// API call on a new connection from the same address still gets through,
// and the server holds no more than its cap. (Caps lowered to keep the
// test fast.)
func TestUnfinishedHeadersDoNotShutTheDoor(t *testing.T) {
	t.Parallel()
	srv := NewServer(Config{Listen: "127.0.0.1:0", MaxConns: 128, MaxConnsPerClient: 64},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range 10000 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("after %d connections: %v", len(held), err)
		}
		// Written in full by the time the next one dials (loopback), and
		// read by the server as soon as it accepts: the connection is
		// then active, and stays in its headers.
		io.WriteString(c, "POST /api/v1/results HTTP/1.1\r\nHost: 127.0.0.1\r\n")
		held = append(held, c)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 5 {
		resp, err := hc.Get("http://" + ln.Addr().String() + "/metrics")
		if err != nil {
			t.Fatalf("call %d behind 10,000 unfinished requests: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "ok" {
			t.Errorf("answer %q", body)
		}
	}
	if n := srv.Conns(); n > 128 {
		t.Errorf("%d connections held, cap 128", n)
	}
}

// Each kind of client has its own cap of requests in progress: over it, a
// request is refused 503 (Retry-After, Connection: close) before its body
// is read and without reaching the handler; another kind is served.
func TestKindCaps(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var reached atomic.Int32
	srv := NewServer(Config{Listen: "127.0.0.1:0", MaxConnsPerClient: 16, KindCaps: map[string]int{"slow": 2},
		KindOf: func(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, "/") }},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached.Add(1)
			if r.URL.Path == "/slow" {
				<-release
			}
			io.WriteString(w, "ok")
		}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	base := "http://" + ln.Addr().String()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	done := make(chan error, 2)
	for range 2 {
		go func() {
			resp, err := hc.Get(base + "/slow")
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
	}
	for reached.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	resp, err := hc.Post(base+"/slow", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "2 requests of this kind of client (slow) are in progress") {
		t.Errorf("a third slow request: %d %v %s; want 503 with Retry-After and the reason", resp.StatusCode, resp.Header, body)
	}
	if reached.Load() != 2 {
		t.Errorf("the refused request reached the handler")
	}
	for range 3 {
		resp, err := hc.Get(base + "/fast")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("another kind while slow is at its cap: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// A body that does not arrive within BodyTimeout is cut: the handler's
// read fails, and the client gets its answer at once rather than after
// the server's ReadTimeout.
func TestSlowBodyCut(t *testing.T) {
	t.Parallel()
	srv := NewServer(Config{Listen: "127.0.0.1:0", BodyTimeout: 100 * time.Millisecond},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(r.Body); err != nil {
				http.Error(w, "cut: "+err.Error(), http.StatusRequestTimeout)
				return
			}
			io.WriteString(w, "ok")
		}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	io.WriteString(c, "POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a body that never ends: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || time.Since(start) > 5*time.Second {
		t.Errorf("%d after %s; want 408 soon after the 100 ms body deadline", resp.StatusCode, time.Since(start))
	}
	// A whole body in time is served.
	resp, err = http.Post("http://"+ln.Addr().String()+"/x", "application/json", strings.NewReader("{}"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a body in time: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestBodilessDeleteNeedsNoType: a DELETE without a body (curl -X DELETE)
// passes without Content-Type; one with a body, or any POST, still needs
// application/json.
func TestBodilessDeleteNeedsNoType(t *testing.T) {
	t.Parallel()
	h := Guard(Config{Listen: "127.0.0.1:8080"}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, c := range []struct {
		method, body, ctype string
		code                int
	}{
		{"DELETE", "", "", 200},
		{"DELETE", "{}", "", 415},
		{"DELETE", "", "text/plain", 415},
		{"POST", "", "", 415},
	} {
		r := httptest.NewRequest(c.method, "http://127.0.0.1:8080/api/v1/session", strings.NewReader(c.body))
		if c.ctype != "" {
			r.Header.Set("Content-Type", c.ctype)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.code {
			t.Errorf("%s with body %q and type %q: %d, want %d: %s", c.method, c.body, c.ctype, w.Code, c.code, w.Body)
		}
	}
}
