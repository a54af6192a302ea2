package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// TestRetryIsNotSkippedAsAnOverlap: the overlap policy is judged at a fire
// time, and a retry is not a fire. The first fire's attempt fails after
// 4.5 s; its retry falls due at 5.5 s, while the next fire (at 5 s) runs.
// With overlap: skip the retry used to be judged as a fresh fire arriving on
// time and was failed as "skipped: the previous instance was still running"
// (outside finding F10: catch-ups refused by a restarting executor, RETRYING
// "no executor took it", then skipped; 11 of 14 never ran). It queues behind
// the running attempt and runs.
func TestRetryIsNotSkippedAsAnOverlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var first time.Time
		calls := map[time.Time]int{}
		fns := map[string]func(context.Context, runner.Attempt) error{"r.a": func(ctx context.Context, a runner.Attempt) error {
			mu.Lock()
			if first.IsZero() {
				first = a.LogicalTime
			}
			calls[a.LogicalTime]++
			isFirst, n := a.LogicalTime.Equal(first), calls[a.LogicalTime]
			mu.Unlock()
			switch {
			case isFirst && n == 1:
				time.Sleep(4500 * time.Millisecond)
				return errors.New("first attempt fails")
			case isFirst:
				return nil
			}
			time.Sleep(3 * time.Second)
			return nil
		}}
		e := setup(t, Config{}, fns, "pipeline: r\ntimezone: UTC\nschedule: \"@every 5s\"\ntasks:\n  - name: a\n    function: record\n    retry: {count: 1, interval: 1s}\n")
		sleep(20 * time.Second)
		mu.Lock()
		t0 := first
		mu.Unlock()
		if t0.IsZero() {
			t.Fatal("the task never ran")
		}
		var got *axtype.Instance
		for _, in := range e.instances(store.InstanceFilter{TaskID: "r.a"}) {
			if in.LogicalTime.Equal(t0) {
				got = &in
			}
		}
		if got == nil {
			t.Fatalf("no instance of r.a at %s", t0)
		}
		if got.State != axtype.Success || got.Attempt != 2 {
			t.Errorf("the first fire's instance: %s after %d attempt(s), error %q; want SUCCESS after its retry (2 attempts)", got.State, got.Attempt, got.Error)
		}
		e.stop()
	})
}
