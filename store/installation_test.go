package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/store/storetest"
)

// Servers of one store read one installation id, created once; another
// store has another.
func TestInstallationID(t *testing.T) {
	for kind, open := range storetest.All() {
		t.Run(kind, func(t *testing.T) { testInstallationID(t, open) })
	}
}

func testInstallationID(t *testing.T, open storetest.Opener) {
	ctx := context.Background()
	s, other := open(t), open(t)
	ids := make([]string, 4)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			id, err := s.InstallationID(ctx, time.Now())
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		})
	}
	wg.Wait()
	for _, id := range ids {
		if len(id) != 32 || id != ids[0] {
			t.Fatalf("one store: ids %q, want one, 32 hex digits", ids)
		}
	}
	if again, err := s.InstallationID(ctx, time.Now()); err != nil || again != ids[0] {
		t.Errorf("read again: %q, %v; want %q", again, err, ids[0])
	}
	if o, err := other.InstallationID(ctx, time.Now()); err != nil || o == ids[0] {
		t.Errorf("another store: %q, %v; want an id of its own", o, err)
	}
}
