package backoff

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/defs"
)

func TestWaitPerBackoff(t *testing.T) {
	t.Parallel()
	s := time.Second
	for _, tc := range []struct {
		name string
		r    defs.Retry
		cap  time.Duration
		want []time.Duration // seconds of retries 1, 2, 3, …
	}{
		{"default is seed", defs.Retry{Interval: 30 * s}, 0, []time.Duration{30, 30, 60, 120, 240, 480, 600, 600}},
		{"seed", defs.Retry{Interval: 30 * s, Backoff: defs.BackoffSeed}, 0, []time.Duration{30, 30, 60, 120, 240, 480, 600}},
		{"seed under max_interval", defs.Retry{Interval: 30 * s, Backoff: defs.BackoffSeed, MaxInterval: 100 * s}, 0, []time.Duration{30, 30, 60, 100, 100}},
		{"fixed", defs.Retry{Interval: 45 * s, Backoff: defs.BackoffFixed}, 0, []time.Duration{45, 45, 45, 45}},
		{"fixed over the server's cap", defs.Retry{Interval: time.Hour, Backoff: defs.BackoffFixed}, time.Minute, []time.Duration{60, 60}},
		{"exponential, factor 2 by default", defs.Retry{Interval: 10 * s, Backoff: defs.BackoffExponential}, 0, []time.Duration{10, 20, 40, 80, 160, 320, 600}},
		{"exponential, factor 3, max 5m", defs.Retry{Interval: 10 * s, Backoff: defs.BackoffExponential, Factor: 3, MaxInterval: 5 * time.Minute}, 0, []time.Duration{10, 30, 90, 270, 300, 300}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for i, w := range tc.want {
				if got := Wait(tc.r, i+1, tc.cap, 7); got != w*s {
					t.Errorf("retry %d: %s, want %s", i+1, got, w*s)
				}
			}
		})
	}
}

func TestWaitNoOverflow(t *testing.T) {
	t.Parallel()
	r := defs.Retry{Interval: 1<<62 + 1, Backoff: defs.BackoffExponential, Factor: 10}
	for _, n := range []int{1, 1000, 1<<31 - 1} {
		if d := Wait(r, n, 0, 1); d <= 0 || d > DefaultCap {
			t.Errorf("retry %d waits %s, want in (0, 10m]", n, d)
		}
	}
	if s := SpanOf(defs.Retry{Count: 1 << 40, Interval: time.Hour, Backoff: defs.BackoffFixed}, 1<<62, 0); s != time.Duration(1<<63-1) {
		t.Errorf("huge SpanOf = %s, want it clamped", s)
	}
}

// Jitter shortens a wait by at most its share, the same for the same
// instance and retry, and differently across instances.
func TestWaitJitter(t *testing.T) {
	t.Parallel()
	r := defs.Retry{Interval: 100 * time.Second, Backoff: defs.BackoffFixed, Jitter: 0.5}
	seen := map[time.Duration]bool{}
	for key := int64(1); key <= 50; key++ {
		d := Wait(r, 1, 0, key)
		if d < 50*time.Second || d > 100*time.Second {
			t.Fatalf("instance %d waits %s, want within [50s, 100s]", key, d)
		}
		if again := Wait(r, 1, 0, key); again != d {
			t.Fatalf("instance %d waits %s then %s: the wait must not change", key, d, again)
		}
		seen[d] = true
	}
	if len(seen) < 25 {
		t.Errorf("50 instances drew %d distinct waits: the jitter does not spread them", len(seen))
	}
}

func TestSpanOf(t *testing.T) {
	t.Parallel()
	m := time.Minute
	// Seed is Span: 3 retries of 30 s, 5 m timeout.
	if got, want := SpanOf(defs.Retry{Count: 3, Interval: 30 * time.Second}, 5*m, 0), 22*m; got != want {
		t.Errorf("seed SpanOf = %s, want %s", got, want)
	}
	// Exponential 1m ×2: waits 1, 2, 4 m; 4 attempts of 1 m.
	if got, want := SpanOf(defs.Retry{Count: 3, Interval: m, Backoff: defs.BackoffExponential, Jitter: 1}, m, 0), 11*m; got != want {
		t.Errorf("exponential SpanOf = %s, want %s", got, want)
	}
}
