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
