package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// A holder hands its unexpired lease on to another name (LeaseParams.From)
// under a new epoch; nobody else can take it that way.
func TestAcquireLeaseFrom(t *testing.T) {
	t.Parallel()
	for name, open := range storetest.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			ctx, now := context.Background(), time.Now()
			a, err := s.AcquireLease(ctx, store.LeaseParams{Holder: "a", TTL: time.Minute, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.AcquireLease(ctx, store.LeaseParams{Holder: "c", From: "x", TTL: time.Minute, Now: now}); !errors.Is(err, store.ErrLeaseHeld) {
				t.Errorf("c from x took a's lease: %v", err)
			}
			b, err := s.AcquireLease(ctx, store.LeaseParams{Holder: "b", From: "a", TTL: time.Minute, Now: now})
			if err != nil || b.Holder != "b" || b.Epoch != a.Epoch+1 {
				t.Fatalf("b from a: %+v, %v; want b at epoch %d", b, err, a.Epoch+1)
			}
			if err := s.Fence(a.Epoch).SetSetting(ctx, "k", "v", now); !errors.Is(err, store.ErrNotLeader) {
				t.Errorf("a write at the handed-on epoch: %v, want ErrNotLeader", err)
			}
		})
	}
}
