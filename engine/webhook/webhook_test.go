package webhook

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// endpoint is a fake transport: it answers each POST with the next code
// (or a connection error for 0) and records bodies and times.
type endpoint struct {
	mu     sync.Mutex
	codes  []int
	bodies []string
	at     []time.Time
}

func (e *endpoint) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.bodies = append(e.bodies, string(b))
	e.at = append(e.at, time.Now())
	code := 200
	if len(e.codes) > 0 {
		code, e.codes = e.codes[0], e.codes[1:]
	}
	if code == 0 {
		return nil, errors.New("connection refused")
	}
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

func TestRetriedWithBackoffThenDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &endpoint{codes: []int{500, 0, 200}}
		w, err := New(Config{URL: "http://alerts.test/hook", Client: &http.Client{Transport: ep}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()
		start := time.Now()
		if !w.Send(map[string]string{"kind": "breaker_open"}) {
			t.Fatal("not queued")
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		cancel()
		<-done
		if len(ep.bodies) != 3 || ep.bodies[2] != `{"kind":"breaker_open"}` {
			t.Fatalf("posts: %q", ep.bodies)
		}
		if d1, d2 := ep.at[1].Sub(start), ep.at[2].Sub(start); d1 != time.Second || d2 != 3*time.Second {
			t.Errorf("retries at +%s and +%s, want +1s and +3s (1 s, then doubled)", d1, d2)
		}
		if w.Delivered() != 1 || w.Dropped() != 0 {
			t.Errorf("delivered %d dropped %d", w.Delivered(), w.Dropped())
		}
	})
}

func TestGivesUpAfterAttemptsAndNeverBlocksWhenFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &endpoint{codes: []int{503, 503, 503}}
		w, err := New(Config{URL: "https://alerts.test/hook", Client: &http.Client{Transport: ep}, Attempts: 3, Queue: 2})
		if err != nil {
			t.Fatal(err)
		}
		// Nothing runs yet: the queue of 2 fills and the third is refused at once.
		if !w.Send(1) || !w.Send(2) || w.Send(3) {
			t.Fatal("want two queued, the third refused")
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		cancel()
		<-done
		// The first alert: 3 failed attempts, dropped; the second delivered.
		if len(ep.bodies) != 4 || w.Delivered() != 1 || w.Dropped() != 2 {
			t.Errorf("posts %q, delivered %d, dropped %d; want 4 posts, 1 delivered, 2 dropped", ep.bodies, w.Delivered(), w.Dropped())
		}
	})
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no scheme", Config{URL: "alerts.test/hook", Client: http.DefaultClient}, `URL "alerts.test/hook": give an http:// or https:// URL`},
		{"ftp", Config{URL: "ftp://alerts.test/", Client: http.DefaultClient}, "give an http:// or https:// URL"},
		{"no client", Config{URL: "http://alerts.test/"}, "Client is required"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
