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

// TestRetakenTermStartsAgainAfterAFailedStart: the lease row's epoch is
// changed by hand; the primary takes the lease again under a new epoch and
// redoes its start, whose writes fail a few times (a database under load).
// It must start again and go on running the schedule; before, it stayed
// idle for good after lease_retaken (a failed start was left to the
// window's top-up, which does not rebuild what the start empties).
func TestRetakenTermStartsAgainAfterAFailedStart(t *testing.T) {
	for _, what := range []string{"sync definitions", "create run", "transition batch"} {
		t.Run(what, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := setup(t, Config{}, nil, "pipeline: b\ntimezone: UTC\nschedule: \"@every 1s\"\noverlap: wait\ntasks:\n  - {name: a, function: record}\n  - {name: z, depends_on: [a], function: record}\n")
				sleep(5 * time.Second)
				var n atomic.Int32
				store.SetFault(e.st, func(w string) error {
					if w == what && n.Add(1) <= 3 {
						return errors.New("boom")
					}
					return nil
				})
				if _, err := e.st.DB().Exec("UPDATE leases SET epoch = 999"); err != nil {
					t.Fatal(err)
				}
				sleep(10 * time.Second)
				before := len(e.instances(store.InstanceFilter{TaskID: "b.z", States: []axtype.State{axtype.Success}}))
				sleep(time.Minute)
				after := len(e.instances(store.InstanceFilter{TaskID: "b.z", States: []axtype.State{axtype.Success}}))
				l, _ := e.st.GetLease(context.Background(), "")
				if n.Load() == 0 || l.Epoch <= 999 {
					t.Fatalf("the fault hit %d times, epoch %d: the test needs a failed write and a retaken lease", n.Load(), l.Epoch)
				}
				if after < before+30 { // a run a second, for a minute less the store-error back-off (2+4+8 s)
					t.Errorf("%d runs completed in the minute after the retake (%d before), want at least 30: the primary went idle", after-before, before)
				}
				e.stop()
			})
		})
	}
}
