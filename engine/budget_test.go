package engine

import (
	"errors"
	"testing"
	"time"
)

// withinBudget stops a turn's dispatch once its budget has passed (the
// rest goes out next turn), at once when nothing more is due or a step
// fails, and always runs one step.
func TestWithinBudget(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	boom := errors.New("store down")
	for _, tc := range []struct {
		name      string
		budget    time.Duration
		tick      time.Duration // the clock's advance per step
		more      int           // steps that report more to do (then: none)
		failAt    int           // the step that fails (0: none)
		wantSteps int
		wantLeft  bool
		wantErr   error
	}{
		{"budget cuts a long burst", 100 * time.Millisecond, 30 * time.Millisecond, 1000, 0, 4, true, nil},
		{"exactly at the budget", 90 * time.Millisecond, 30 * time.Millisecond, 1000, 0, 3, true, nil},
		{"nothing more before the budget", 100 * time.Millisecond, 30 * time.Millisecond, 2, 0, 3, false, nil},
		{"a slow step still runs once", 100 * time.Millisecond, time.Second, 1000, 0, 1, true, nil},
		{"a step that fails ends the turn", 100 * time.Millisecond, time.Millisecond, 1000, 2, 2, false, boom},
		{"no time passing: until done", 100 * time.Millisecond, 0, 50, 0, 51, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now, steps := t0, 0
			var seen []time.Time
			clock := func() time.Time { now = now.Add(tc.tick); return now }
			left, err := withinBudget(t0, tc.budget, clock, func(at time.Time) (bool, error) {
				steps++
				seen = append(seen, at)
				if steps == tc.failAt {
					return true, boom
				}
				return steps <= tc.more, nil
			})
			if steps != tc.wantSteps || left != tc.wantLeft || !errors.Is(err, tc.wantErr) {
				t.Errorf("%d steps, left %v, err %v; want %d, %v, %v", steps, left, err, tc.wantSteps, tc.wantLeft, tc.wantErr)
			}
			if len(seen) > 0 && !seen[0].Equal(t0) {
				t.Errorf("the first step ran at %s, want the turn's start %s", seen[0], t0)
			}
			for i := 1; i < len(seen); i++ {
				if want := t0.Add(time.Duration(i) * tc.tick); !seen[i].Equal(want) {
					t.Errorf("step %d ran at %s, want the clock read after the step before (%s)", i+1, seen[i], want)
				}
			}
		})
	}
}
