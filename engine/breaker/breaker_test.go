package breaker

import (
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

func TestMinimumSampleAndWindow(t *testing.T) {
	t.Parallel()
	b := New(Config{MinSamples: 4, Window: time.Minute})
	for range 3 {
		if _, changed := b.Record("t", false, t0); changed {
			t.Fatal("opened below the minimum sample")
		}
	}
	// Old failures slide out of the window: one failure two minutes later is alone.
	if _, changed := b.Record("t", false, t0.Add(2*time.Minute)); changed {
		t.Fatal("failures outside the window counted")
	}
	_, _, _, total := b.State("t", t0.Add(2*time.Minute))
	if total != 1 {
		t.Errorf("outcomes in window = %d, want 1", total)
	}
	for i := range 3 {
		_, changed := b.Record("t", false, t0.Add(2*time.Minute+time.Duration(i)*time.Second))
		if changed != (i == 2) {
			t.Errorf("failure %d in window: changed = %v", i+2, changed)
		}
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := New(Config{Threshold: 7, Factor: -1}).Config()
	if c.Window != 5*time.Minute || c.Threshold != 0.5 || c.MinSamples != 10 || c.Factor != 0.1 {
		t.Errorf("defaults = %+v", c)
	}
}
