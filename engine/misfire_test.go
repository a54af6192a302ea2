package engine

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/defs"
)

func TestMisfireSplit(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const after = time.Minute
	for _, tc := range []struct {
		name   string
		p      defs.Misfire
		n      int
		late   time.Duration // how late the earliest fire is
		skip   int
		missed bool
	}{
		{"nothing passed", defs.MisfireFireOnce, 0, time.Hour, 0, false},
		{"within the threshold all run late", defs.MisfireSkip, 5, 50 * time.Second, 0, false},
		{"exactly at the threshold is not a misfire", defs.MisfireSkip, 6, time.Minute, 0, false},
		{"fire_once keeps the latest", defs.MisfireFireOnce, 60, 10 * time.Minute, 59, true},
		{"fire_once of one", defs.MisfireFireOnce, 1, 2 * time.Minute, 0, true},
		{"skip keeps none", defs.MisfireSkip, 60, 10 * time.Minute, 60, true},
		{"fire_all under its bound", defs.MisfireFireAll, 60, 10 * time.Minute, 0, true},
		{"fire_all over its bound keeps the latest 100", defs.MisfireFireAll, 25920, 72 * time.Hour, 25820, true},
	} {
		skip, missed := misfireSplit(tc.p, tc.n, now.Add(-tc.late), now, after, 100)
		if skip != tc.skip || missed != tc.missed {
			t.Errorf("%s: misfireSplit = %d, %v; want %d, %v", tc.name, skip, missed, tc.skip, tc.missed)
		}
	}
}
