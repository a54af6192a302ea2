package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostile are neighbours of the same host attacking the servers while a
// chaos run goes on: an impersonator that registers the live executors'
// addresses under forged boot ids, with and without the executor
// credential, and a flood of connections whose bodies never end to the
// results endpoint (most without the credential, a few with it, within the
// executors' share).
type hostile struct {
	impersonations, accepted atomic.Int64 // registrations sent, and answered 2xx (must be 0)
	floodConns               atomic.Int64
	stop                     chan struct{}
	wg                       sync.WaitGroup
}

// startHostile starts them against apis (host:port) and the executors at
// addrs() (host:port); token is the executor credential.
func startHostile(t *testing.T, apis []string, addrs func() []string, token string) *hostile {
	h := &hostile{stop: make(chan struct{})}
	h.wg.Go(func() { h.impersonate(t, apis, addrs, token) })
	for i := range 128 {
		withToken := i < 16
		h.wg.Go(func() { h.flood(apis[i%len(apis)], withToken, token) })
	}
	return h
}

// end stops them and reports what they did; a registration the servers
// took is an error.
func (h *hostile) end(t *testing.T) string {
	close(h.stop)
	h.wg.Wait()
	if n := h.accepted.Load(); n > 0 {
		t.Errorf("%d of %d forged registrations of a live executor's address were accepted", n, h.impersonations.Load())
	}
	return fmt.Sprintf("%d forged registrations refused, %d flood connections with bodies that never end", h.impersonations.Load()-h.accepted.Load(), h.floodConns.Load())
}

func (h *hostile) sleep(d time.Duration) bool {
	select {
	case <-h.stop:
		return false
	case <-time.After(d):
		return true
	}
}

func (h *hostile) impersonate(t *testing.T, apis []string, addrs func() []string, token string) {
	hc := &http.Client{Timeout: 10 * time.Second}
	for n := 0; h.sleep(500 * time.Millisecond); n++ {
		as := addrs()
		body, _ := json.Marshal(map[string]any{"address": "http://" + as[n%len(as)], "protocol": "http", "tasks": []string{"record"}, "boot": fmt.Sprintf("forged-%d", n)})
		req, _ := http.NewRequest("POST", "http://"+apis[n%len(apis)]+"/api/v1/executors/register", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		if n%2 == 0 {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			continue
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		h.impersonations.Add(1)
		if resp.StatusCode/100 == 2 {
			h.accepted.Add(1)
			t.Logf("forged registration accepted: %s → %d %s", body, resp.StatusCode, out)
		}
	}
}

func (h *hostile) flood(api string, withToken bool, token string) {
	auth := ""
	if withToken {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	for h.sleep(100 * time.Millisecond) {
		c, err := net.Dial("tcp", api)
		if err != nil {
			continue
		}
		h.floodConns.Add(1)
		fmt.Fprintf(c, "POST /api/v1/results HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%sContent-Length: 100000\r\n\r\n{", api, auth)
		done := make(chan struct{})
		go func() { _, _ = c.Read(make([]byte, 4096)); close(done) }() // until the server answers or closes
		select {
		case <-done:
		case <-h.stop:
		}
		c.Close()
	}
}
