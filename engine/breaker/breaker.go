// Package breaker is the per-task circuit breaker: when more than a
// threshold (50 %) of a task's outcomes in a sliding window (five minutes)
// are failures, with at least a minimum number of outcomes, the breaker
// opens and the task's dispatches drop to a fraction (one tenth, rounded
// up, at least one) of those it made in the window before it opened: in
// any window while it is open, no more than that (Allow); it closes when
// the failure rate falls back. Record reports each change so that the
// engine can log it and raise the alert; Dispatched counts the task's
// dispatches, open or closed, and Undispatched takes back one that was not
// made after all.
//
// Outcomes are counted in ten-second buckets, so a task costs a fixed,
// small amount of memory however often it runs. When the window holds fewer
// than the minimum, the last minimum outcomes are judged instead: a task
// that fails every attempt trips its breaker after MinSamples failures even
// when they take longer than one window (an hourly task, say). Each task may
// have its own Config (SetTask); its zero fields take the breaker's. Every call takes the time
// explicitly. A Breaker is safe for concurrent use.
package breaker

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config tunes the breaker; zero fields mean the defaults.
type Config struct {
	Window     time.Duration // sliding window; default 5 m
	Threshold  float64       // failure ratio above which it opens; default 0.5
	MinSamples int           // outcomes in the window before it may open; default 10
	Factor     float64       // the fraction of its dispatches in the window before it opened that a task may make per window while open; default 0.1
}

func (c Config) withDefaults() Config {
	if c.Window <= 0 {
		c.Window = 5 * time.Minute
	}
	if c.Threshold <= 0 || c.Threshold >= 1 {
		c.Threshold = 0.5
	}
	if c.MinSamples <= 0 {
		c.MinSamples = 10
	}
	if c.Factor <= 0 || c.Factor > 1 {
		c.Factor = 0.1
	}
	return c
}

const bucketWidth = 10 * time.Second

// Change is a state change of a task's breaker.
type Change struct {
	Task      string
	Open      bool    // true: it opened; false: it closed
	Failures  int     // in the window
	Total     int     // outcomes in the window
	Rate      float64 // failure ratio in the window
	Threshold float64
	Was       int // opened: the task's dispatches in the window before
	Allowed   int // opened: the dispatches it may make per window while open
	Window    time.Duration
	Kept      bool // open since before: said again (Opened), not a change
}

// Breaker keeps a window of outcomes per task.
type Breaker struct {
	cfg   Config
	mu    sync.Mutex
	tasks map[string]*window
	own   map[string]Config // per-task configurations, defaults applied
}

type window struct {
	cfg     Config
	start   []int64 // bucket start, Unix seconds; parallel to ok and bad
	ok, bad []int32
	last    []bool // the last cfg.MinSamples outcomes (true: a failure), a ring
	next    int    // where the next outcome goes in last
	seen    int    // outcomes ever recorded, up to len(last)
	open    bool
	since   time.Time
	// Dispatches, in buckets like the outcomes (dstart, disp), and, while
	// open, the cut: was, the dispatches in the window before it opened,
	// allowed per window, and the times of those made since (the last
	// window's, at most allowed).
	dstart  []int64
	disp    []int32
	was     int
	allowed int
	made    []time.Time
}

// New returns a breaker with cfg (zero fields: defaults).
func New(cfg Config) *Breaker {
	return &Breaker{cfg: cfg.withDefaults(), tasks: map[string]*window{}, own: map[string]Config{}}
}

// SetTask gives task its own configuration; zero fields take the
// breaker's. It forgets the task's outcomes so far.
func (b *Breaker) SetTask(task string, c Config) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.Window <= 0 {
		c.Window = b.cfg.Window
	}
	if c.Threshold <= 0 || c.Threshold >= 1 {
		c.Threshold = b.cfg.Threshold
	}
	if c.MinSamples <= 0 {
		c.MinSamples = b.cfg.MinSamples
	}
	if c.Factor <= 0 || c.Factor > 1 {
		c.Factor = b.cfg.Factor
	}
	b.own[task] = c
	delete(b.tasks, task)
}

// TaskConfig returns the configuration of task's breaker.
func (b *Breaker) TaskConfig(task string) Config {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.own[task]; ok {
		return c
	}
	return b.cfg
}

// Config returns the configuration in force.
func (b *Breaker) Config() Config { return b.cfg }

// Record counts one outcome of task at now and returns the change of its
// breaker it caused, if any.
func (b *Breaker) Record(task string, ok bool, now time.Time) (Change, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.window(task)
	w.last[w.next] = !ok
	w.next = (w.next + 1) % len(w.last)
	w.seen = min(w.seen+1, len(w.last))
	sec := now.Unix() - now.Unix()%int64(bucketWidth/time.Second)
	i := int(sec/int64(bucketWidth/time.Second)) % len(w.start)
	if w.start[i] != sec {
		w.start[i], w.ok[i], w.bad[i] = sec, 0, 0
	}
	if ok {
		w.ok[i]++
	} else {
		w.bad[i]++
	}
	failures, total := b.count(w, now)
	rate := 0.0
	if total > 0 {
		rate = float64(failures) / float64(total)
	}
	ch := Change{Task: task, Failures: failures, Total: total, Rate: rate, Threshold: w.cfg.Threshold}
	switch {
	case !w.open && total >= w.cfg.MinSamples && rate > w.cfg.Threshold:
		w.open, w.since, ch.Open = true, now, true
		w.was, w.made = w.dispatches(now), nil
		// A tenth, rounded up (in integers: 0.1 × 30 is 3, not 4), and at
		// least one, so that outcomes keep coming and it can close.
		w.allowed = max(1, int(math.Ceil(float64(w.was)*w.cfg.Factor-1e-9)))
		ch.Was, ch.Allowed, ch.Window = w.was, w.allowed, w.cfg.Window
		return ch, true
	case w.open && rate <= w.cfg.Threshold:
		w.open = false
		return ch, true
	}
	return Change{}, false
}

// window returns task's window, made on first use. b.mu is held.
func (b *Breaker) window(task string) *window {
	w := b.tasks[task]
	if w == nil {
		cfg, ok := b.own[task]
		if !ok {
			cfg = b.cfg
		}
		n := max(int(cfg.Window/bucketWidth), 1)
		w = &window{cfg: cfg, start: make([]int64, n), ok: make([]int32, n), bad: make([]int32, n), last: make([]bool, cfg.MinSamples),
			dstart: make([]int64, n), disp: make([]int32, n)}
		b.tasks[task] = w
	}
	return w
}

// Dispatched counts one dispatch of task at now: the measure of what an
// open breaker cuts, and, while open, one of those it allows.
func (b *Breaker) Dispatched(task string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.window(task)
	sec := now.Unix() - now.Unix()%int64(bucketWidth/time.Second)
	i := int(sec/int64(bucketWidth/time.Second)) % len(w.dstart)
	if w.dstart[i] != sec {
		w.dstart[i], w.disp[i] = sec, 0
	}
	w.disp[i]++
	if w.open {
		w.made = append(w.made, now)
	}
}

// Undispatched takes back the dispatch of task counted at at (Dispatched)
// that was not made after all: its transaction failed, or the store
// refused its start. The cut is measured against the dispatches made, so
// one that was only planned counts neither in the window before a breaker
// opens nor among those an open breaker allows.
func (b *Breaker) Undispatched(task string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.tasks[task]
	if w == nil {
		return
	}
	sec := at.Unix() - at.Unix()%int64(bucketWidth/time.Second)
	i := int(sec/int64(bucketWidth/time.Second)) % len(w.dstart)
	if w.dstart[i] == sec && w.disp[i] > 0 {
		w.disp[i]--
	}
	for j := len(w.made) - 1; j >= 0; j-- {
		if w.made[j].Equal(at) {
			w.made = append(w.made[:j], w.made[j+1:]...)
			break
		}
	}
}

// dispatches counts w's dispatches in the window ending at now, by whole
// buckets that start inside it: never more than were made in it.
func (w *window) dispatches(now time.Time) int {
	oldest, n := now.Add(-w.cfg.Window).Unix(), 0
	for i, s := range w.dstart {
		if s > oldest && s <= now.Unix() {
			n += int(w.disp[i])
		}
	}
	return n
}

// Allow reports whether task may be dispatched at now: always while its
// breaker is closed; while open, when it made fewer than the allowed
// dispatches in the window ending at now. Else wait is how long until one
// of those leaves the window.
func (b *Breaker) Allow(task string, now time.Time) (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.tasks[task]
	if w == nil || !w.open {
		return true, 0
	}
	w.forget(now)
	if len(w.made) < w.allowed {
		return true, 0
	}
	return false, w.made[0].Add(w.cfg.Window).Sub(now)
}

// forget drops from made the dispatches that left the window ending at now.
func (w *window) forget(now time.Time) {
	i := 0
	for i < len(w.made) && !w.made[i].After(now.Add(-w.cfg.Window)) {
		i++
	}
	w.made = w.made[i:]
}

// Opened returns the breakers open at now, in task order, as the changes
// that opened them (Kept set, the counts those of the window at now): what
// a process that leads again says of the breakers it kept.
func (b *Breaker) Opened(now time.Time) []Change {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Change
	for task, w := range b.tasks {
		if !w.open {
			continue
		}
		failures, total := b.count(w, now)
		rate := 0.0
		if total > 0 {
			rate = float64(failures) / float64(total)
		}
		out = append(out, Change{Task: task, Open: true, Kept: true, Failures: failures, Total: total, Rate: rate, Threshold: w.cfg.Threshold,
			Was: w.was, Allowed: w.allowed, Window: w.cfg.Window})
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Task, b.Task) })
	return out
}

// Cut is the cut of an open breaker: the dispatches allowed per window,
// those made in the window before it opened, those made in the window
// ending now and, when none is left, when the next is.
type Cut struct {
	Allowed, Was, Made int
	Window             time.Duration
	Next               time.Time
}

// CutOf returns the cut of task's breaker at now; ok is false while it is
// closed.
func (b *Breaker) CutOf(task string, now time.Time) (c Cut, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.tasks[task]
	if w == nil || !w.open {
		return Cut{}, false
	}
	w.forget(now)
	c = Cut{Allowed: w.allowed, Was: w.was, Made: len(w.made), Window: w.cfg.Window}
	if len(w.made) >= w.allowed {
		c.Next = w.made[0].Add(w.cfg.Window)
	}
	return c, true
}

// String says the cut in words: "1 dispatch(es) allowed per 5m0s, was 10".
func (c Cut) String() string {
	return fmt.Sprintf("%d dispatch(es) allowed per %s, was %d", c.Allowed, c.Window, c.Was)
}

// count sums the buckets of w inside the window ending at now; when they
// hold fewer than the minimum, it counts the last minimum outcomes instead.
func (b *Breaker) count(w *window, now time.Time) (failures, total int) {
	oldest := now.Add(-w.cfg.Window).Unix()
	for i, s := range w.start {
		if s > oldest && s <= now.Unix() {
			failures += int(w.bad[i])
			total += int(w.ok[i] + w.bad[i])
		}
	}
	if total < w.cfg.MinSamples && w.seen == len(w.last) {
		failures = 0
		for _, bad := range w.last {
			if bad {
				failures++
			}
		}
		return failures, len(w.last)
	}
	return failures, total
}

// Factor returns the multiplier of task's dispatch rate: the configured
// fraction while its breaker is open, else 1.
func (b *Breaker) Factor(task string) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := b.tasks[task]; w != nil && w.open {
		return w.cfg.Factor
	}
	return 1
}

// State reports whether task's breaker is open, since when, and its failure
// ratio and outcome count in the window at now.
func (b *Breaker) State(task string, now time.Time) (open bool, since time.Time, rate float64, total int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.tasks[task]
	if w == nil {
		return false, time.Time{}, 0, 0
	}
	failures, total := b.count(w, now)
	if total > 0 {
		rate = float64(failures) / float64(total)
	}
	return w.open, w.since, rate, total
}
