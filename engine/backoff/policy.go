package backoff

import (
	"math"
	"time"

	"github.com/ax-sched/ax/defs"
)

// Wait returns the wait before retry number n (1 = the first retry) of a
// task with retry policy r, under the server's cap (zero: DefaultCap):
//   - seed: the interval twice, then doubling (Delay);
//   - fixed: the interval every time;
//   - exponential: interval × factor^(n-1).
//
// Every wait is capped by the task's max_interval when it sets one, else
// by cap. Jitter j shortens the wait by up to j of it, by an amount drawn
// from key and n (the instance's id): the same instance and retry always
// wait the same, so that `ax explain` and the scheduler agree, while the
// retries of many instances that failed at once spread out.
func Wait(r defs.Retry, n int, cap time.Duration, key int64) time.Duration {
	d := waitNoJitter(r, n, cap)
	if r.Jitter <= 0 || d <= 0 {
		return d
	}
	return d - time.Duration(float64(d)*min(r.Jitter, 1)*unit(key, n))
}

// SpanOf returns the longest time the retries of a task with policy r can
// take (see Span): jitter only shortens the waits.
func SpanOf(r defs.Retry, timeout, cap time.Duration) time.Duration {
	if r.Backoff == "" || r.Backoff == defs.BackoffSeed {
		return Span(r.Count, r.Interval, timeout, capOf(r, cap))
	}
	var total time.Duration
	const most = time.Duration(math.MaxInt64)
	for n := 0; n <= r.Count; n++ {
		step := timeout
		if n > 0 {
			step += waitNoJitter(r, n, cap)
		}
		if step < 0 || total > most-step {
			return most
		}
		total += step
	}
	return total
}

func capOf(r defs.Retry, cap time.Duration) time.Duration {
	if r.MaxInterval > 0 {
		return r.MaxInterval
	}
	if cap <= 0 {
		return DefaultCap
	}
	return cap
}

func waitNoJitter(r defs.Retry, n int, cap time.Duration) time.Duration {
	if n <= 0 || r.Interval <= 0 {
		return 0
	}
	c := capOf(r, cap)
	switch r.Backoff {
	case defs.BackoffFixed:
		return min(r.Interval, c)
	case defs.BackoffExponential:
		f := r.Factor
		if f <= 1 {
			f = defs.DefaultBackoffFactor
		}
		d := float64(min(r.Interval, c))
		// The cap is checked before each multiplication: no overflow for any n.
		for i := 2; i <= n; i++ {
			if d*f >= float64(c) {
				return c
			}
			d *= f
		}
		return time.Duration(d)
	default:
		return Delay(n, r.Interval, c)
	}
}

// unit draws a number in [0, 1) from key and n (splitmix64).
func unit(key int64, n int) float64 {
	z := uint64(key)*0x9E3779B97F4A7C15 + uint64(n)
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}
