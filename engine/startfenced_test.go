package engine

import (
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// TestFencedStartStandsBy: a term whose start meets a fenced write (the
// process stalled while it loaded its window, another took the lease and
// the write was refused for its stale epoch) stands by again, as a term
// fenced later does; it used to return the store's error from Run, and
// ax server exited ("ax: store: create run: store: no longer the leader"),
// so two stalls in a row left no scheduler at all (outside test F7).
func TestFencedStartStandsBy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hits atomic.Int32
		e := setupOn(t, Config{}, nil, func(st *store.Store) {
			store.SetFault(st, func(what string) error {
				if what == "create run" && hits.Add(1) == 1 {
					return fmt.Errorf("%w (caller holds epoch 1, current is 2)", store.ErrNotLeader)
				}
				return nil
			})
		}, "pipeline: s\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: a, function: record}\n")
		sleep(20 * time.Second)
		select {
		case err := <-e.done:
			t.Fatalf("the engine stopped after a fenced write in its start: %v; want it to stand by and take the lease again", err)
		default:
		}
		if hits.Load() == 0 {
			t.Fatal("no run was created: the test needs the start's fenced write")
		}
		if !e.eng.Primary() {
			t.Error("not primary 20 s after a fenced start although nobody else holds the lease")
		}
		ok := e.instances(store.InstanceFilter{TaskID: "s.a", States: []axtype.State{axtype.Success}})
		if len(ok) < 10 {
			t.Errorf("%d instances of s.a succeeded in the 20 s after the fenced start, want at least 10", len(ok))
		}
		e.stop()
	})
}
