package breaker

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

func TestOpensAboveThresholdAndCloses(t *testing.T) {
	t.Parallel()
	b := New(Config{})
	now := t0
	// 5 successes, then failures: opens on the failure that takes the ratio above 50 %.
	for range 5 {
		if _, changed := b.Record("a.x", true, now); changed {
			t.Fatal("changed on success")
		}
		now = now.Add(time.Second)
	}
	opened := -1
	for i := range 10 {
		ch, changed := b.Record("a.x", false, now)
		now = now.Add(time.Second)
		if changed {
			if !ch.Open || ch.Failures != 6 || ch.Total != 11 || ch.Task != "a.x" {
				t.Fatalf("change = %+v", ch)
			}
			opened = i
			break
		}
	}
	if opened != 5 {
		t.Fatalf("opened after failure %d, want the 6th (6 of 11 > 50 %%)", opened+1)
	}
	if f := b.Factor("a.x"); f != 0.1 {
		t.Errorf("factor while open = %v, want 0.1", f)
	}
	if f := b.Factor("a.y"); f != 1 {
		t.Errorf("another task's factor = %v", f)
	}
	open, since, rate, total := b.State("a.x", now)
	if !open || !since.Equal(now.Add(-time.Second)) || total != 11 || rate <= 0.5 {
		t.Errorf("state = %v %s %v %d", open, since, rate, total)
	}
	// Recovery: successes bring the ratio back to 50 %: it closes, once.
	closes := 0
	for range 3 {
		if ch, changed := b.Record("a.x", true, now); changed {
			closes++
			if ch.Open || ch.Rate > 0.5 {
				t.Errorf("close change = %+v", ch)
			}
		}
	}
	if closes != 1 || b.Factor("a.x") != 1 {
		t.Errorf("closed %d times, factor %v", closes, b.Factor("a.x"))
	}
}

// TestMinimumOutcomesAcrossWindows: fewer outcomes in the window than the
// minimum are judged with the last minimum outcomes, so a task failing every
// attempt trips after MinSamples failures however far apart they are.
func TestMinimumOutcomesAcrossWindows(t *testing.T) {
	t.Parallel()
	b := New(Config{MinSamples: 4, Window: time.Minute})
	for range 3 {
		if _, changed := b.Record("t", false, t0); changed {
			t.Fatal("opened below the minimum")
		}
	}
	// The fourth failure comes two windows later: the last four all failed.
	ch, changed := b.Record("t", false, t0.Add(2*time.Minute))
	if !changed || !ch.Open || ch.Failures != 4 || ch.Total != 4 {
		t.Fatalf("fourth failure, outside the window of the others: %+v %v, want open on 4 of 4", ch, changed)
	}
	if _, _, rate, total := b.State("t", t0.Add(2*time.Minute)); total != 4 || rate != 1 {
		t.Errorf("state: rate %v of %d, want 1 of 4", rate, total)
	}
	// Successes, also a window apart: [f f f f s] stays open (3 of 4), [f f f f s s] closes (2 of 4).
	if _, changed := b.Record("t", true, t0.Add(3*time.Minute)); changed {
		t.Error("closed at 3 failures of the last 4")
	}
	if ch, changed := b.Record("t", true, t0.Add(4*time.Minute)); !changed || ch.Open {
		t.Errorf("at 2 failures of the last 4: %+v %v, want closed", ch, changed)
	}
	// Half failing, an hour apart, never exceeds the ratio.
	for i := range 20 {
		if _, changed := b.Record("u", i%2 == 0, t0.Add(time.Duration(i)*time.Hour)); changed {
			t.Fatalf("outcome %d of a half-failing task changed the breaker", i)
		}
	}
	// Outcomes inside the window still rule when there are enough of them.
	for i := range 4 {
		b.Record("v", true, t0.Add(time.Duration(i)*time.Second))
	}
	for i := range 3 {
		if _, changed := b.Record("v", false, t0.Add(10*time.Second+time.Duration(i)*time.Second)); changed {
			t.Errorf("failure %d: 3 of 7 in the window opened it", i+1)
		}
	}
}

func TestPerTaskConfig(t *testing.T) {
	t.Parallel()
	b := New(Config{})
	b.SetTask("x", Config{MinSamples: 2, Threshold: 0.4})
	if c := b.TaskConfig("x"); c.MinSamples != 2 || c.Threshold != 0.4 || c.Window != 5*time.Minute || c.Factor != 0.1 {
		t.Errorf("x config %+v: zero fields take the breaker's", c)
	}
	b.Record("x", false, t0)
	if _, changed := b.Record("x", false, t0); !changed {
		t.Error("x did not open after its 2 failures")
	}
	for i := range 9 {
		if _, changed := b.Record("y", false, t0); changed {
			t.Fatalf("y opened at %d failures, below the breaker's minimum of 10", i+1)
		}
	}
	if _, changed := b.Record("y", false, t0); !changed {
		t.Error("y did not open at 10 failures")
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := New(Config{Threshold: 7, Factor: -1}).Config()
	if c.Window != 5*time.Minute || c.Threshold != 0.5 || c.MinSamples != 10 || c.Factor != 0.1 {
		t.Errorf("defaults = %+v", c)
	}
}

// TestDefaultsAtTheirBounds: a ratio must lie strictly between 0 and 1 and
// a factor in (0, 1]; anything else, and zero or negative counts and
// windows, takes the default.
func TestDefaultsAtTheirBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   Config
		want Config
	}{
		{"zero", Config{}, Config{Window: 5 * time.Minute, Threshold: 0.5, MinSamples: 10, Factor: 0.1}},
		{"negative", Config{Window: -time.Second, Threshold: -0.1, MinSamples: -3, Factor: -0.5}, Config{Window: 5 * time.Minute, Threshold: 0.5, MinSamples: 10, Factor: 0.1}},
		{"ratio 1 and factor 1", Config{Threshold: 1, Factor: 1}, Config{Window: 5 * time.Minute, Threshold: 0.5, MinSamples: 10, Factor: 1}},
		{"just inside", Config{Window: time.Second, Threshold: 0.99, MinSamples: 1, Factor: 0.01}, Config{Window: time.Second, Threshold: 0.99, MinSamples: 1, Factor: 0.01}},
	} {
		if got := New(tc.in).Config(); got != tc.want {
			t.Errorf("%s: New(%+v).Config() = %+v, want %+v", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestSetTaskTakesTheBreakersFields: a task's zero or out-of-range fields
// take the breaker's own configuration (not the package defaults), and
// setting a task forgets its outcomes.
func TestSetTaskTakesTheBreakersFields(t *testing.T) {
	t.Parallel()
	own := Config{Window: time.Minute, Threshold: 0.3, MinSamples: 4, Factor: 0.2}
	b := New(own)
	b.SetTask("zero", Config{})
	b.SetTask("bad", Config{Window: -time.Second, Threshold: 1, MinSamples: -1, Factor: 1.5})
	b.SetTask("edge", Config{Threshold: 0.9, Factor: 1})
	for task, want := range map[string]Config{
		"zero":  own,
		"bad":   own,
		"edge":  {Window: time.Minute, Threshold: 0.9, MinSamples: 4, Factor: 1},
		"other": own,
	} {
		if got := b.TaskConfig(task); got != want {
			t.Errorf("TaskConfig(%s) = %+v, want %+v", task, got, want)
		}
	}
	for range 4 {
		b.Record("zero", false, t0)
	}
	if f := b.Factor("zero"); f != 0.2 {
		t.Fatalf("after 4 failures of 4 the factor is %v, want the breaker's 0.2", f)
	}
	b.SetTask("zero", Config{Factor: 0.5})
	if open, _, _, total := b.State("zero", t0); open || total != 0 || b.Factor("zero") != 1 {
		t.Errorf("after SetTask: open=%v total=%d factor=%v, want its outcomes forgotten", open, total, b.Factor("zero"))
	}
	b.Record("zero", false, t0)
	b.Record("zero", false, t0)
	b.Record("zero", false, t0)
	if _, changed := b.Record("zero", false, t0); !changed || b.Factor("zero") != 0.5 {
		t.Errorf("4 new failures: changed=%v factor=%v, want open with its own factor 0.5", changed, b.Factor("zero"))
	}
}

// TestWindowSpansAllItsBuckets: one outcome in each ten-second bucket of a
// five-minute window counts thirty outcomes; the thirty-first bucket
// replaces the first.
func TestWindowSpansAllItsBuckets(t *testing.T) {
	t.Parallel()
	b := New(Config{})
	for i := range 30 {
		b.Record("t", i%3 == 0, t0.Add(time.Duration(i)*10*time.Second)) // 10 successes, 20 failures
	}
	now := t0.Add(290 * time.Second)
	if open, _, rate, total := b.State("t", now); !open || total != 30 || rate != 20.0/30 {
		t.Errorf("State at +290s = open %v, rate %v of %d; want open, 20/30 of 30", open, rate, total)
	}
	// +300 s: the bucket of t0 is five minutes old and its slot is reused.
	b.Record("t", false, t0.Add(300*time.Second))
	if _, _, rate, total := b.State("t", t0.Add(300*time.Second)); total != 30 || rate != 21.0/30 {
		t.Errorf("State at +300s = rate %v of %d; want 21/30 of 30 (the first bucket, a success, dropped out)", rate, total)
	}
}

// TestBucketLeavesTheWindow: a bucket counts while its start lies within
// the window, (now-window, now]; one that started exactly a window ago is
// out. Fewer outcomes than the minimum ever recorded: nothing is judged.
func TestBucketLeavesTheWindow(t *testing.T) {
	t.Parallel()
	b := New(Config{})
	for range 3 {
		b.Record("t", false, t0.Add(5*time.Second)) // the bucket starting at t0
	}
	if _, _, rate, total := b.State("t", t0.Add(5*time.Minute-time.Second)); total != 3 || rate != 1 {
		t.Errorf("one second before the bucket is a window old: rate %v of %d, want 1 of 3", rate, total)
	}
	if _, _, rate, total := b.State("t", t0.Add(5*time.Minute)); total != 0 || rate != 0 {
		t.Errorf("once the bucket is a window old: rate %v of %d, want 0 of 0", rate, total)
	}
	if open, since, rate, total := b.State("never", t0); open || !since.IsZero() || rate != 0 || total != 0 {
		t.Errorf("a task with no outcome: %v %s %v %d", open, since, rate, total)
	}
}

// TestCutIsATenthOfTheTasksOwnDispatches: an open breaker allows per window
// a tenth, rounded up and at least one, of the dispatches made in the
// window before it opened, sliding: one more as soon as one leaves the
// window.
func TestCutIsATenthOfTheTasksOwnDispatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		before, allow int
	}{
		{"thirty make three, not four", 30, 3},
		{"thirty-one round up to four", 31, 4},
		{"ten make one", 10, 1},
		{"none still allow one", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := New(Config{MinSamples: 1})
			now := t0
			for range tc.before {
				if ok, _ := b.Allow("a.x", now); !ok {
					t.Fatal("a closed breaker held a dispatch back")
				}
				b.Dispatched("a.x", now)
				now = now.Add(time.Second)
			}
			if ch, changed := b.Record("a.x", false, now); !changed || !ch.Open || ch.Was != tc.before || ch.Allowed != tc.allow {
				t.Fatalf("change %+v (%v); want it open, was %d, allowed %d", ch, changed, tc.before, tc.allow)
			}
			made := 0
			var first time.Time
			for at := now; at.Before(now.Add(5 * time.Minute)); at = at.Add(time.Second) {
				if ok, _ := b.Allow("a.x", at); ok {
					if first.IsZero() {
						first = at
					}
					b.Dispatched("a.x", at)
					made++
				}
			}
			if made != tc.allow {
				t.Errorf("%d dispatches allowed in the window after it opened, want %d", made, tc.allow)
			}
			c, ok := b.CutOf("a.x", now.Add(5*time.Minute-time.Second))
			if !ok || c.String() != fmt.Sprintf("%d dispatch(es) allowed per 5m0s, was %d", tc.allow, tc.before) || c.Next != first.Add(5*time.Minute) {
				t.Errorf("cut %+v %q; want the next at %s", c, c, first.Add(5*time.Minute))
			}
			if ok, wait := b.Allow("a.x", first.Add(5*time.Minute)); !ok || wait != 0 {
				t.Errorf("the first dispatch left the window, yet Allow = %v, %s", ok, wait)
			}
		})
	}
}

// TestUndispatchedIsNotMeasured: a dispatch counted and taken back (its
// transaction failed) counts neither in the window the cut is measured
// against nor among the dispatches an open breaker allows.
func TestUndispatchedIsNotMeasured(t *testing.T) {
	t.Parallel()
	b := New(Config{Window: time.Minute, MinSamples: 3})
	now := t0
	for i := range 30 { // 30 dispatches planned, every other one taken back: 15 made
		b.Dispatched("a.x", now)
		if i%2 == 1 {
			b.Undispatched("a.x", now)
		}
		now = now.Add(time.Second)
	}
	b.Undispatched("a.y", now) // a task never dispatched: nothing to take back, nothing changes
	var ch Change
	for range 3 {
		ch, _ = b.Record("a.x", false, now)
	}
	if !ch.Open || ch.Was != 15 || ch.Allowed != 2 {
		t.Fatalf("opened %v after 15 dispatches made (30 planned): was %d, allowed %d; want was 15, allowed 2", ch.Open, ch.Was, ch.Allowed)
	}
	b.Dispatched("a.x", now)
	b.Undispatched("a.x", now)
	b.Dispatched("a.x", now)
	if ok, _ := b.Allow("a.x", now); !ok {
		t.Errorf("one dispatch made of the 2 allowed (one taken back): Allow refused the second")
	}
	b.Dispatched("a.x", now)
	if ok, _ := b.Allow("a.x", now); ok {
		t.Errorf("2 dispatches made of the 2 allowed: Allow let a third through")
	}
}
