package engine

import "time"

// txSize bounds how many instances one transaction of the loop records (a
// dispatch batch, a result batch) by how long the last ones took, so that
// no transaction holds the store's one writer (SQLite) or its shared lock
// on the lease row (MySQL) for much longer than target. A lease renewal
// waits for the transaction in progress, and must be done within a third
// of the TTL whatever the load: on a loaded 2-core machine a batch of
// 1,000 took over a second, so a fixed size cannot promise it. The size
// halves (or shrinks in proportion) when a transaction took longer than
// target and doubles, up to max, when a full one took less than half of
// it; it never falls below min, so that a slow store still moves work.
// Owned by the loop; not safe for concurrent use.
type txSize struct {
	max, min int
	target   time.Duration
	n        int
}

// txSizeMin is the fewest instances a transaction of the loop is cut to:
// below it the commit, not the instances, is the cost.
const txSizeMin = 16

func newTxSize(max int, target time.Duration) txSize {
	return txSize{max: max, min: min(txSizeMin, max), target: target, n: max}
}

// next is how many instances the next transaction may record.
func (s *txSize) next() int { return s.n }

// took learns from a transaction that recorded n instances in d.
func (s *txSize) took(n int, d time.Duration) {
	switch {
	case n <= 0 || s.target <= 0:
	case d > s.target:
		// What would have taken target at the rate just seen, never more
		// than now.
		fit := int(int64(n) * int64(s.target) / int64(d))
		s.n = max(s.min, min(s.n, fit))
	case n >= s.n && d < s.target/2:
		s.n = min(s.max, 2*s.n)
	}
}
