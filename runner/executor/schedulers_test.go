package executor_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/runner/executor"
)

// TestSchedulersFollowThePrimary: with several scheduler URLs, the SDK
// registers and heartbeats with whichever answers — past a dead one, and
// following a "primary": URL answer — and a result whose callback server is
// gone reaches another server's /api/v1/results, with the token sent only
// to configured scheduler URLs.
func TestSchedulersFollowThePrimary(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		seen []string // "path auth" at the live server
	)
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(200)
		io.WriteString(w, `{}`)
	}))
	defer live.Close()
	standby := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		json.NewEncoder(w).Encode(map[string]string{"error": "standby: cannot store it now", "primary": live.URL})
	}))
	defer standby.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()

	done := make(chan struct{})
	x, err := executor.New(executor.Config{Address: "http://127.0.0.1:9", Schedulers: []string{dead.URL, standby.URL, live.URL},
		Token: "tok", Heartbeat: 50 * time.Millisecond, Client: &http.Client{Timeout: 5 * time.Second}},
		map[string]runner.Func{"job": func(context.Context, runner.Attempt) error { close(done); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go x.Run(ctx)
	h := httptest.NewServer(x.Handler())
	defer h.Close()
	// A dispatch whose callback is the dead server (the primary that dispatched it died).
	d := `{"version":1,"pipeline":"p","task":"job","instance_id":7,"ticket":"tk-1","callback":"` + dead.URL + `/api/v1/results"}`
	req, _ := http.NewRequest("POST", h.URL+"/dispatch", strings.NewReader(d))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json") // as the scheduler sends it
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("dispatch: %v %v", resp, err)
	}
	resp.Body.Close()
	<-done
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := strings.Join(seen, "\n")
		mu.Unlock()
		if strings.Contains(got, "/api/v1/executors/register Bearer tok") && strings.Contains(got, "/api/v1/executors/heartbeat Bearer tok") &&
			strings.Contains(got, "/api/v1/results Bearer tok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live server saw:\n%s", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := executor.New(executor.Config{Address: "http://h:1", Schedulers: []string{"10.0.0.5:8080"}, Client: http.DefaultClient},
		map[string]runner.Func{"job": nil}); err == nil || !strings.Contains(err.Error(), `scheduler URL "10.0.0.5:8080"`) {
		t.Errorf("a scheduler URL without scheme: %v", err)
	}
}
