package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// A stopping primary releases its lease at once and a standby takes over
// while an attempt still runs in the grace period. The attempt then
// succeeds: its result, which the stopping process may no longer record,
// reaches the new primary through the results inbox and is applied once.
// Before, it was dropped ("shutdown_results_not_recorded"): the new primary
// waited for the attempt's timeout as an unknown outcome and ran the
// succeeded work again on retry.
func TestResultOfAStoppingPrimaryReachesTheNextOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		job := map[string]func(context.Context, runner.Attempt) error{
			"ho.job": func(context.Context, runner.Attempt) error { time.Sleep(20 * time.Second); return nil },
		}
		e := setup(t, Config{Grace: time.Minute}, job, `pipeline: ho
timezone: UTC
schedule: "@every 1h"
tasks:
  - {name: job, function: record, timeout: 10m, retry: {count: 1, interval: 1s}}
`)
		sleep(time.Hour + time.Second) // the first fire runs, for 20 s
		ctx := context.Background()
		running := e.instances(store.InstanceFilter{States: []axtype.State{axtype.Running}})
		if len(running) != 1 {
			t.Fatalf("%d instances RUNNING, want 1", len(running))
		}
		next, err := New(Config{Holder: "test-2", Grace: time.Minute}, e.st, e.eng.sched.g, e.eng.execs)
		if err != nil {
			t.Fatal(err)
		}
		nextCtx, stopNext := context.WithCancel(ctx)
		nextDone := make(chan error, 1)
		go func() { nextDone <- next.Run(nextCtx) }()
		e.stop()                // releases the lease at once, then waits for the job
		sleep(15 * time.Minute) // past the job's timeout, as the new primary counts it
		stopNext()
		if err := <-nextDone; err != nil {
			t.Fatal(err)
		}
		if l, _ := e.st.GetLease(ctx, ""); l.Holder != "test-2" {
			t.Fatalf("lease held by %q; the test needs the standby to have taken over during the grace", l.Holder)
		}
		if calls := e.rec.snapshot(); len(calls) != 1 {
			t.Errorf("the job ran %d times, want once: %+v", len(calls), calls)
		}
		in, err := e.st.Instance(ctx, running[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if in.State != axtype.Success || in.Attempt != 1 || in.Ticket != running[0].Ticket {
			t.Errorf("instance: %s, attempt %d, ticket %s; want SUCCESS at attempt 1 with ticket %s", in.State, in.Attempt, in.Ticket, running[0].Ticket)
		}
	})
}

// A primary that cannot renew its lease (here its renewals fail, as when
// it is stopped by SIGSTOP or frozen) loses it to a standby while an
// attempt runs; the attempt succeeds after the takeover. Its result is left
// in the inbox and applied once by the new primary: before, it was dropped
// with the lease and the succeeded work ran again on retry.
func TestResultOfADemotedPrimaryReachesTheNextOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		job := map[string]func(context.Context, runner.Attempt) error{
			"ho.job": func(context.Context, runner.Attempt) error { time.Sleep(40 * time.Second); return nil },
		}
		e := setup(t, Config{}, job, `pipeline: ho
timezone: UTC
schedule: "@every 1h"
tasks:
  - {name: job, function: record, timeout: 10m, retry: {count: 1, interval: 1s}}
`)
		sleep(time.Hour + time.Second) // the first fire runs, for 40 s
		ctx := context.Background()
		running := e.instances(store.InstanceFilter{States: []axtype.State{axtype.Running}})
		if len(running) != 1 {
			t.Fatalf("%d instances RUNNING, want 1", len(running))
		}
		var stalled atomic.Bool
		stalled.Store(true)
		store.SetFault(e.st, func(what string) error {
			if what == "renew lease" && stalled.Load() {
				return errors.New("stalled")
			}
			return nil
		})
		next, err := New(Config{Holder: "test-2"}, e.st, e.eng.sched.g, e.eng.execs)
		if err != nil {
			t.Fatal(err)
		}
		nextCtx, stopNext := context.WithCancel(ctx)
		nextDone := make(chan error, 1)
		go func() { nextDone <- next.Run(nextCtx) }()
		sleep(25 * time.Second) // the lease expired and the standby took it
		stalled.Store(false)
		if l, _ := e.st.GetLease(ctx, ""); l.Holder != "test-2" {
			t.Fatalf("lease held by %q; the test needs the standby to have taken over while the job runs", l.Holder)
		}
		sleep(15 * time.Minute) // the job ended at +40 s; past its timeout as the new primary counts it
		stopNext()
		if err := <-nextDone; err != nil {
			t.Fatal(err)
		}
		e.stop()
		if calls := e.rec.snapshot(); len(calls) != 1 {
			t.Errorf("the job ran %d times, want once: %+v", len(calls), calls)
		}
		in, err := e.st.Instance(ctx, running[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if in.State != axtype.Success || in.Attempt != 1 || in.Ticket != running[0].Ticket {
			t.Errorf("instance: %s, attempt %d, ticket %s; want SUCCESS at attempt 1 with ticket %s", in.State, in.Attempt, in.Ticket, running[0].Ticket)
		}
	})
}

// A stopping primary whose lease a standby took runs two attempts in its
// grace period; the short one ends first. Its result reaches the new
// primary through the inbox as it ends, not when the long one ends too: a
// new primary judges an attempt whose process group is gone within a few
// seconds (goneJudged), and a result held back longer than that would let
// a retry run work that succeeded. Before, the short one's result waited
// in the stopping process until every attempt had ended (at +50 s).
func TestResultOfAStoppingPrimaryLeftAsItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		jobs := map[string]func(context.Context, runner.Attempt) error{
			"ho.short": func(context.Context, runner.Attempt) error { time.Sleep(20 * time.Second); return nil },
			"ho.long":  func(context.Context, runner.Attempt) error { time.Sleep(50 * time.Second); return nil },
		}
		e := setup(t, Config{Grace: time.Minute}, jobs, `pipeline: ho
timezone: UTC
schedule: "@every 1h"
tasks:
  - {name: short, function: record, timeout: 10m}
  - {name: long, function: record, timeout: 10m}
`)
		sleep(time.Hour + time.Second) // the first fire runs both
		ctx := context.Background()
		running := e.instances(store.InstanceFilter{States: []axtype.State{axtype.Running}})
		if len(running) != 2 {
			t.Fatalf("%d instances RUNNING, want 2", len(running))
		}
		_, stopNext := e.takeOver(Config{Grace: time.Minute})
		e.cancel() // releases the lease at once, then waits for both jobs
		sleep(25 * time.Second)
		if l, _ := e.st.GetLease(ctx, ""); l.Holder != "test-2" {
			t.Fatalf("lease held by %q; the test needs the standby to have taken over during the grace", l.Holder)
		}
		for _, in := range running {
			got, err := e.st.Instance(ctx, in.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := axtype.Success
			if in.TaskID == "ho.long" {
				want = axtype.Running
			}
			if got.State != want {
				t.Errorf("%s 25 s after the takeover (short ended at +20 s, long ends at +50 s): %s, want %s", in.TaskID, got.State, want)
			}
		}
		sleep(time.Minute)
		if err := <-e.done; err != nil {
			t.Errorf("the stopping engine: %v", err)
		}
		stopNext()
		if n := len(e.instances(store.InstanceFilter{States: []axtype.State{axtype.Success}})); n != 2 {
			t.Errorf("%d instances SUCCESS in the end, want 2", n)
		}
	})
}

// A primary that loses its lease (its renewals fail) while two attempts
// run, both going on past the cancel: the short one's result reaches the
// new primary through the inbox as it ends, not when the long one ends
// too (see TestResultOfAStoppingPrimaryLeftAsItEnds).
func TestResultOfADemotedPrimaryLeftAsItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		jobs := map[string]func(context.Context, runner.Attempt) error{
			"ho.short": func(context.Context, runner.Attempt) error { time.Sleep(40 * time.Second); return nil },
			"ho.long":  func(context.Context, runner.Attempt) error { time.Sleep(90 * time.Second); return nil },
		}
		e := setup(t, Config{}, jobs, `pipeline: ho
timezone: UTC
schedule: "@every 1h"
tasks:
  - {name: short, function: record, timeout: 10m}
  - {name: long, function: record, timeout: 10m}
`)
		sleep(time.Hour + time.Second) // the first fire runs both
		ctx := context.Background()
		running := e.instances(store.InstanceFilter{States: []axtype.State{axtype.Running}})
		if len(running) != 2 {
			t.Fatalf("%d instances RUNNING, want 2", len(running))
		}
		var stalled atomic.Bool
		stalled.Store(true)
		store.SetFault(e.st, func(what string) error {
			if what == "renew lease" && stalled.Load() {
				return errors.New("stalled")
			}
			return nil
		})
		_, stopNext := e.takeOver(Config{})
		sleep(25 * time.Second) // the lease expired and the standby took it
		stalled.Store(false)
		if l, _ := e.st.GetLease(ctx, ""); l.Holder != "test-2" {
			t.Fatalf("lease held by %q; the test needs the standby to have taken over while the jobs run", l.Holder)
		}
		sleep(20 * time.Second) // short ended at +40 s; long ends at +90 s
		for _, in := range running {
			got, err := e.st.Instance(ctx, in.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := axtype.Success
			if in.TaskID == "ho.long" {
				want = axtype.Running
			}
			if got.State != want {
				t.Errorf("%s 46 s after the fire (short ended at +40 s, long ends at +90 s): %s, want %s", in.TaskID, got.State, want)
			}
		}
		sleep(time.Minute)
		stopNext()
		e.stop()
		if n := len(e.instances(store.InstanceFilter{States: []axtype.State{axtype.Success}})); n != 2 {
			t.Errorf("%d instances SUCCESS in the end, want 2", n)
		}
	})
}
