package engine

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// A primary that renews its lease but whose other writes fail (its own
// store handle refuses them as with a full disk) gives the lease up after
// stepDownTurns failed turns over a lease TTL, and a standby on the same
// file, whose writes succeed, takes over and runs the schedule; the primary
// that gave up stands by, and WriteFault says why until it writes again.
// Before, it kept the lease for good, its turns failing, and nothing ran.
func TestPrimaryThatCannotWriteGivesUpItsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{LeaseTTL: 3 * time.Second, LeaseRenew: time.Second}
		e := setup(t, cfg, nil, "pipeline: s\ntimezone: UTC\nschedule: \"@every 1s\"\noverlap: wait\ntasks:\n  - {name: a, function: record}\n")
		sleep(3 * time.Second)
		var full atomic.Bool
		store.SetFault(e.st, func(what string) error {
			if full.Load() && !strings.HasSuffix(what, " lease") {
				return errDiskFull
			}
			return nil
		})
		st2, err := store.Open(context.Background(), e.path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st2.Close()
		standby, stop := e.takeOverOn(cfg, st2)
		defer e.stop()
		defer stop()
		sleep(3 * time.Second)
		if !e.eng.Primary() || standby.Primary() {
			t.Errorf("before the fault: first primary %v, standby primary %v", e.eng.Primary(), standby.Primary())
			return
		}
		full.Store(true)
		faultAt := time.Now()
		sleep(2 * time.Second)
		if !e.eng.Primary() {
			t.Error("the primary let its lease go within 2 s of its first failed write: a brief failure must not hand it over")
			return
		}
		for time.Since(faultAt) < time.Minute && !standby.Primary() {
			sleep(time.Second)
		}
		took := time.Since(faultAt)
		if !standby.Primary() || e.eng.Primary() {
			t.Errorf("a minute after the primary's writes began to fail: first primary %v, standby primary %v; want the standby primary", e.eng.Primary(), standby.Primary())
			return
		}
		// Three failed turns (at 0, 2 and 6 s: the loop's backoff), then a
		// standby's next request for the lease.
		if took > 10*time.Second {
			t.Errorf("the standby took over %s after the primary's writes began to fail, want at most 10 s", took)
		}
		if err := e.eng.WriteFault(); err == nil || !strings.Contains(err.Error(), "disk is full") {
			t.Errorf("the first primary gave up and stands by: WriteFault = %v, want the disk-full error", err)
		}
		ok := func() int {
			return len(e.instances(store.InstanceFilter{TaskID: "s.a", States: []axtype.State{axtype.Success}}))
		}
		before := ok()
		sleep(20 * time.Second)
		if after := ok(); after < before+15 {
			t.Errorf("%d runs succeeded in the 20 s after the takeover, want at least 15", after-before)
		}
		if e.eng.Primary() {
			t.Error("the primary that gave up took the lease back while its writes still fail")
		}
	})
}
