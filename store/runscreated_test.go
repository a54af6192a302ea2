package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// RunsCreated lists a pipeline's runs newest created first, only those
// created after the bound and whose logical time has come.
func TestRunsCreated(t *testing.T) {
	t.Parallel()
	for name, open := range storetest.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, ctx := open(t), context.Background()
			day := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
			mk := func(pipeline string, logical, created time.Time) int64 {
				run, _, err := s.CreateRun(ctx, store.CreateRunParams{Pipeline: pipeline, Trigger: pipeline, Kind: axtype.RunManual, LogicalTime: logical,
					Actor: "test", Now: created, Instances: []store.NewInstance{{TaskID: pipeline + ".a", State: axtype.Waiting}}})
				if err != nil {
					t.Fatal(err)
				}
				return run.ID
			}
			mk("p", day, day)                                           // created before the bound
			b := mk("p", day.Add(24*time.Hour), day.Add(25*time.Hour))  // after it
			mk("q", day.Add(-24*time.Hour), day.Add(26*time.Hour))      // another pipeline
			c := mk("p", day.Add(-48*time.Hour), day.Add(27*time.Hour)) // an older date, triggered last
			mk("p", day.Add(72*time.Hour), day.Add(28*time.Hour))       // logical time still to come
			runs, err := s.RunsCreated(ctx, "p", day.Add(time.Hour), day.Add(48*time.Hour), 10)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, r := range runs {
				got = append(got, r.ID)
			}
			if len(got) != 2 || got[0] != c || got[1] != b {
				t.Errorf("runs %v, want [%d %d]", got, c, b)
			}
		})
	}
}
