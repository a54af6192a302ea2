package engine

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// fakeExecutor answers the scheduler's requests to one executor address in
// memory: dispatches (202, accepted; the result never comes by callback),
// status queries (by status, or unreachable when status is nil) and kills
// (unreachable while cut). It records every request by path.
type fakeExecutor struct {
	mu     sync.Mutex
	cut    bool
	busy   bool                       // dispatches refused: 409, the task already runs here
	status func(ticket string) string // the ticket's answer in a status query, as JSON
	paths  []string
	ticket []string // the tickets dispatched, in order
}

func (f *fakeExecutor) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths = append(f.paths, r.URL.Path)
	answer := func(code int, s string) (*http.Response, error) {
		return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(s)), Request: r}, nil
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/dispatch"):
		if f.cut {
			return nil, fmt.Errorf("dial %s: connection refused", r.URL.Host)
		}
		if f.busy {
			return answer(http.StatusConflict, `{"reason":"task already running here"}`)
		}
		_, t, _ := strings.Cut(string(body), `"ticket":"`)
		t, _, _ = strings.Cut(t, `"`)
		f.ticket = append(f.ticket, t)
		return answer(http.StatusAccepted, `{"accepted":true,"boot":"b1"}`)
	case strings.HasSuffix(r.URL.Path, "/status"):
		if f.status == nil {
			return nil, fmt.Errorf("dial %s: connection refused", r.URL.Host)
		}
		_, t, _ := strings.Cut(string(body), `"tickets":["`)
		t, _, _ = strings.Cut(t, `"`)
		return answer(http.StatusOK, fmt.Sprintf(`{"boot":"b1","tickets":{%q:%s}}`, t, f.status(t)))
	case f.cut:
		return nil, fmt.Errorf("dial %s: connection refused", r.URL.Host)
	}
	return answer(http.StatusOK, `{"accepted":true}`)
}

func (f *fakeExecutor) count(suffix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.paths {
		if strings.HasSuffix(p, suffix) {
			n++
		}
	}
	return n
}

func (f *fakeExecutor) tickets() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ticket...)
}

// TestNoDispatchToAnExcludedExecutor: the only executor registered for a
// task stopped heart-beating 40 s ago; the task's own http: URL is that
// executor's address (as in examples/). A trigger must send it nothing —
// before, routing fell back to the task's URL and dispatched to the
// excluded executor. The instance waits in the queue, SCHEDULED, and
// explain says why; a heartbeat brings the executor back and the work goes
// to it. A task whose URL is the address of an excluded executor
// registered for other tasks only waits the same way.
func TestNoDispatchToAnExcludedExecutor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := &fakeExecutor{}
		sink := &alertSink{}
		start := time.Now()
		e := setupRoutedCallback(t, Config{OnAlert: sink.add, Grace: time.Millisecond}, &http.Client{Transport: x}, "http://ax/api/v1/results", `pipeline: ex
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: pull, http: "http://x/dispatch", timeout: 60s}
  - {name: side, http: "http://x/dispatch", timeout: 60s}
`, func(st *store.Store) {
			if err := st.RegisterExecutor(context.Background(), store.RegisterParams{Address: "http://x", Protocol: "http",
				Tasks: []string{"ex.pull"}, Boot: "b1", Now: start}); err != nil {
				t.Fatal(err)
			}
		})
		sleep(40 * time.Second) // x last heard from 40 s ago: excluded
		for _, task := range []string{"ex.pull", "ex.side"} {
			if _, err := e.do(Trigger{Target: task}); err != nil {
				t.Fatal(err)
			}
		}
		sleep(12 * time.Second)
		ins := e.instances(store.InstanceFilter{Pipeline: "ex"})
		if n := x.count("/dispatch"); n != 0 {
			e.stop()
			t.Fatalf("%d dispatch(es) sent to the excluded executor http://x; instances %+v", n, ins)
		}
		for _, in := range ins {
			if in.State != axtype.Scheduled || in.Attempt != 0 {
				t.Errorf("%s: %s attempt %d, want SCHEDULED, never dispatched (waiting for a live executor)", in.TaskID, in.State, in.Attempt)
			}
		}
		for task, want := range map[string]string{"ex.pull": "no live executor of ex.pull", "ex.side": "its URL http://x/dispatch is executor http://x, which is excluded"} {
			xp, err := e.eng.Explain(context.Background(), task)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range xp.Findings {
				if f.Check == "executor" && f.Blocks && strings.Contains(f.Detail, want) {
					found = true
				}
			}
			if !found {
				t.Errorf("explain %s: verdict %q, findings %+v; want a blocking executor finding saying %q", task, xp.Verdict, xp.Findings, want)
			}
		}
		// x heard from again: the waiting work goes to it.
		if err := e.st.Heartbeat(context.Background(), "http://x", time.Now()); err != nil {
			t.Fatal(err)
		}
		sleep(6 * time.Second)
		e.stop()
		if n := x.count("/dispatch"); n != 2 {
			t.Errorf("%d dispatch(es) after x's heartbeat, want 2 (both tasks, once each)", n)
		}
	})
}

// hosts routes requests to a fake executor by host.
type hosts map[string]*fakeExecutor

func (h hosts) RoundTrip(r *http.Request) (*http.Response, error) {
	if f := h[r.URL.Host]; f != nil {
		return f.RoundTrip(r)
	}
	return nil, fmt.Errorf("dial %s: no such host", r.URL.Host)
}

// TestSilentExecutorAttemptsStayRunning: silent is not dead. Two
// executors accept an attempt each and fall silent (no heartbeat, no
// result). Past runner.Silence the sweep raises executor_lost, but both
// attempts stay RUNNING under their tickets, and nothing is dispatched
// again — before, both were failed over at once ("1 running attempt(s)
// failed over") and retried under new tickets while the executors might
// still run them. x then answers its /status: its attempt is resolved by
// that answer, under the same ticket. y never answers: its attempt is
// judged at its deadline (when y stops it too), and only then retried.
func TestSilentExecutorAttemptsStayRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x, y := &fakeExecutor{}, &fakeExecutor{}
		sink := &alertSink{}
		start := time.Now()
		e := setupRoutedCallback(t, Config{OnAlert: sink.add, Grace: time.Millisecond}, &http.Client{Transport: hosts{"x": x, "y": y}}, "http://ax/api/v1/results", `pipeline: sil
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: pull, http: "http://x/dispatch", timeout: 90s, retry: {count: 1, interval: 1s}}
  - {name: push, http: "http://y/dispatch", timeout: 90s, retry: {count: 1, interval: 1s}}
`, func(st *store.Store) {
			for _, r := range []store.RegisterParams{{Address: "http://x", Tasks: []string{"sil.pull"}}, {Address: "http://y", Tasks: []string{"sil.push"}}} {
				r.Protocol, r.Boot, r.Now = "http", "b1", start
				if err := st.RegisterExecutor(context.Background(), r); err != nil {
					t.Fatal(err)
				}
			}
		})
		for _, task := range []string{"sil.pull", "sil.push"} {
			if _, err := e.do(Trigger{Target: task}); err != nil {
				t.Fatal(err)
			}
		}
		sleep(time.Second)
		if len(x.tickets()) != 1 || len(y.tickets()) != 1 {
			e.stop()
			t.Fatalf("dispatches: x %v, y %v; want one each", x.tickets(), y.tickets())
		}
		sleep(50 * time.Second) // both silent for 50 s: lost
		lost := sink.of(AlertExecutorLost)
		ins := e.instances(store.InstanceFilter{Pipeline: "sil"})
		if len(lost) < 2 || len(ins) != 2 {
			e.stop()
			t.Fatalf("executor_lost alerts %+v, instances %+v; want two of each", lost, ins)
		}
		for _, a := range lost {
			if !strings.Contains(a.Message, "its 1 running attempt(s) stay RUNNING under their tickets") ||
				!strings.Contains(a.Message, "resolved by asking its /status, or, if it does not answer, judged at its deadline") || strings.Contains(a.Message, "failed over") {
				t.Errorf("executor_lost alert %q: want it to say the attempt stays RUNNING, asked about, or judged at its deadline", a.Message)
			}
		}
		for _, in := range ins {
			if in.State != axtype.Running || in.Attempt != 1 {
				t.Errorf("%s: %s attempt %d (%s), want attempt 1 still RUNNING on its silent executor", in.TaskID, in.State, in.Attempt, in.Error)
			}
		}
		if len(x.tickets()) != 1 || len(y.tickets()) != 1 {
			t.Errorf("dispatches while silent: x %v, y %v; want none again", x.tickets(), y.tickets())
		}
		// x answers its /status: done, with success.
		x.mu.Lock()
		x.status = func(ticket string) string {
			return fmt.Sprintf(`{"state":"done","result":{"ticket":%q,"status":"success","duration_ms":5}}`, ticket)
		}
		x.mu.Unlock()
		sleep(6 * time.Second)
		pull := e.instances(store.InstanceFilter{TaskID: "sil.pull"})
		if len(pull) != 1 || pull[0].State != axtype.Success || pull[0].Ticket != x.tickets()[0] || pull[0].Attempt != 1 {
			t.Errorf("pull after x answered its /status: %+v; want SUCCESS under the ticket x was given", pull)
		}
		var reason string
		for _, h := range e.history("sil.pull") {
			if h.To == axtype.Success {
				reason = h.Reason
			}
		}
		if !strings.Contains(reason, "resolved by asking its silent executor http://x for its /status (same ticket)") {
			t.Errorf("pull's SUCCESS reason %q: want it to say its silent executor's /status resolved it", reason)
		}
		// y never answers: judged at its deadline (+91 s), and only then retried.
		sleep(40 * time.Second)
		e.stop()
		var retried string
		for _, h := range e.history("sil.push") {
			if h.From == axtype.Running && h.To == axtype.Retrying && retried == "" {
				retried = h.Reason
				if got := h.At.Sub(start); got < 90*time.Second {
					t.Errorf("push retried at +%s, before its deadline at +90s, while y may still run it", got)
				}
			}
		}
		if !strings.Contains(retried, "its executor http://y is silent (lost) and did not answer for it: judged at its deadline") {
			t.Errorf("push's retry reason %q: want it judged at its deadline, its executor silent", retried)
		}
		if len(y.tickets()) != 1 {
			t.Errorf("y got %d dispatches, want 1: excluded, it gets no retry", len(y.tickets()))
		}
		// Once none is left, an alert says how each was resolved.
		want := map[string]string{
			"http://x": "executor http://x, still silent: its 1 attempt(s) kept RUNNING are resolved: 1 by asking its /status (same ticket), 0 judged at their deadline",
			"http://y": "executor http://y, still silent: its 1 attempt(s) kept RUNNING are resolved: 0 by asking its /status (same ticket), 1 judged at their deadline",
		}
		for addr, msg := range want {
			found := false
			for _, a := range sink.of(AlertExecutorLost) {
				found = found || strings.Contains(a.Message, msg)
			}
			if !found {
				t.Errorf("no alert for %s saying %q; alerts %+v", addr, msg, sink.of(AlertExecutorLost))
			}
		}
	})
}

// TestKillOfASilentExecutorsAttemptIsSentAgain: an operator kills an
// attempt whose executor has fallen silent. The instance ends KILLED; the
// kill does not reach the executor, which may still run the work, so it is
// kept and sent again once the executor is heard from — before, it was
// tried once and dropped.
func TestKillOfASilentExecutorsAttemptIsSentAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := &fakeExecutor{}
		start := time.Now()
		e := setupRoutedCallback(t, Config{Grace: time.Millisecond}, &http.Client{Transport: x}, "http://ax/api/v1/results", `pipeline: k
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: pull, http: "http://x/dispatch", timeout: 120s}
`, func(st *store.Store) {
			if err := st.RegisterExecutor(context.Background(), store.RegisterParams{Address: "http://x", Protocol: "http",
				Tasks: []string{"k.pull"}, Boot: "b1", Now: start}); err != nil {
				t.Fatal(err)
			}
		})
		if _, err := e.do(Trigger{Target: "k.pull"}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Second)
		x.mu.Lock()
		x.cut = true
		x.mu.Unlock()
		sleep(40 * time.Second) // silent: lost
		if _, err := e.do(Kill{Target: "k.pull"}, By{Actor: "operator:kim"}); err != nil {
			e.stop()
			t.Fatal(err)
		}
		sleep(time.Second)
		ins := e.instances(store.InstanceFilter{TaskID: "k.pull"})
		if len(ins) != 1 || ins[0].State != axtype.Killed {
			e.stop()
			t.Fatalf("after the kill: %+v, want KILLED", ins)
		}
		if n := x.count("/kill"); n != 1 {
			t.Errorf("%d kill request(s) while x is cut off, want 1 (tried once, not reached)", n)
		}
		// x comes back.
		x.mu.Lock()
		x.cut = false
		x.mu.Unlock()
		if err := e.st.Heartbeat(context.Background(), "http://x", time.Now()); err != nil {
			t.Fatal(err)
		}
		sleep(6 * time.Second)
		e.stop()
		if n := x.count("/kill"); n != 2 {
			t.Errorf("%d kill request(s) after x came back, want 2: the kill sent again once x was heard from", n)
		}
		if n := len(x.tickets()); n != 1 {
			t.Errorf("%d dispatch(es), want 1", n)
		}
	})
}

// TestRefusedUntilASubMillisecondLimitEnds: an attempt first refused at an
// instant that is not a whole millisecond is offered again until its
// deadline, then counts as failed. Before, its last offer was stored at the
// millisecond below the limit, refused again at that same instant still
// before the limit, and offered again at once, for ever (the loop spun at
// one instant: seed 33 of the simulator).
func TestRefusedUntilASubMillisecondLimitEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := &fakeExecutor{busy: true}
		start := time.Now()
		e := setupRoutedCallback(t, Config{Grace: time.Millisecond}, &http.Client{Transport: x}, "http://ax/api/v1/results", `pipeline: r
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: pull, http: "http://x/dispatch", timeout: 12s}
`, func(st *store.Store) {
			if err := st.RegisterExecutor(context.Background(), store.RegisterParams{Address: "http://x", Protocol: "http",
				Tasks: []string{"r.pull"}, Boot: "b1", Now: start.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		})
		time.Sleep(500 * time.Microsecond)
		if _, err := e.do(Trigger{Target: "r.pull"}); err != nil {
			t.Fatal(err)
		}
		sleep(20 * time.Second)
		e.stop()
		ins := e.instances(store.InstanceFilter{TaskID: "r.pull"})
		if len(ins) != 1 || ins[0].State != axtype.Failed || !strings.Contains(ins[0].Error, "no executor took it within its timeout of 12s") {
			t.Fatalf("instance %+v, want FAILED: no executor took it within its timeout", ins)
		}
		if n := x.count("/dispatch"); n > 5 {
			t.Errorf("%d offers in 12 s, want one every 5 s", n)
		}
	})
}
