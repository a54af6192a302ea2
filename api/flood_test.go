package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/access"
	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/store/storetest"
)

// TestFloodOfOneKindLeavesTheOthersServed: 256 connections from loopback
// (one client address, as every local client is) send a request of one
// kind of client and never finish its body: results with the executor
// credential, or operators' writes. Served by Serve, as ax server serves
// its API, the other kinds' requests still get their answers within two
// seconds each, on new connections from the same address; the flood's
// requests past its kind's share are refused 503 before their bodies are
// read.
func TestFloodOfOneKindLeavesTheOthersServed(t *testing.T) {
	t.Parallel()
	get := func(path string) *http.Request { r, _ := http.NewRequest("GET", path, nil); return r }
	heartbeat := func(string) *http.Request {
		r, _ := http.NewRequest("POST", "/api/v1/executors/heartbeat", strings.NewReader(`{"address":"http://127.0.0.1:1"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer x-tok")
		return r
	}
	for _, tc := range []struct {
		name, flood string // the flood's request line and headers, before a body that never ends
		others      map[string]func(string) *http.Request
	}{
		{"slow results", "POST /api/v1/results HTTP/1.1\r\nAuthorization: Bearer x-tok\r\n",
			map[string]func(string) *http.Request{"/api/v1/status": get, "/api/v1/pipelines": get, "/metrics": get, "/readyz": get}},
		{"slow operator writes", "POST /api/v1/pipelines/shop/pause HTTP/1.1\r\n",
			map[string]func(string) *http.Request{"/metrics": get, "/healthz": get, "heartbeat": heartbeat}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			floodKindOthersServed(t, tc.flood, tc.others)
		})
	}
}

func floodKindOthersServed(t *testing.T, flood string, others map[string]func(string) *http.Request) {
	st := storetest.SQLite(t)
	var inHandler atomic.Int32
	h := Handler(Config{Store: st, Graph: apitest.Compile(t, shopPipeline), Gather: prometheus.NewRegistry(), ExecToken: "x-tok"})
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Flood") != "" {
			inHandler.Add(1)
			defer inHandler.Add(-1)
		}
		h.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, counted, addr) }()
	t.Cleanup(func() { cancel(); <-served })

	const n = 256
	var answered, refused atomic.Int32
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "%sHost: %s\r\nX-Flood: 1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", flood, addr)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil && resp.StatusCode == http.StatusServiceUnavailable {
				refused.Add(1)
			}
			answered.Add(1)
		}()
	}
	// Every flood request is either in a handler, reading its body, or answered.
	waitFor(t, func() bool { return inHandler.Load()+answered.Load() == n })
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for path, req := range others {
		for i := range 5 {
			r := req("http://" + addr + path)
			r.URL.Host, r.URL.Scheme = addr, "http"
			start := time.Now()
			resp, err := hc.Do(r)
			if err != nil {
				t.Fatalf("%s %s (%d) behind %d slow bodies: %v", r.Method, r.URL.Path, i, n, err)
			}
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				t.Errorf("%s %s: %d", r.Method, r.URL.Path, resp.StatusCode)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("%s %s took %s", r.Method, r.URL.Path, d)
			}
		}
	}
	t.Logf("flood of %d slow bodies: %d in handlers reading their bodies, %d answered (%d refused 503)", n, inHandler.Load(), answered.Load(), refused.Load())
}

// readFlag is a request body that records whether anything read it.
type readFlag struct{ read atomic.Bool }

func (b *readFlag) Read(p []byte) (int, error) {
	b.read.Store(true)
	return copy(p, "{}"), io.EOF
}

// Every route that takes a body checks its credential from the headers
// first: without it (or with the other kind's), the answer is 401 and
// nothing read the body.
func TestCredentialsCheckedBeforeTheBody(t *testing.T) {
	t.Parallel()
	st := storetest.SQLite(t)
	h := Handler(Config{Store: st, Graph: apitest.Compile(t, shopPipeline), Gather: prometheus.NewRegistry(), Token: "admin-tok", ExecToken: "x-tok"})
	fill := strings.NewReplacer("{pipeline}", "shop", "{task}", "sync", "{id}", "1", "{run}", "1", "{group}", "etl")
	type call struct{ method, wrong string }
	paths := map[string]call{"/api/v1/executors/register": {"POST", "admin-tok"}, "/api/v1/executors/heartbeat": {"POST", "admin-tok"}, "/api/v1/results": {"POST", "admin-tok"}}
	for _, rt := range adminRoutes() {
		if rt.method != "GET" && rt.role != access.None { // signing in and out takes no credential
			paths[fill.Replace(rt.path)] = call{rt.method, "x-tok"} // the executor credential is not an operator's
		}
	}
	if len(paths) < 10 {
		t.Fatalf("%d routes with a body: the route table was not read", len(paths))
	}
	for path, c := range paths {
		for _, tok := range []string{"", c.wrong} {
			body := &readFlag{}
			req := httptest.NewRequest(c.method, path, body)
			if strings.Contains(path, "{") {
				t.Fatalf("route %s has a parameter the test does not fill", path)
			}
			req.Header.Set("Content-Type", "application/json")
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("%s %s with token %q: %d %s, want 401", c.method, path, tok, rec.Code, rec.Body)
			}
			if body.read.Load() {
				t.Errorf("%s %s with token %q: the body was read before the credential was checked", c.method, path, tok)
			}
		}
	}
}
