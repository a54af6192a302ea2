package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/runner"
)

// fakeScheduler records registrations, heartbeats and results; it can
// refuse the first result delivery to simulate a lost report.
type fakeScheduler struct {
	mu         sync.Mutex
	registers  int
	heartbeats int
	results    []runner.Report
	dropFirst  atomic.Bool
	refuseAll  atomic.Bool // every result answered 503 while set
	gotResult  chan runner.Report
}

func newFakeScheduler(t *testing.T) (*fakeScheduler, *httptest.Server) {
	f := &fakeScheduler{gotResult: make(chan runner.Report, 100)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/executors/register", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.registers++
		f.mu.Unlock()
	})
	mux.HandleFunc("POST /api/v1/executors/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.heartbeats++
		f.mu.Unlock()
	})
	mux.HandleFunc("POST /results", func(w http.ResponseWriter, r *http.Request) {
		if f.dropFirst.CompareAndSwap(true, false) || f.refuseAll.Load() {
			http.Error(w, "scheduler restarting", http.StatusServiceUnavailable)
			return
		}
		var rep runner.Report
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		f.mu.Lock()
		f.results = append(f.results, rep)
		f.mu.Unlock()
		f.gotResult <- rep
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv
}

type setup struct {
	x     *Executor
	url   string
	calls *atomic.Int64
	sched *fakeScheduler
	sURL  string
}

func newSetup(t *testing.T, cfg Config, funcs map[string]runner.Func) *setup {
	t.Helper()
	sched, ssrv := newFakeScheduler(t)
	calls := &atomic.Int64{}
	wrapped := map[string]runner.Func{}
	for name, fn := range funcs {
		wrapped[name] = func(ctx context.Context, a runner.Attempt) error { calls.Add(1); return fn(ctx, a) }
	}
	cfg.Client = ssrv.Client()
	x, err := New(cfg, wrapped)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(x.Handler())
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { x.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &setup{x: x, url: srv.URL, calls: calls, sched: sched, sURL: ssrv.URL}
}

func dispatch(t *testing.T, url string, d Dispatch) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(d)
	resp, err := http.Post(url+"/dispatch", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func disp(task, ticket string) Dispatch {
	return Dispatch{Version: 1, Pipeline: "p", Task: task, InstanceID: 1, Ticket: ticket,
		LogicalTime: time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC), Deadline: time.Now().Add(time.Minute)}
}

func TestSameTicketExecutesOnce(t *testing.T) {
	t.Parallel()
	s := newSetup(t, Config{}, map[string]runner.Func{"sync": func(context.Context, runner.Attempt) error { return nil }})
	code1, body1 := dispatch(t, s.url, disp("sync", "tk-1"))
	code2, body2 := dispatch(t, s.url, disp("sync", "tk-1"))
	if code1 != 200 || code2 != 200 || string(body1) != string(body2) {
		t.Errorf("answers %d %s / %d %s, want the same result twice", code1, body1, code2, body2)
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("executed %d times, want once", n)
	}
	var rep runner.Report
	if err := json.Unmarshal(body1, &rep); err != nil || rep.Ticket != "tk-1" || rep.Status != runner.StatusSuccess {
		t.Errorf("report %s: %v", body1, err)
	}
}

func TestReentrantTaskRefused(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s := newSetup(t, Config{}, map[string]runner.Func{"slow": func(ctx context.Context, _ runner.Attempt) error { <-release; return nil }})
	d1 := disp("slow", "tk-a")
	d1.Callback = s.sURL + "/results"
	if code, body := dispatch(t, s.url, d1); code != 202 || !strings.Contains(string(body), `"accepted":true`) {
		t.Fatalf("first: %d %s", code, body)
	}
	d2 := disp("slow", "tk-b")
	d2.Callback = d1.Callback
	code, body := dispatch(t, s.url, d2)
	if code != http.StatusConflict || !strings.Contains(string(body), "task slow is already running here (ticket tk-a)") {
		t.Errorf("second: %d %s", code, body)
	}
	close(release)
	if rep := <-s.sched.gotResult; rep.Ticket != "tk-a" || rep.Status != runner.StatusSuccess {
		t.Errorf("result %+v", rep)
	}
	// Once it ended, the task runs again.
	if code, _ := dispatch(t, s.url, d2); code != 202 {
		t.Errorf("after the first ended: %d", code)
	}
}

func TestDeadlineAndKillCancelTheContext(t *testing.T) {
	t.Parallel()
	s := newSetup(t, Config{}, map[string]runner.Func{"wait": func(ctx context.Context, _ runner.Attempt) error { <-ctx.Done(); return ctx.Err() }})
	d := disp("wait", "tk-deadline")
	d.Deadline = time.Now().Add(50 * time.Millisecond)
	code, body := dispatch(t, s.url, d)
	if code != 200 || !strings.Contains(string(body), `"error":"deadline exceeded"`) {
		t.Errorf("deadline: %d %s", code, body)
	}
	k := disp("wait", "tk-kill")
	k.Callback = s.sURL + "/results"
	if code, _ := dispatch(t, s.url, k); code != 202 {
		t.Fatalf("dispatch: %d", code)
	}
	resp, err := http.Post(s.url+"/kill", "application/json", strings.NewReader(`{"ticket":"tk-kill"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("kill: %v %v", resp, err)
	}
	resp.Body.Close()
	if rep := <-s.sched.gotResult; rep.Ticket != "tk-kill" || !strings.HasPrefix(rep.Error, "killed") { // "killed", or "killed before the work started" when the kill beat the worker
		t.Errorf("killed result %+v", rep)
	}
}

func TestLostResultIsRetriedAndDeliveredOnce(t *testing.T) {
	t.Parallel()
	s := newSetup(t, Config{}, map[string]runner.Func{"sync": func(context.Context, runner.Attempt) error { return errors.New("no rows") }})
	s.sched.dropFirst.Store(true)
	d := disp("sync", "tk-lost")
	d.Callback = s.sURL + "/results"
	if code, _ := dispatch(t, s.url, d); code != 202 {
		t.Fatalf("dispatch: %d", code)
	}
	rep := <-s.sched.gotResult
	if rep.Ticket != "tk-lost" || rep.Status != runner.StatusFailed || rep.Error != "no rows" {
		t.Errorf("result %+v", rep)
	}
	select {
	case again := <-s.sched.gotResult:
		t.Errorf("delivered twice: %+v", again)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestFullPoolRefusesWithoutFailing(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	funcs := map[string]runner.Func{}
	for i := range 4 {
		funcs[fmt.Sprintf("t%d", i)] = func(ctx context.Context, _ runner.Attempt) error { <-release; return nil }
	}
	s := newSetup(t, Config{Core: 1, Max: 1, Queue: 2}, funcs)
	var codes []int
	var last string
	for i := range 4 {
		d := disp(fmt.Sprintf("t%d", i), fmt.Sprintf("tk-%d", i))
		d.Callback = s.sURL + "/results"
		code, body := dispatch(t, s.url, d)
		codes = append(codes, code)
		last = string(body)
	}
	// One runs, two wait in the queue, the fourth is refused: try elsewhere or later.
	if fmt.Sprint(codes[3]) != "503" || !strings.Contains(last, "worker pool full") || codes[0] != 202 {
		t.Errorf("codes %v, last %s", codes, last)
	}
}

func TestRegistersAndHeartbeats(t *testing.T) {
	t.Parallel()
	sched, ssrv := newFakeScheduler(t)
	x, err := New(Config{Address: "http://127.0.0.1:9999", Scheduler: ssrv.URL, Heartbeat: 20 * time.Millisecond, Client: ssrv.Client()},
		map[string]runner.Func{"a": func(context.Context, runner.Attempt) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { x.Run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		sched.mu.Lock()
		r, h := sched.registers, sched.heartbeats
		sched.mu.Unlock()
		if r == 1 && h >= 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	sched.mu.Lock()
	defer sched.mu.Unlock()
	if sched.registers != 1 || sched.heartbeats < 3 {
		t.Errorf("registers %d, heartbeats %d", sched.registers, sched.heartbeats)
	}
}

func TestMalformedDispatches(t *testing.T) {
	t.Parallel()
	s := newSetup(t, Config{}, map[string]runner.Func{"a": func(context.Context, runner.Attempt) error { return nil }})
	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{not json`, 400, "malformed dispatch"},
		{`{"version":1,"task":"a"}`, 400, "ticket and task are required"},
		{`{"version":2,"task":"a","ticket":"t"}`, 400, "protocol version 2"},
		{`{"version":1,"task":"a","ticket":"t","extra":true}`, 400, `unknown field "extra"`},
		{`{"version":1,"task":"b","ticket":"t"}`, 404, `task "b" is not served here`},
		{`{"version":1,"task":"a","ticket":"t","params":{"x":"` + strings.Repeat("y", maxDispatch) + `"}}`, 400, "malformed dispatch"},
	} {
		resp, err := http.Post(s.url+"/dispatch", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var ans Answer
		err = json.NewDecoder(resp.Body).Decode(&ans)
		resp.Body.Close()
		if err != nil || ans.Accepted || resp.StatusCode != tc.code || !strings.Contains(ans.Reason, tc.want) {
			t.Errorf("%.40s: %d %+v (%v), want %d %q", tc.body, resp.StatusCode, ans, err, tc.code, tc.want)
		}
	}
	if n := s.calls.Load(); n != 0 {
		t.Errorf("malformed dispatches executed %d times", n)
	}
}

// TestSyncClientAgainstSDK: the scheduler's HTTP executor (runner.HTTP) and
// this SDK speak the same protocol.
func TestSyncClientAgainstSDK(t *testing.T) {
	t.Parallel()
	s := newSetup(t, Config{}, map[string]runner.Func{"clean": func(_ context.Context, a runner.Attempt) error {
		if a.Params["region"] != "cn" {
			return fmt.Errorf("params %v", a.Params)
		}
		return nil
	}})
	h := runner.NewHTTP(http.DefaultClient, func(runner.Attempt) (string, error) { return s.url + "/dispatch", nil })
	r, err := h.Execute(context.Background(), runner.Attempt{Pipeline: "p", Task: "clean", Ticket: "tk-sync", InstanceID: 3,
		LogicalTime: time.Now(), Deadline: time.Now().Add(time.Minute), Params: map[string]any{"region": "cn"}})
	if err != nil || r.Status != runner.StatusSuccess || r.Ticket != "tk-sync" {
		t.Errorf("result %+v, %v", r, err)
	}
}

// refusingScheduler refuses the first n registrations as a scheduler that
// is not listening yet would, and records when each request came.
type refusingScheduler struct {
	mu sync.Mutex
	n  int
	at []time.Duration // registrations
	t0 time.Time
}

func (s *refusingScheduler) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.HasSuffix(r.URL.Path, "/register") {
		s.at = append(s.at, time.Since(s.t0))
		if len(s.at) <= s.n {
			return nil, errors.New("connection refused")
		}
	}
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// TestRegistrationRetriedSoonWhenSchedulerStartsLater: an executor started
// before its scheduler does not wait a whole heartbeat to register: it tries
// again after 1 s, then 2 s (doubling up to the heartbeat interval).
func TestRegistrationRetriedSoonWhenSchedulerStartsLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sched := &refusingScheduler{n: 2, t0: time.Now()}
		x, err := New(Config{Address: "http://127.0.0.1:9999", Scheduler: "http://sched.test", Client: &http.Client{Transport: sched}},
			map[string]runner.Func{"a": func(context.Context, runner.Attempt) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { x.Run(ctx); close(done) }()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		cancel()
		<-done
		sched.mu.Lock()
		defer sched.mu.Unlock()
		if fmt.Sprint(sched.at) != "[0s 1s 3s]" {
			t.Errorf("registration attempts at %v, want [0s 1s 3s]: retried after 1 s, then 2 s, then registered", sched.at)
		}
	})
}

// failingHeartbeats answers the heartbeats of a window 503, as a scheduler
// whose store fails writes does, and records when each came.
type failingHeartbeats struct {
	mu       sync.Mutex
	t0       time.Time
	from, to time.Duration // heartbeats in [from, to) fail
	at       []time.Duration
}

func (s *failingHeartbeats) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	code := 200
	if strings.HasSuffix(r.URL.Path, "/heartbeat") {
		d := time.Since(s.t0)
		s.at = append(s.at, d)
		if d >= s.from && d < s.to {
			code = http.StatusServiceUnavailable
		}
	}
	return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// TestFailedHeartbeatRetriedSoon: a heartbeat the scheduler answers 503 (its
// store failed the write) is sent again after 1 s, then 2 s, not a whole
// interval later. At the full interval, two failed in a row (a 14 s store
// fault) and a network cut left the executor 33 s without a recorded
// heartbeat; the scheduler failed over as lost the attempt it had accepted
// 8 s before, and ran it again beside it (seed 1090 of the simulator).
func TestFailedHeartbeatRetriedSoon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sched := &failingHeartbeats{t0: time.Now(), from: 15 * time.Second, to: 24 * time.Second}
		x, err := New(Config{Address: "http://127.0.0.1:9999", Scheduler: "http://sched.test", Client: &http.Client{Transport: sched}},
			map[string]runner.Func{"a": func(context.Context, runner.Attempt) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { x.Run(ctx); close(done) }()
		time.Sleep(50 * time.Second)
		synctest.Wait()
		cancel()
		<-done
		sched.mu.Lock()
		defer sched.mu.Unlock()
		// Registered at 0 s; heartbeats at 10 s, 20 s (refused), 21 s and 23 s
		// (refused), 27 s (taken), then every 10 s again.
		if fmt.Sprint(sched.at) != "[10s 20s 21s 23s 27s 37s 47s]" {
			t.Errorf("heartbeats at %v, want [10s 20s 21s 23s 27s 37s 47s]: a refused one sent again after 1 s, 2 s, 4 s", sched.at)
		}
	})
}

// tokenCapture records the Authorization header of each request by host.
type tokenCapture struct {
	mu   sync.Mutex
	auth map[string][]string
}

func (c *tokenCapture) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.auth[r.URL.Host] = append(c.auth[r.URL.Host], r.Header.Get("Authorization"))
	c.mu.Unlock()
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// TestTokenGoesToTheSchedulerOnly: the executor token goes with
// registrations, heartbeats and results to the scheduler, and never to a
// dispatch's callback elsewhere.
func TestTokenGoesToTheSchedulerOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		capture := &tokenCapture{auth: map[string][]string{}}
		x, err := New(Config{Address: "http://127.0.0.1:9999", Scheduler: "http://sched.test", Token: "x-tok", Client: &http.Client{Transport: capture}},
			map[string]runner.Func{"a": func(context.Context, runner.Attempt) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { x.Run(ctx); close(done) }()
		for i, callback := range []string{"http://sched.test/api/v1/results", "http://elsewhere.test/results"} {
			d := fmt.Sprintf(`{"version":1,"task":"a","instance_id":%d,"ticket":"t%d","deadline":"2100-01-01T00:00:00Z","callback":%q}`, i+1, i, callback)
			req := httptest.NewRequest("POST", "http://127.0.0.1:9999/dispatch", strings.NewReader(d))
			req.Header.Set("Authorization", "Bearer x-tok") // as the scheduler sends it
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			x.Handler().ServeHTTP(rec, req)
			if rec.Code/100 != 2 {
				t.Fatalf("dispatch %d: %d %s", i, rec.Code, rec.Body)
			}
			time.Sleep(time.Second) // it runs and its result goes out before the next one (re-entrancy guard)
			synctest.Wait()
		}
		time.Sleep(15 * time.Second) // a heartbeat
		synctest.Wait()
		cancel()
		<-done
		capture.mu.Lock()
		defer capture.mu.Unlock()
		for _, a := range capture.auth["sched.test"] {
			if a != "Bearer x-tok" {
				t.Errorf("a request to the scheduler carried %q", a)
			}
		}
		if len(capture.auth["sched.test"]) < 3 { // register, result, heartbeat
			t.Errorf("requests to the scheduler: %v", capture.auth["sched.test"])
		}
		if got := capture.auth["elsewhere.test"]; len(got) != 1 || got[0] != "" {
			t.Errorf("the foreign callback got %q, want one request without a token", got)
		}
	})
}

// TestDispatchNeedsTheSharedToken: an executor with a token runs nothing for
// a dispatch or kill without it; the scheduler's HTTP client sends it.
func TestDispatchNeedsTheSharedToken(t *testing.T) {
	t.Parallel()
	var ran atomic.Int32
	s := newSetup(t, Config{Token: "shared"}, map[string]runner.Func{"clean": func(context.Context, runner.Attempt) error {
		ran.Add(1)
		return nil
	}})
	url := func(runner.Attempt) (string, error) { return s.url + "/dispatch", nil }
	at := runner.Attempt{Pipeline: "p", Task: "clean", Ticket: "tk-1", InstanceID: 3, LogicalTime: time.Now(), Deadline: time.Now().Add(time.Minute)}
	r, err := runner.NewHTTP(http.DefaultClient, url).Execute(context.Background(), at)
	if err != nil || r.Status == runner.StatusSuccess || !strings.Contains(r.Error, "bearer token") || ran.Load() != 0 {
		t.Errorf("without the token: %+v %v, %d runs", r, err, ran.Load())
	}
	resp, err := http.Post(s.url+"/kill", "application/json", strings.NewReader(`{"ticket": "tk-1"}`))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("kill without the token: %v %v", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
	at.Ticket = "tk-2"
	r, err = runner.NewHTTP(http.DefaultClient, url).WithToken("shared").Execute(context.Background(), at)
	if err != nil || r.Status != runner.StatusSuccess || ran.Load() != 1 {
		t.Errorf("with the token: %+v %v, %d runs", r, err, ran.Load())
	}
}

// The SDK's server stands behind the door: a page of another site cannot
// make it run a task (text/plain, foreign Origin, rebound Host), and
// nothing runs.
func TestExecutorDoor(t *testing.T) {
	t.Parallel()
	ran := make(chan struct{}, 4)
	x, err := New(Config{Address: "http://127.0.0.1:9999", Client: &http.Client{}},
		map[string]runner.Func{"a": func(context.Context, runner.Attempt) error { ran <- struct{}{}; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	d := `{"version":1,"task":"a","instance_id":1,"ticket":"t1","deadline":"2100-01-01T00:00:00Z","callback":"http://127.0.0.1:1/r"}`
	for _, tc := range []struct {
		name, host, ctype, origin string
		code                      int
	}{
		{"form post", "127.0.0.1:9999", "text/plain", "", 415},
		{"foreign origin", "127.0.0.1:9999", "application/json", "https://evil.example", 403},
		{"rebound host", "evil.example:9999", "application/json", "", 403},
	} {
		req := httptest.NewRequest("POST", "http://"+tc.host+"/dispatch", strings.NewReader(d))
		req.Header.Set("Content-Type", tc.ctype)
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		rec := httptest.NewRecorder()
		x.Handler().ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.name, rec.Code, rec.Body, tc.code)
		}
	}
	select {
	case <-ran:
		t.Error("a refused dispatch ran")
	default:
	}
}

// TestSyncHangUpStopsTheWork: in the synchronous form the caller waits on
// the connection for the result; when it hangs up (a kill, a shutdown that
// gives the attempt back, a broken connection: the scheduler has ended the
// attempt on its side), the work stops rather than run on beside the next
// attempt, and the ticket's result says so. It ran on before (found by the
// simulator: TestSimSyncKillStopsRemoteWork).
func TestSyncHangUpStopsTheWork(t *testing.T) {
	t.Parallel()
	started, stopped := make(chan struct{}), make(chan error, 1)
	s := newSetup(t, Config{}, map[string]runner.Func{"wait": func(ctx context.Context, _ runner.Attempt) error {
		close(started)
		select {
		case <-ctx.Done():
			stopped <- context.Cause(ctx)
		case <-time.After(10 * time.Second):
			stopped <- nil
		}
		return ctx.Err()
	}})
	ctx, hangUp := context.WithCancel(context.Background())
	b, _ := json.Marshal(disp("wait", "tk-hangup"))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/dispatch", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-started
	hangUp()
	if err := <-errc; err == nil {
		t.Fatal("the dispatch was answered; want the caller's hang-up")
	}
	if cause := <-stopped; cause == nil {
		t.Fatal("the work ran on after its caller hung up")
	}
	// The ticket's result, as a status query or a repeated dispatch finds it.
	code, body := dispatch(t, s.url, disp("wait", "tk-hangup"))
	if code != 200 || !strings.Contains(string(body), `"status":"failed"`) || !strings.Contains(string(body), "hung up") {
		t.Errorf("the ticket afterwards: %d %s, want its result: failed, the caller hung up", code, body)
	}
}

// TestTokenFile: with Config.TokenFile, the executor refuses dispatches
// (503, nothing runs) and sends no registration until the file can be read;
// then it requires its token on dispatches and sends it to the scheduler.
// A file others may read is never taken.
func TestTokenFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "executor.token")
		capture := &tokenCapture{auth: map[string][]string{}}
		var ran atomic.Int32
		x, err := New(Config{Address: "http://127.0.0.1:9999", Scheduler: "http://sched.test", TokenFile: file, Client: &http.Client{Transport: capture}},
			map[string]runner.Func{"a": func(context.Context, runner.Attempt) error { ran.Add(1); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { x.Run(ctx); close(done) }()
		call := func(ticket, auth string) int {
			d := fmt.Sprintf(`{"version":1,"task":"a","instance_id":1,"ticket":%q,"deadline":"2100-01-01T00:00:00Z"}`, ticket)
			req := httptest.NewRequest("POST", "http://127.0.0.1:9999/dispatch", strings.NewReader(d))
			if auth != "" {
				req.Header.Set("Authorization", "Bearer "+auth)
			}
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			x.Handler().ServeHTTP(rec, req)
			return rec.Code
		}
		if code := call("t0", ""); code != http.StatusServiceUnavailable {
			t.Errorf("dispatch before the token file exists: %d, want 503", code)
		}
		if err := os.WriteFile(file, []byte("file-tok\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if code := call("t1", "file-tok"); code != http.StatusServiceUnavailable {
			t.Errorf("dispatch while the token file is readable by others: %d, want 503", code)
		}
		if err := os.Chmod(file, 0o600); err != nil {
			t.Fatal(err)
		}
		if code := call("t2", "wrong"); code != http.StatusUnauthorized {
			t.Errorf("dispatch with a wrong token: %d, want 401", code)
		}
		if code := call("t3", "file-tok"); code != http.StatusOK {
			t.Errorf("dispatch with the file's token: %d, want 200", code)
		}
		time.Sleep(15 * time.Second) // registration retried, then a heartbeat
		synctest.Wait()
		cancel()
		<-done
		capture.mu.Lock()
		defer capture.mu.Unlock()
		got := capture.auth["sched.test"]
		if len(got) < 2 {
			t.Errorf("requests to the scheduler: %q, want a registration and a heartbeat", got)
		}
		for _, a := range got {
			if a != "Bearer file-tok" {
				t.Errorf("a request to the scheduler carried %q, want the file's token (none is sent before it can be read)", a)
			}
		}
		if ran.Load() != 1 {
			t.Errorf("%d runs, want 1 (the dispatch with the token)", ran.Load())
		}
	})
}
