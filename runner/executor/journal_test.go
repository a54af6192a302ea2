package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/runner"
)

// A process of an executor on a state dir: stop ends it as a kill would
// (its Run ends, its journal is closed, whatever its work does afterwards
// is lost), without waiting for its work.
type proc struct {
	x    *Executor
	url  string
	stop func()
}

func startProc(t *testing.T, dir string, client *http.Client, calls *atomic.Int64, funcs map[string]runner.Func, core int) *proc {
	t.Helper()
	wrapped := map[string]runner.Func{}
	for name, fn := range funcs {
		wrapped[name] = func(ctx context.Context, a runner.Attempt) error { calls.Add(1); return fn(ctx, a) }
	}
	x, err := New(Config{StateDir: dir, Client: client, Core: core, Max: core}, wrapped)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(x.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { x.Run(ctx); close(done) }()
	stopped := false
	p := &proc{x: x, url: srv.URL}
	p.stop = func() {
		if stopped {
			return
		}
		stopped = true
		srv.Close()
		cancel()
		<-done
		if err := x.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	t.Cleanup(p.stop)
	return p
}

func status(t *testing.T, url string, tickets ...string) runner.StatusAnswer {
	t.Helper()
	b, _ := json.Marshal(runner.StatusQuery{Tickets: tickets})
	resp, err := http.Post(url+"/status", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var ans runner.StatusAnswer
	if resp.StatusCode != 200 || json.Unmarshal(body, &ans) != nil {
		t.Fatalf("status: %d %s", resp.StatusCode, body)
	}
	return ans
}

// An executor killed after its work finished and before its report reached
// a scheduler answers, once restarted on its state dir, that the ticket is
// done with its result, delivers the result, and answers a redispatch of
// the ticket with it: the work ran once.
func TestRestartRemembersDoneTickets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sched, ssrv := newFakeScheduler(t)
	sched.refuseAll.Store(true) // the report never gets through before the kill
	calls := &atomic.Int64{}
	funcs := map[string]runner.Func{"sync": func(context.Context, runner.Attempt) error { return nil }}
	a := startProc(t, dir, ssrv.Client(), calls, funcs, 1)
	d := disp("sync", "tk-done")
	d.Callback = ssrv.URL + "/results"
	if code, body := dispatch(t, a.url, d); code != 202 {
		t.Fatalf("dispatch: %d %s", code, body)
	}
	waitUntil(t, func() bool { return status(t, a.url, "tk-done").Tickets["tk-done"].State == runner.TicketDone })
	bootA := status(t, a.url, "tk-done").Boot
	a.stop()

	sched.refuseAll.Store(false)
	b := startProc(t, dir, ssrv.Client(), calls, funcs, 1)
	ans := status(t, b.url, "tk-done", "tk-never")
	if st := ans.Tickets["tk-done"]; st.State != runner.TicketDone || st.Result == nil || st.Result.Status != runner.StatusSuccess {
		t.Errorf("after the restart, tk-done is %+v, want done with its success", st)
	}
	if st := ans.Tickets["tk-never"]; st.State != runner.TicketUnknown {
		t.Errorf("a ticket never dispatched is %+v, want unknown", st)
	}
	if ans.Boot != bootA {
		t.Errorf("boot %q after the restart, want %q: the ticket memory survived, so the scheduler must not fail its attempts", ans.Boot, bootA)
	}
	select {
	case rep := <-sched.gotResult:
		if rep.Ticket != "tk-done" || rep.Status != runner.StatusSuccess {
			t.Errorf("delivered %+v", rep)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the restarted executor did not deliver the result the killed one could not")
	}
	code, body := dispatch(t, b.url, d)
	if code != 202 || !strings.Contains(string(body), `"status":"success"`) {
		t.Errorf("redispatch of the ticket: %d %s, want its earlier result", code, body)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the work ran %d times, want once", n)
	}
}

// A ticket whose work started and never finished (the process died while
// it ran) is reported, after a restart, as an interrupted failure, never as
// unknown and never run again by the executor on its own; a ticket that was
// accepted and queued but never started runs once after the restart.
func TestRestartReportsInterruptedWorkAndRunsQueuedWork(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sched, ssrv := newFakeScheduler(t)
	calls := &atomic.Int64{}
	started := make(chan struct{}, 1)
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	funcs := map[string]runner.Func{
		"slow":  func(ctx context.Context, _ runner.Attempt) error { started <- struct{}{}; <-block; return nil },
		"quick": func(context.Context, runner.Attempt) error { return nil },
	}
	a := startProc(t, dir, ssrv.Client(), calls, funcs, 1) // one worker: quick waits behind slow
	ds, dq := disp("slow", "tk-slow"), disp("quick", "tk-quick")
	ds.Callback, dq.Callback = ssrv.URL+"/results", ssrv.URL+"/results"
	if code, body := dispatch(t, a.url, ds); code != 202 {
		t.Fatalf("dispatch slow: %d %s", code, body)
	}
	<-started
	if code, body := dispatch(t, a.url, dq); code != 202 {
		t.Fatalf("dispatch quick: %d %s", code, body)
	}
	a.stop() // killed while slow runs and quick waits

	b := startProc(t, dir, ssrv.Client(), calls, map[string]runner.Func{
		"slow":  func(context.Context, runner.Attempt) error { t.Error("interrupted work ran again"); return nil },
		"quick": funcs["quick"],
	}, 1)
	got := map[string]runner.Report{}
	for len(got) < 2 {
		select {
		case rep := <-sched.gotResult:
			got[rep.Ticket] = rep
		case <-time.After(10 * time.Second):
			t.Fatalf("after the restart, results %+v, want tk-slow and tk-quick", got)
		}
	}
	if rep := got["tk-slow"]; rep.Status != runner.StatusFailed || !strings.Contains(rep.Error, "interrupted") || rep.Permanent {
		t.Errorf("tk-slow reported %+v, want a failure that says it was interrupted (retried per policy)", rep)
	}
	if rep := got["tk-quick"]; rep.Status != runner.StatusSuccess {
		t.Errorf("tk-quick reported %+v, want it run once after the restart", rep)
	}
	st := status(t, b.url, "tk-slow").Tickets["tk-slow"]
	if st.State != runner.TicketDone || st.Result == nil || !strings.Contains(st.Result.Error, "interrupted") {
		t.Errorf("status of tk-slow %+v, want done with the interrupted failure", st)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d executions, want 2 (slow once before the kill, quick once after)", n)
	}
	// A restart after everything was delivered (and the acknowledgements
	// recorded) delivers nothing again.
	waitUntil(t, func() bool {
		j, _ := os.ReadFile(filepath.Join(dir, journalFile))
		return strings.Count(string(j), `"s":"acked"`) == 2
	})
	b.stop()
	c := startProc(t, dir, ssrv.Client(), calls, funcs, 1)
	if st := status(t, c.url, "tk-quick").Tickets["tk-quick"]; st.State != runner.TicketDone {
		t.Errorf("tk-quick after a second restart: %+v", st)
	}
	select {
	case rep := <-sched.gotResult:
		t.Errorf("an acknowledged result delivered again after a restart: %+v", rep)
	case <-time.After(300 * time.Millisecond):
	}
}

// A ticket accepted and queued whose deadline passed before the executor
// restarted is not run after the restart: its attempt was failed by its
// timeout and the scheduler may be running the retry elsewhere. It is
// reported failed, saying it never started (seed 283 of the simulator: an
// executor restarted on its journal 21 s after a ticket's deadline ran it
// beside the instance's third attempt, two attempts at once). The same
// holds for a job whose deadline passes while it waits in the queue.
func TestRestartDoesNotRunWorkPastItsDeadline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sched, ssrv := newFakeScheduler(t)
	calls := &atomic.Int64{}
	started := make(chan struct{}, 1)
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	ran := make(chan string, 4)
	funcs := map[string]runner.Func{
		"slow":  func(ctx context.Context, _ runner.Attempt) error { started <- struct{}{}; <-block; return nil },
		"quick": func(_ context.Context, a runner.Attempt) error { ran <- a.Ticket; return nil },
	}
	a := startProc(t, dir, ssrv.Client(), calls, funcs, 1) // one worker: quick waits behind slow
	ds, dq := disp("slow", "tk-slow"), disp("quick", "tk-late")
	ds.Callback, dq.Callback = ssrv.URL+"/results", ssrv.URL+"/results"
	dq.Deadline = time.Now().Add(-time.Second) // as when the executor comes back after the deadline
	if code, body := dispatch(t, a.url, ds); code != 202 {
		t.Fatalf("dispatch slow: %d %s", code, body)
	}
	<-started
	if code, body := dispatch(t, a.url, dq); code != 202 {
		t.Fatalf("dispatch quick: %d %s", code, body)
	}
	a.stop() // killed while slow runs and quick waits

	startProc(t, dir, ssrv.Client(), calls, funcs, 1)
	var rep runner.Report
	for rep.Ticket != "tk-late" {
		select {
		case rep = <-sched.gotResult:
		case <-time.After(10 * time.Second):
			t.Fatal("after the restart, no result for tk-late")
		}
	}
	if rep.Status != runner.StatusFailed || !strings.Contains(rep.Error, "deadline exceeded before the work started") || rep.Permanent {
		t.Errorf("tk-late reported %+v, want a failure saying its deadline passed before it started", rep)
	}
	select {
	case tk := <-ran:
		t.Errorf("%s ran after its deadline", tk)
	default:
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d executions, want 1 (slow before the kill; tk-late never)", n)
	}
}

// A torn last line (the process died inside a write) is skipped; a state
// dir held by a live executor is refused to a second one.
func TestJournalTornTailAndExclusiveDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, ssrv := newFakeScheduler(t)
	calls := &atomic.Int64{}
	funcs := map[string]runner.Func{"sync": func(context.Context, runner.Attempt) error { return nil }}
	a := startProc(t, dir, ssrv.Client(), calls, funcs, 1)
	if code, body := dispatch(t, a.url, disp("sync", "tk-1")); code != 200 {
		t.Fatalf("dispatch: %d %s", code, body)
	}
	if _, err := New(Config{StateDir: dir, Client: ssrv.Client()}, funcs); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("a second executor on the same state dir: %v, want refused as in use", err)
	}
	a.stop()
	f, err := os.OpenFile(filepath.Join(dir, journalFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"t":"tk-2","s":"acc`)
	f.Close()
	b := startProc(t, dir, ssrv.Client(), calls, funcs, 1)
	ans := status(t, b.url, "tk-1", "tk-2")
	if ans.Tickets["tk-1"].State != runner.TicketDone || ans.Tickets["tk-2"].State != runner.TicketUnknown {
		t.Errorf("after a torn tail: %+v, want tk-1 done and tk-2 unknown", ans.Tickets)
	}
}

func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("condition not met within 10 s")
}

// A status query from an address that is not a configured scheduler, with
// no token to authenticate it, is refused with the reason and logged, and
// says nothing about any ticket; from a scheduler's address, or with the
// token, it is answered.
func TestStatusOnlyForSchedulers(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	var logMu sync.Mutex
	funcs := map[string]runner.Func{"sync": func(context.Context, runner.Attempt) error { return nil }}
	serve := func(cfg Config) string {
		cfg.Client, cfg.Address = http.DefaultClient, "http://127.0.0.1:1"
		cfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logged}, nil))
		x, err := New(cfg, funcs) // not Run: it registers nowhere
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(x.Handler())
		t.Cleanup(srv.Close)
		b, _ := json.Marshal(disp("sync", "tk-secret"))
		req, _ := http.NewRequest("POST", srv.URL+"/dispatch", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("dispatch: %v %v", resp, err)
		}
		resp.Body.Close()
		return srv.URL
	}
	ask := func(url, token string) (int, string) {
		req, _ := http.NewRequest("POST", url+"/status", strings.NewReader(`{"tickets":["tk-secret"]}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	elsewhere := serve(Config{Scheduler: "http://10.255.0.1:8080"})
	code, body := ask(elsewhere, "")
	if code != http.StatusForbidden || !strings.Contains(body, "127.0.0.1, which is not a configured scheduler (http://10.255.0.1:8080)") || strings.Contains(body, "tk-secret") {
		t.Errorf("status from a stranger: %d %s, want 403 with the reason and nothing about the ticket", code, body)
	}
	logMu.Lock()
	if !strings.Contains(logged.String(), "msg=status_refused from=127.0.0.1:") {
		t.Errorf("the refusal was not logged: %s", logged.String())
	}
	logMu.Unlock()
	if code, body := ask(serve(Config{Scheduler: "http://127.0.0.1:8080"}), ""); code != 200 || !strings.Contains(body, `"state":"done"`) {
		t.Errorf("status from the scheduler's address: %d %s", code, body)
	}
	withToken := serve(Config{Scheduler: "http://10.255.0.1:8080", Token: "s3"})
	if code, body := ask(withToken, "s3"); code != 200 || !strings.Contains(body, `"state":"done"`) {
		t.Errorf("status with the token: %d %s", code, body)
	}
	if code, body := ask(withToken, ""); code != http.StatusUnauthorized || strings.Contains(body, "tk-secret") {
		t.Errorf("status without the token: %d %s", code, body)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A journal line that cannot be read is logged with its file and line; a
// ticket whose accepted line was lost but that has a later line is
// reported interrupted and never runs again. A lock file deleted under a
// running executor lets no second process in: the directory is locked too.
func TestJournalGarbledLineAndDeletedLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := filepath.Join(dir, journalFile)
	garbled := `{"t":"ok","s":"accepted","d":{"version":1,"task":"sync","ticket":"ok"},"x":"2999-01-01T00:00:00Z"}` + "\n" +
		`{"t":"g1","s":"accepted","d":{"version":1,"ta` + "\n" +
		`{"t":"g1","s":"started"}` + "\n"
	if err := os.WriteFile(name, []byte(garbled), 0o600); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	var mu sync.Mutex
	ran := map[string]int{}
	funcs := map[string]runner.Func{"sync": func(_ context.Context, a runner.Attempt) error {
		mu.Lock()
		defer mu.Unlock()
		ran[a.Ticket]++
		return nil
	}}
	x, err := New(Config{StateDir: dir, Client: &http.Client{}, Logger: slog.New(slog.NewTextHandler(&syncWriter{w: &logged, mu: &mu}, nil))}, funcs)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(x.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { x.Run(ctx); close(done) }()
	t.Cleanup(func() { srv.Close(); cancel(); <-done; x.Close() })

	mu.Lock()
	log := logged.String()
	mu.Unlock()
	if !strings.Contains(log, name+":2: ") || !strings.Contains(log, name+":3: ticket g1 has no readable accepted line") {
		t.Errorf("log %q: want the unreadable line 2 and ticket g1 of line 3 named", log)
	}
	st := status(t, srv.URL, "g1")
	if g := st.Tickets["g1"]; g.State != runner.TicketDone || g.Result == nil || g.Result.Error != interrupted {
		t.Errorf("status of g1: %+v, want done, failed as interrupted", g)
	}
	if code, body := dispatch(t, srv.URL, disp("sync", "g1")); code != 200 || !strings.Contains(string(body), "interrupted") {
		t.Errorf("redispatch of g1: %d %s, want its interrupted result", code, body)
	}
	waitUntil(t, func() bool { mu.Lock(); defer mu.Unlock(); return ran["ok"] == 1 })
	mu.Lock()
	if ran["g1"] != 0 {
		t.Errorf("g1 ran %d times, want never", ran["g1"])
	}
	mu.Unlock()

	if err := os.Remove(filepath.Join(dir, lockFile)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(name)
	if _, err := New(Config{StateDir: dir, Client: &http.Client{}}, funcs); err == nil || !strings.Contains(err.Error(), "is in use by another executor process") {
		t.Errorf("a second executor after the lock file was deleted: %v, want refused as in use", err)
	}
	if after, _ := os.ReadFile(name); !bytes.Equal(before, after) {
		t.Errorf("the refused executor rewrote the journal:\n%s\nwant\n%s", after, before)
	}
}

type syncWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
