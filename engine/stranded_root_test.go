package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// TestStrandedRerunOfARootIsReleased: a rerun of a root instance that never
// ran (its run cancelled while it waited for its fire time) brings it back
// to WAITING and releases it in a second transaction. When a store error
// failed that release, the stranded sweep that should release it later
// looked only at instances with upstreams, so the root waited forever
// (seed 3172 of the simulator, I5, a fault of p=0.1 at the queued rerun).
func TestStrandedRerunOfARootIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, `pipeline: r
timezone: UTC
schedule: "*/3 * * * *"
tasks:
  - {name: root, function: record, timeout: 10s}
`)
		ins := e.instances(store.InstanceFilter{TaskID: "r.root", States: []axtype.State{axtype.Scheduled}})
		if len(ins) == 0 || !ins[0].LogicalTime.After(time.Now()) {
			e.stop()
			t.Fatalf("no run made ahead to cancel: %+v", ins)
		}
		in := ins[0]
		if _, err := e.do(Cancel{Run: in.RunID}); err != nil {
			e.stop()
			t.Fatal(err)
		}
		var failing atomic.Bool
		failing.Store(true)
		store.SetFault(e.st, func(what string) error {
			if what == "transition batch" && failing.Load() {
				return errors.New("injected")
			}
			return nil
		})
		_, err := e.do(Rerun{Instance: in.ID})
		failing.Store(false)
		if err == nil {
			t.Log("the rerun reported no error")
		}
		sleep(time.Until(in.LogicalTime) + 10*time.Second) // released, it runs at its fire time (releaseAt)
		got, gerr := e.st.Instance(context.Background(), in.ID)
		e.stop()
		if gerr != nil {
			t.Fatal(gerr)
		}
		if got.State == axtype.Waiting || got.Attempt == 0 {
			t.Errorf("10 s after its fire time the rerun root is %s (attempt %d), want released and run: nothing it waits on can happen", got.State, got.Attempt)
		}
	})
}
