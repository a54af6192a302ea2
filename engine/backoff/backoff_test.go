package backoff

import (
	"testing"
	"time"
)

func TestSequence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		interval time.Duration
		cap      time.Duration
		want     []time.Duration // seconds of retries 1, 2, 3, …
	}{
		{"30s interval", 30 * time.Second, 0, []time.Duration{30, 30, 60, 120, 240, 480, 600, 600, 600}},
		{"1s interval", time.Second, 0, []time.Duration{1, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 600}},
		{"interval above cap", time.Hour, 0, []time.Duration{600, 600, 600}},
		{"custom cap", 10 * time.Second, time.Minute, []time.Duration{10, 10, 20, 40, 60, 60}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for i, w := range tc.want {
				if got := Delay(i+1, tc.interval, tc.cap); got != w*time.Second {
					t.Errorf("retry %d: %s, want %s", i+1, got, w*time.Second)
				}
			}
		})
	}
}

func TestNoOverflow(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1000, 1 << 20, 1<<31 - 1} {
		for _, iv := range []time.Duration{time.Hour, time.Nanosecond, 1<<62 + 1} {
			d := Delay(n, iv, 0)
			if d <= 0 || d > DefaultCap {
				t.Errorf("Delay(%d, %s) = %s, want in (0, 10m]", n, iv, d)
			}
		}
	}
	if d := Delay(0, time.Second, 0); d != 0 {
		t.Errorf("retry 0 waits %s", d)
	}
	if s := Span(1000, time.Hour, time.Hour, 0); s <= 0 {
		t.Errorf("Span overflowed: %s", s)
	}
	if s := Span(1<<40, time.Hour, 1<<62, 0); s != time.Duration(1<<63-1) {
		t.Errorf("huge Span = %s, want it clamped to the max duration", s)
	}
}

func TestSpan(t *testing.T) {
	t.Parallel()
	// 3 retries of 30 s with a 5 m timeout: 4 attempts × 5 m + 30 + 30 + 60 s.
	if got, want := Span(3, 30*time.Second, 5*time.Minute, 0), 20*time.Minute+2*time.Minute; got != want {
		t.Errorf("Span = %s, want %s", got, want)
	}
	if got := Span(0, 30*time.Second, time.Minute, 0); got != time.Minute {
		t.Errorf("no retries: Span = %s, want the one timeout", got)
	}
}

// TestCapNotAMultipleOfTheInterval: doubling stops at the cap however the
// two line up. With a 1 ns interval and a 3 ns cap the waits are 1, 1, 2
// (double the second), 3 (4 capped), 3. Worked out by hand from the retry rule, not run.
func TestCapNotAMultipleOfTheInterval(t *testing.T) {
	t.Parallel()
	for n, want := range []time.Duration{1, 1, 2, 3, 3} {
		if got := Delay(n+1, 1, 3); got != want {
			t.Errorf("Delay(%d, 1ns, cap 3ns) = %d ns, want %d ns", n+1, got, want)
		}
	}
}

// TestCapNearTheLongestDuration: a cap close to the largest duration still
// doubles without overflowing: 2^61 ns waits 2^61, 2^61, then 2^62, then
// the cap (2^63 would overflow).
func TestCapNearTheLongestDuration(t *testing.T) {
	t.Parallel()
	const longest = time.Duration(1<<63 - 1)
	for n, want := range []time.Duration{1 << 61, 1 << 61, 1 << 62, longest, longest} {
		if got := Delay(n+1, 1<<61, longest); got != want {
			t.Errorf("Delay(%d, 2^61 ns, cap max) = %d, want %d", n+1, got, want)
		}
	}
}

// TestZeroInterval: an interval of zero waits nothing on every retry.
func TestZeroInterval(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 10} {
		if got := Delay(n, 0, 0); got != 0 {
			t.Errorf("Delay(%d, 0, 0) = %s, want 0", n, got)
		}
	}
	if got := Delay(3, -time.Second, 0); got != 0 {
		t.Errorf("a negative interval waits %s, want 0", got)
	}
}
