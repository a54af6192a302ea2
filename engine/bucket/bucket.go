// Package bucket is the dispatch token bucket: at most N dispatches a
// second globally and, optionally, per pipeline group, changeable at run
// time. A dispatch needs a token from the global bucket and from its group's;
// it takes neither unless both are there, so a throttled group never wastes
// global capacity. Capacity is one second's worth of tokens, as in the
// article: a burst of N, then N a second.
//
// The bucket only answers "now, or in how long"; the scheduler keeps what
// must wait in its priority queue, so nothing is ever dropped.
//
// Every call takes the time explicitly, so tests drive it with a fake clock.
// A Bucket is safe for concurrent use.
package bucket

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Bucket limits dispatches globally and per group. Rates are in dispatches
// per second; zero means unlimited.
type Bucket struct {
	mu     sync.Mutex
	global *rate.Limiter
	groups map[string]*rate.Limiter
	rates  Limits
}

// Limits are the configured rates: Global, and Groups by group name.
type Limits struct {
	Global float64            `json:"global"`
	Groups map[string]float64 `json:"groups,omitempty"`
}

// New returns a bucket with the given limits, full at now.
func New(l Limits, now time.Time) *Bucket {
	b := &Bucket{groups: map[string]*rate.Limiter{}, rates: Limits{Groups: map[string]float64{}}}
	b.SetGlobal(l.Global, now)
	for g, r := range l.Groups {
		b.SetGroup(g, r, now)
	}
	return b
}

func limiter(r float64, now time.Time) *rate.Limiter {
	if r <= 0 {
		return nil
	}
	burst := max(1, int(math.Ceil(r)))
	l := rate.NewLimiter(rate.Limit(r), burst)
	l.AllowN(now, 0) // start full at now, not at the zero time
	return l
}

// SetGlobal changes the global rate at now; zero lifts the limit.
func (b *Bucket) SetGlobal(r float64, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.global = retune(b.global, r, now)
	b.rates.Global = max(r, 0)
}

// SetGroup changes a group's rate at now; zero lifts the group's limit.
func (b *Bucket) SetGroup(group string, r float64, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := retune(b.groups[group], r, now); l != nil {
		b.groups[group] = l
		b.rates.Groups[group] = r
	} else {
		delete(b.groups, group)
		delete(b.rates.Groups, group)
	}
}

// retune changes l's rate in place (keeping the tokens it has) or makes a new one.
func retune(l *rate.Limiter, r float64, now time.Time) *rate.Limiter {
	if r <= 0 {
		return nil
	}
	if l == nil {
		return limiter(r, now)
	}
	l.SetLimitAt(now, rate.Limit(r))
	l.SetBurstAt(now, max(1, int(math.Ceil(r))))
	return l
}

// Limits returns the rates in force.
func (b *Bucket) Limits() Limits {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := Limits{Global: b.rates.Global, Groups: make(map[string]float64, len(b.rates.Groups))}
	for g, r := range b.rates.Groups {
		out.Groups[g] = r
	}
	return out
}

// Take takes a token for one dispatch of group at now. When none is there it
// takes nothing and returns how long until one will be: ask again then.
func (b *Bucket) Take(group string, now time.Time) (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	gl := b.groups[group]
	wait = max(waitFor(b.global, now), waitFor(gl, now))
	if wait > 0 {
		return false, wait
	}
	if b.global != nil {
		b.global.AllowN(now, 1)
	}
	if gl != nil {
		gl.AllowN(now, 1)
	}
	return true, 0
}

// waitFor returns how long until l holds a whole token; 0 when it does.
func waitFor(l *rate.Limiter, now time.Time) time.Duration {
	if l == nil {
		return 0
	}
	tokens := l.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	d := time.Duration((1 - tokens) / float64(l.Limit()) * float64(time.Second))
	return max(d, time.Millisecond)
}
