package engine

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/store"
)

// The lease is renewed on its own timer: a loop turn that takes longer than
// the lease's TTL (here an event hook that blocks it for 20 s) costs no
// lease, and no renewal is late by more than a third of the TTL.
func TestLeaseRenewsWhileTheLoopIsBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		blocked := false
		cfg := Config{LeaseTTL: 3 * time.Second, LeaseRenew: time.Second, OnEvent: func(ev Event) {
			if ev.Kind == "ended" && !blocked {
				blocked = true
				<-block // the loop is stuck here
			}
		}}
		e := setup(t, cfg, nil, "pipeline: p\ntimezone: UTC\nschedule: \"@every 1m\"\ntasks:\n  - {name: a, function: record}\n")
		l0, err := e.st.GetLease(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		sleep(60 * time.Second) // the loop blocks on the first result
		if !blocked {
			t.Fatal("the hook never ran")
		}
		sleep(20 * time.Second) // far past the TTL
		l, err := e.st.GetLease(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		if l.Epoch != l0.Epoch || !l.ExpiresAt.After(time.Now()) {
			t.Errorf("with the loop busy for 20 s: lease epoch %d (was %d) expires %s, now %s; want still held",
				l.Epoch, l0.Epoch, l.ExpiresAt.Format(time.TimeOnly), time.Now().Format(time.TimeOnly))
		}
		if late := e.eng.Stats().RenewLateMax; late > time.Second {
			t.Errorf("a renewal came %s late, more than a third of the TTL", late)
		}
		if !e.eng.Primary() {
			t.Error("a busy loop made the process report standby")
		}
		close(block)
		e.stop()
		if _, err := e.st.AcquireLease(context.Background(), store.LeaseParams{Holder: "other", TTL: 3 * time.Second, Now: time.Now()}); err != nil {
			t.Errorf("after shutdown the lease is not free at once: %v", err)
		}
	})
}

// A store file deleted under a running server is noticed at the next
// renewal: the process stops dispatching, reports standby and alerts once.
func TestDeletedStoreFileStopsDispatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var alerts []Alert
		sink := func(a Alert) { mu.Lock(); alerts = append(alerts, a); mu.Unlock() }
		e := setup(t, Config{OnAlert: sink}, nil, "pipeline: p\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: a, function: record}\n")
		sleep(3 * time.Second)
		if err := os.Remove(e.st.String()); err != nil {
			t.Fatal(err)
		}
		sleep(6 * time.Second) // one renewal period, and a little
		ran := len(e.rec.snapshot())
		sleep(10 * time.Second)
		if after := len(e.rec.snapshot()); after != ran {
			t.Errorf("%d more executions after the store file was deleted", after-ran)
		}
		if e.eng.Primary() {
			t.Error("still reports primary with its store file gone")
		}
		mu.Lock()
		var gone []Alert
		for _, a := range alerts {
			if a.Kind == AlertStoreGone {
				gone = append(gone, a)
			}
		}
		mu.Unlock()
		if len(gone) != 1 || !strings.Contains(gone[0].Message, "was deleted") {
			t.Errorf("store_gone alerts: %+v, want one saying the file was deleted", gone)
		}
		e.stop()
	})
}

// TestRenewalDoesNotWaitForALongWrite: creating a run of 1,000 instances
// holds SQLite's one writer for 1.8 s here (a loaded machine took a second
// for 10,000), runs are created back to back at the start and every 10 s
// after, and no renewal (every second, TTL 3 s) may complete more than a
// third of the TTL late. The loop renews the lease just before each such
// write, so the next renewal falls due a period after the write began.
// Before, a renewal falling due during a creation waited for it, and for
// the next one when the loop took the writer first: up to 3.5 s late.
func TestRenewalDoesNotWaitForALongWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var src strings.Builder
		src.WriteString("pipeline: wide\ntimezone: UTC\nschedule: \"*/10 * * * * *\"\ndefaults: {function: record}\ntasks:\n")
		for i := range longWrite {
			fmt.Fprintf(&src, "  - {name: t%04d}\n", i)
		}
		// Top-ups every 10.5 s: each creates the run of the fire 30 s ahead,
		// starting half a second before a renewal falls due.
		e := setup(t, Config{MaxRunning: -1, LeaseTTL: 3 * time.Second, LeaseRenew: time.Second, Window: 30 * time.Second, TopUp: 10500 * time.Millisecond},
			nil, src.String())
		var long atomic.Int32
		store.SetFault(e.st, func(what string) error {
			if what == "create run" {
				long.Add(1)
				time.Sleep(1800 * time.Millisecond)
			}
			return nil
		})
		sleep(45 * time.Second)
		late := time.Duration(e.eng.leadership.lease.Load().lateMax.Load())
		e.stop()
		if long.Load() < 3 {
			t.Fatalf("%d runs created during the test, want at least 3", long.Load())
		}
		if late > time.Second {
			t.Errorf("a renewal completed %s late around %d long writes, want at most 1s (a third of the TTL)", late, long.Load())
		}
	})
}
