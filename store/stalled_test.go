package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// TestAcquireLeaseEndsAStalledHolder (servers): a holder stalled inside a
// fenced write — after its statements, before its commit — keeps the lease
// row's shared lock. Once its lease has expired, another process takes the
// lease within seconds (not the server's lock wait timeout, nor when the
// holder wakes) by ending the holder's connections; the stalled write is
// rolled back and fails, and nothing of it is written.
func TestAcquireLeaseEndsAStalledHolder(t *testing.T) {
	t.Parallel()
	for name, open := range storetest.Servers() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			acquireFromStalled(t, open(t))
		})
	}
}

func acquireFromStalled(t *testing.T, a *store.Store) {
	ctx := context.Background()
	now := time.Now()
	la, err := a.AcquireLease(ctx, store.LeaseParams{Holder: "a", TTL: time.Second, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	wake := func() { once.Do(func() { close(release) }) }
	t.Cleanup(wake) // before the store closes, on every path
	store.SetFault(a, func(what string) error {
		if what == "set setting" {
			close(entered)
			<-release // stalled with its statements run and its transaction open
		}
		return nil
	})
	stalled := make(chan error, 1)
	go func() { stalled <- a.Fence(la.Epoch).SetSetting(ctx, "stalled", "written", now) }()
	<-entered

	b, err := store.Open(ctx, storetest.Target(t, a), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var lb store.Lease
	for lb.Epoch == 0 && actx.Err() == nil { // as a standby does: again after a busy answer
		lb, err = b.AcquireLease(actx, store.LeaseParams{Holder: "b", TTL: time.Second, Now: now.Add(2 * time.Second)})
		if err != nil && !errors.Is(err, store.ErrConflict) {
			t.Fatalf("acquire: %v", err)
		}
	}
	took := time.Since(start)
	wake()
	if lb.Epoch != la.Epoch+1 || lb.Holder != "b" {
		t.Fatalf("after %s: lease %+v, %v; want b at epoch %d", took, lb, err, la.Epoch+1)
	}
	t.Logf("taken in %s: %s", took.Round(time.Millisecond), lb.Broke)
	if took > 5*time.Second || !strings.Contains(lb.Broke, "of a (epoch 1") {
		t.Errorf("taken in %s (%q), want within a few seconds by ending a's connections", took, lb.Broke)
	}
	if err := <-stalled; err == nil {
		t.Error("the stalled write committed after its connection was ended")
	}
	store.SetFault(a, nil)
	if m, err := b.Settings(ctx); err != nil || m["stalled"] != "" {
		t.Errorf("settings %v, %v: the stalled write is in the store", m, err)
	}
}
