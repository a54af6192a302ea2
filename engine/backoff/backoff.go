// Package backoff computes retry waits: the first two retries wait the
// fixed interval; from the third on the wait doubles, up to a cap (10
// minutes by default). It never overflows, for any retry count or interval:
// the cap is applied before doubling (peers have crashed on retries=1000).
package backoff

import "time"

// DefaultCap is the longest wait between two attempts.
const DefaultCap = 10 * time.Minute

// Delay returns the wait before retry number n (1 = the first retry) for a
// task whose retry interval is interval. A cap of zero means DefaultCap;
// a non-positive n or interval waits nothing.
func Delay(n int, interval, cap time.Duration) time.Duration {
	if cap <= 0 {
		cap = DefaultCap
	}
	if n <= 0 || interval <= 0 {
		return 0
	}
	d := min(interval, cap)
	for i := 3; i <= n && d < cap; i++ {
		if d > cap/2 {
			return cap
		}
		d *= 2
	}
	return min(d, cap)
}

// Span returns the longest time the retries of a task can take: the sum of
// the waits of all count retries plus one timeout per attempt. The executor
// SDK keeps a ticket's result this long plus five minutes.
func Span(count int, interval, timeout, cap time.Duration) time.Duration {
	var total time.Duration
	const max = time.Duration(1<<63 - 1)
	for n := 1; n <= count; n++ {
		step := Delay(n, interval, cap) + timeout
		if total > max-step {
			return max
		}
		total += step
	}
	if total > max-timeout {
		return max
	}
	return total + timeout
}
