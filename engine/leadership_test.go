package engine

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/store"
)

// TestLeadershipTook: what a term knows of the one before it. The end of
// the previous lease is the claim-ahead horizon only when the new epoch
// directly follows it; who held it is known whenever the lease was read.
func TestLeadershipTook(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	prev := store.Lease{Holder: "a", Epoch: 4, ExpiresAt: end}
	for _, tc := range []struct {
		name       string
		epoch      int64
		known      bool
		wantHolder string
		wantEnd    time.Time
	}{
		{"the next epoch", 5, true, "a", end},
		{"an epoch taken meanwhile by someone else", 6, true, "a", time.Time{}},
		{"the lease could not be read", 5, false, "", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// What an earlier term learnt is replaced, never kept.
			s := leadership{prevHolder: "stale", prevLeaseEnd: end.Add(-time.Hour)}
			s.took(store.Lease{Holder: "b", Epoch: tc.epoch}, prev, tc.known)
			if s.prevHolder != tc.wantHolder || !s.prevLeaseEnd.Equal(tc.wantEnd) {
				t.Errorf("took: holder %q, end %v; want %q, %v", s.prevHolder, s.prevLeaseEnd, tc.wantHolder, tc.wantEnd)
			}
			if from, changed := s.handover("b"); changed != (tc.wantHolder != "") || from != tc.wantHolder {
				t.Errorf("handover(b) = %q, %v", from, changed)
			}
		})
	}
}
