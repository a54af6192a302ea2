package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// hangAll is a function executor body that runs until its context ends.
func hangAll(n int) map[string]func(context.Context, runner.Attempt) error {
	fns := map[string]func(context.Context, runner.Attempt) error{}
	for i := range n {
		fns[taskName(i)] = func(ctx context.Context, _ runner.Attempt) error { <-ctx.Done(); return context.Cause(ctx) }
	}
	return fns
}

func taskName(i int) string { return "burst.t" + pad5(i) }

func pad5(i int) string {
	s := "00000" + itoa(i)
	return s[len(s)-5:]
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// Stopping the engine while attempts run gives each one still running
// after the grace period back: RETRYING at once, its attempt not counted,
// with the reason "interrupted by shutdown" in its history — never FAILED.
func TestShutdownGivesRunningAttemptsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{Grace: 2 * time.Second}, hangAll(3), priorities(3, "@every 1m"))
		sleep(61 * time.Second) // the +1m fire is running, and hangs
		if got := e.eng.Stats().Running; got != 3 {
			t.Fatalf("running %d, want 3", got)
		}
		e.stop()
		ins := e.instances(store.InstanceFilter{States: []axtype.State{axtype.Running, axtype.Retrying, axtype.Failed, axtype.Success}})
		if len(ins) != 3 {
			t.Fatalf("%d instances past SCHEDULED, want 3: %+v", len(ins), ins)
		}
		for _, in := range ins {
			if in.State != axtype.Retrying || in.Attempt != 1 || in.Counted != 0 {
				t.Errorf("%s: %s attempt %d counted %d; want RETRYING after attempt 1, not counted", in.TaskID, in.State, in.Attempt, in.Counted)
			}
			h := e.history(in.TaskID)
			last := h[len(h)-1]
			if last.From != axtype.Running || last.To != axtype.Retrying || !strings.Contains(last.Reason, "interrupted by shutdown") {
				t.Errorf("%s: last history %s>%s %q; want RUNNING>RETRYING interrupted by shutdown", in.TaskID, last.From, last.To, last.Reason)
			}
		}
	})
}

// Shutdown returns with 10,000 attempts in flight, more than the results
// channel holds: nothing waits on a loop that has stopped reading.
func TestShutdownWithTenThousandInFlightReturns(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 tasks")
	}
	synctest.Test(t, func(t *testing.T) {
		const n = 10_000
		e := setup(t, Config{Grace: time.Second, MaxRunning: -1}, hangAll(n), priorities(n, "@every 1m"))
		sleep(61 * time.Second)
		if got := e.eng.Stats().Running; got != n {
			t.Fatalf("running %d, want %d", got, n)
		}
		e.stop() // a deadlock here fails the bubble
		retrying := e.instances(store.InstanceFilter{States: []axtype.State{axtype.Retrying}})
		if len(retrying) != n {
			t.Errorf("%d RETRYING after shutdown, want %d", len(retrying), n)
		}
	})
}

// Every failed attempt's error stays in its own history row: the next
// attempt clears the instance's error, never the record of the last one.
func TestRetryHistoryKeepsEachAttemptsError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		fail := map[string]func(context.Context, runner.Attempt) error{"r.a": func(context.Context, runner.Attempt) error {
			n++
			if n <= 2 {
				return errors.New("disk full on try " + itoa(n))
			}
			return nil
		}}
		e := setup(t, Config{}, fail, "pipeline: r\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: a, function: record, retry: {count: 3, interval: 1s}}\n")
		sleep(time.Hour + 10*time.Second)
		e.stop()
		var got []string
		for _, h := range e.history("r.a") {
			if h.From == axtype.Running {
				got = append(got, string(h.To)+": "+h.Reason)
			}
		}
		if len(got) != 3 || !strings.Contains(got[0], "disk full on try 1") || !strings.Contains(got[1], "disk full on try 2") ||
			!strings.HasPrefix(got[2], "SUCCESS") {
			t.Errorf("results in history:\n%s\nwant each failed attempt's own error, then SUCCESS", strings.Join(got, "\n"))
		}
	})
}

// A function that ignores its cancellation cannot be stopped; shutdown
// returns abandonAfter after cancelling it instead of waiting for it, and
// leaves it RUNNING (not given back: it still works in this process, and a
// retry elsewhere would run it twice) for the next primary to judge by its
// recorded process. What it returns later is dropped.
func TestShutdownReturnsWhenAFunctionIgnoresItsCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		deaf := map[string]func(context.Context, runner.Attempt) error{"r.a": func(context.Context, runner.Attempt) error {
			<-release // ignores ctx
			return nil
		}}
		e := setup(t, Config{Grace: time.Second}, deaf, "pipeline: r\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: a, function: record}\n")
		sleep(time.Hour + time.Second)
		if got := e.eng.Stats().Running; got != 1 {
			t.Fatalf("running %d, want 1", got)
		}
		began := time.Now()
		e.stop()
		if took, want := time.Since(began), time.Second+abandonAfter; took > want {
			t.Errorf("shutdown took %s with a function ignoring its cancellation, want at most %s (grace + abandonAfter)", took, want)
		}
		ins := e.instances(store.InstanceFilter{TaskID: "r.a"})
		if len(ins) != 1 || ins[0].State != axtype.Running || ins[0].Attempt != 1 {
			t.Fatalf("after shutdown: %+v; want the one instance still RUNNING at attempt 1", ins)
		}
		close(release) // it returns now: its result is dropped, nothing is recorded
		synctest.Wait()
		if again := e.instances(store.InstanceFilter{TaskID: "r.a"}); again[0].State != axtype.Running || again[0].Version != ins[0].Version {
			t.Errorf("the abandoned attempt's late result changed the instance: %+v", again[0])
		}
	})
}
