package engine

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/defs"
)

func TestOverlapDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sec := func(n float64) time.Time { return now.Add(time.Duration(n * float64(time.Second))) }
	for _, tc := range []struct {
		name                   string
		p                      defs.Overlap
		due                    time.Time
		running, held, claimed int
		want                   overlapVerdict
	}{
		{"idle, due now", defs.OverlapSkip, now, 0, 0, 0, overlapGo},
		{"idle, claimed ahead", defs.OverlapSkip, sec(0.5), 0, 0, 0, overlapGo},
		{"next second while this second's attempt is held", defs.OverlapSkip, sec(1), 0, 1, 0, overlapLater},
		{"next second while this second's attempt runs", defs.OverlapSkip, sec(1), 1, 0, 0, overlapLater},
		{"next second while one goes out in this batch", defs.OverlapSkip, sec(1), 0, 0, 1, overlapLater},
		{"wait policy is judged at the fire time too", defs.OverlapWait, sec(1), 1, 0, 0, overlapLater},
		{"on time while one runs: skip", defs.OverlapSkip, now, 1, 0, 0, overlapSkip},
		{"one second late while one runs: still on time", defs.OverlapSkip, sec(-1), 1, 0, 0, overlapSkip},
		{"three seconds late while one runs: queues", defs.OverlapSkip, sec(-3), 1, 0, 0, overlapWait},
		{"wait policy queues", defs.OverlapWait, now, 1, 0, 0, overlapWait},
		{"catch-up behind one in this batch", defs.OverlapSkip, now, 0, 0, 1, overlapWait},
		{"allow ignores running", defs.OverlapAllow, now, 3, 0, 0, overlapGo},
		{"allow claims ahead", defs.OverlapAllow, sec(1), 3, 2, 1, overlapGo},
	} {
		if got := overlapDecide(tc.p, tc.due, now, tc.running, tc.held, tc.claimed); got != tc.want {
			t.Errorf("%s: overlapDecide = %d, want %d", tc.name, got, tc.want)
		}
	}
}
