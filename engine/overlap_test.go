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
		backlog                time.Time // when the misfire rule judged the backlog (zero: never)
		running, held, claimed int
		want                   overlapVerdict
	}{
		{"idle, due now", defs.OverlapSkip, now, time.Time{}, 0, 0, 0, overlapGo},
		{"idle, claimed ahead", defs.OverlapSkip, sec(0.5), time.Time{}, 0, 0, 0, overlapGo},
		{"next second while this second's attempt is held", defs.OverlapSkip, sec(1), time.Time{}, 0, 1, 0, overlapLater},
		{"next second while this second's attempt runs", defs.OverlapSkip, sec(1), time.Time{}, 1, 0, 0, overlapLater},
		{"next second while one goes out in this batch", defs.OverlapSkip, sec(1), time.Time{}, 0, 0, 1, overlapLater},
		{"wait policy is judged at the fire time too", defs.OverlapWait, sec(1), time.Time{}, 1, 0, 0, overlapLater},
		{"on time while one runs: skip", defs.OverlapSkip, now, time.Time{}, 1, 0, 0, overlapSkip},
		{"one second late while one runs: still on time", defs.OverlapSkip, sec(-1), time.Time{}, 1, 0, 0, overlapSkip},
		{"three seconds late while one runs: queues", defs.OverlapSkip, sec(-3), time.Time{}, 1, 0, 0, overlapWait},
		{"wait policy queues", defs.OverlapWait, now, time.Time{}, 1, 0, 0, overlapWait},
		{"catch-up behind one in this batch", defs.OverlapSkip, now, time.Time{}, 0, 0, 1, overlapWait},
		{"misfire catch-up just due while one runs: queues", defs.OverlapSkip, sec(-1), now, 1, 0, 0, overlapWait},
		{"misfire catch-up run at the resume while one runs: queues", defs.OverlapSkip, now, now, 1, 0, 0, overlapWait},
		{"a regular fire after the backlog while one runs: skip", defs.OverlapSkip, now, sec(-0.5), 1, 0, 0, overlapSkip},
		{"allow ignores running", defs.OverlapAllow, now, time.Time{}, 3, 0, 0, overlapGo},
		{"allow claims ahead", defs.OverlapAllow, sec(1), time.Time{}, 3, 2, 1, overlapGo},
	} {
		if got := overlapDecide(tc.p, tc.due, now, tc.backlog, tc.running, tc.held, tc.claimed); got != tc.want {
			t.Errorf("%s: overlapDecide = %d, want %d", tc.name, got, tc.want)
		}
	}
}
