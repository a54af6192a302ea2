package store_test

import (
	"testing"

	"github.com/ax-sched/ax/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	for name, open := range storetest.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, open)
		})
	}
}
