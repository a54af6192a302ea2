package engine

import (
	"context"
	"os"
	"strings"
	"sync"
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
