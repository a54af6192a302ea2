package engine

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// A rerun of a FAILED instance respects its task's max_running: with the
// cap full it is not started at once (FAILED → RUNNING bypassed the cap:
// found by the simulator's I9 on seed 110, a task capped at 3 with 4
// RUNNING) but waits in the queue, SCHEDULED, and starts when a slot
// frees; nor is it skipped as an overlap (overlap: skip), since a rerun is
// no fire. With room, it starts at once as before.
func TestRerunOfAFailedInstanceRespectsTheTaskCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls atomic.Int32
		fns := map[string]func(context.Context, runner.Attempt) error{"r.a": func(ctx context.Context, _ runner.Attempt) error {
			switch calls.Add(1) {
			case 1:
				return errors.New("first fire fails")
			case 2:
				select { // the second fire holds the one slot
				case <-release:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			default:
				return nil
			}
		}}
		e := setup(t, Config{}, fns, "pipeline: r\ntimezone: UTC\nschedule: \"0 * * * *\"\ntasks:\n  - {name: a, function: record, max_running: 1, overlap: skip, timeout: 2h}\n")
		defer e.stop()
		sleep(time.Hour + time.Second) // the first fire fails
		failed := e.instances(store.InstanceFilter{TaskID: "r.a", States: []axtype.State{axtype.Failed}})
		if len(failed) != 1 {
			t.Fatalf("failed instances %+v, want 1", failed)
		}
		sleep(time.Hour) // the second fire runs, and holds the slot
		if running := e.instances(store.InstanceFilter{TaskID: "r.a", States: []axtype.State{axtype.Running}}); len(running) != 1 {
			t.Fatalf("running %+v, want the second fire", running)
		}
		if _, err := e.do(Rerun{Instance: failed[0].ID}); err != nil {
			t.Fatalf("rerun: %v", err)
		}
		sleep(time.Minute)
		got, _ := e.st.Instance(context.Background(), failed[0].ID)
		if got.State != axtype.Scheduled {
			t.Fatalf("the rerun with its task's cap full: %s %q; want SCHEDULED, waiting for the slot", got.State, got.Error)
		}
		if running := e.instances(store.InstanceFilter{TaskID: "r.a", States: []axtype.State{axtype.Running}}); len(running) != 1 {
			t.Errorf("%d RUNNING with max_running 1", len(running))
		}
		h := e.history("r.a")
		if last := h[len(h)-1]; last.InstanceID != failed[0].ID || !strings.Contains(last.Reason, "waits for a slot: task r.a has 1 of 1 running") {
			t.Errorf("last history row %+v; want the rerun naming the full cap", last)
		}
		close(release) // the second fire ends: the rerun takes the slot
		sleep(time.Minute)
		if got, _ := e.st.Instance(context.Background(), failed[0].ID); got.State != axtype.Success || got.Attempt != 2 {
			t.Errorf("the rerun after the slot freed: %s attempt %d %q; want SUCCESS at attempt 2", got.State, got.Attempt, got.Error)
		}
		// With room, a rerun starts at once: FAILED → RUNNING.
		calls.Store(0)
		sleep(time.Hour) // the third fire fails
		again := e.instances(store.InstanceFilter{TaskID: "r.a", States: []axtype.State{axtype.Failed}})
		if len(again) != 1 {
			t.Fatalf("failed instances %+v, want the third fire", again)
		}
		calls.Store(5)
		if _, err := e.do(Rerun{Instance: again[0].ID}); err != nil {
			t.Fatalf("rerun: %v", err)
		}
		sleep(time.Second)
		h = e.history("r.a")
		var direct bool
		for _, r := range h {
			direct = direct || r.InstanceID == again[0].ID && r.From == axtype.Failed && r.To == axtype.Running
		}
		if !direct {
			t.Errorf("a rerun with room did not go FAILED → RUNNING at once: %+v", h[len(h)-3:])
		}
	})
}
