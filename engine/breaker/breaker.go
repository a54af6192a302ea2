// Package breaker is the per-task circuit breaker (R17): when more than a
// threshold (50 %) of a task's outcomes in a sliding window (five minutes)
// are failures, with at least a minimum number of outcomes, the breaker
// opens and the task's dispatch rate drops to a fraction (one tenth); it
// closes when the failure rate falls back. Record reports each change so
// that the engine can log it and raise the alert.
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
	"sync"
	"time"
)

// Config tunes the breaker; zero fields mean the defaults.
type Config struct {
	Window     time.Duration // sliding window; default 5 m
	Threshold  float64       // failure ratio above which it opens; default 0.5
	MinSamples int           // outcomes in the window before it may open; default 10
	Factor     float64       // dispatch-rate multiplier while open; default 0.1
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
	w := b.tasks[task]
	if w == nil {
		cfg, ok := b.own[task]
		if !ok {
			cfg = b.cfg
		}
		n := max(int(cfg.Window/bucketWidth), 1)
		w = &window{cfg: cfg, start: make([]int64, n), ok: make([]int32, n), bad: make([]int32, n), last: make([]bool, cfg.MinSamples)}
		b.tasks[task] = w
	}
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
		return ch, true
	case w.open && rate <= w.cfg.Threshold:
		w.open = false
		return ch, true
	}
	return Change{}, false
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
