package main

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/runner"
)

// TestSlowBodyFloodStarvesNoOtherClient: a process of the same host opens
// 256 connections to a real ax server's /api/v1/results without a
// credential, sends headers and a body that never ends, and opens them
// again as they are closed (for as long as the test asks). Meanwhile the
// CLI (ax status through the API), /metrics and a registered executor's
// heartbeat, all from 127.0.0.1 like the flood, are answered, each in
// under two seconds. The flood is refused 401 from its headers, before any
// body is read.
func TestSlowBodyFloodStarvesNoOtherClient(t *testing.T) {
	t.Parallel()
	dir, _ := e2ePipeline(t)
	db := filepath.Join(t.TempDir(), "ax.db")
	addr := freeAddr(t)
	srv := startServer(t, db, dir, "--listen", addr)
	waitPrimary(t, addr)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var opened atomic.Int64
	for range 256 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.Dial("tcp", addr)
				if err != nil {
					continue
				}
				opened.Add(1)
				fmt.Fprintf(c, "POST /api/v1/results HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", addr)
				done := make(chan struct{})
				go func() { _, _ = c.Read(make([]byte, 4096)); close(done) }() // until the server answers or closes
				select {
				case <-done:
				case <-stop:
				}
				c.Close()
				select { // at most ten a second per connection: a bounded flood, enough to hold the server if it let it
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for opened.Load() < 256 {
		time.Sleep(10 * time.Millisecond)
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 5 {
		start := time.Now()
		if code, out, errOut := runAx(t, "status", "--server", "http://"+addr); code != cli.ExitOK {
			t.Fatalf("ax status during the flood (%d): exit %d %s %s", i, code, out, errOut)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("ax status during the flood took %s", d)
		}
		resp, err := hc.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatalf("/metrics during the flood (%d): %v", i, err)
		}
		resp.Body.Close()
		tok, _ := runner.ReadTokenFile(tokenFileOf(db))
		req, _ := http.NewRequest("POST", "http://"+addr+"/api/v1/executors/heartbeat", strings.NewReader(`{"address":"http://127.0.0.1:1"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		if resp, err = hc.Do(req); err != nil {
			t.Fatalf("an executor's heartbeat during the flood (%d): %v", i, err)
		}
		resp.Body.Close()
	}
	t.Logf("%d flood connections opened", opened.Load())
	close(stop)
	wg.Wait()
	stop = make(chan struct{}) // for the deferred close
	srv.stop(t)
}
