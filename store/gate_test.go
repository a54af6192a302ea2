package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// TestSQLiteRenewalGoesFirst (SQLite, one writer): six writers keep the
// write connection busy, each transaction holding it 150 ms; a renewal of
// the lease waits only for the transaction in progress. When every writer
// queued at database/sql's pool, which hands a freed connection to a
// waiter picked at random, a renewal waited for several transactions
// (about three on average here, and any number in the worst case).
func TestSQLiteRenewalGoesFirst(t *testing.T) {
	t.Parallel()
	const hold, writers = 150 * time.Millisecond, 6
	s := storetest.SQLite(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := s.AcquireLease(ctx, store.LeaseParams{Holder: "a", TTL: time.Hour, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	store.SetFault(s, func(what string) error {
		if what == "set setting" {
			time.Sleep(hold) // a long write: it holds the one write connection
		}
		return nil
	})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				_ = s.Fence(l.Epoch).SetSetting(ctx, fmt.Sprintf("w%d", i), fmt.Sprint(n), time.Now())
			}
		})
	}
	time.Sleep(2 * hold) // every writer is queued or writing
	var worst time.Duration
	for range 3 {
		asked := time.Now()
		if _, err := s.RenewLease(ctx, store.LeaseParams{Holder: "a", Epoch: l.Epoch, TTL: time.Hour, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, time.Since(asked))
	}
	cancel()
	wg.Wait()
	store.SetFault(s, nil)
	t.Logf("worst of three renewals beside %d writers holding the writer %s each: %s", writers, hold, worst.Round(time.Millisecond))
	if worst > hold+250*time.Millisecond {
		t.Errorf("a renewal took %s beside writers holding the writer %s each: want it to wait for the write in progress only", worst.Round(time.Millisecond), hold)
	}
}
