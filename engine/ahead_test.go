package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// writeCost makes every write transaction of st take perCommit of the
// bubble's simulated time (about what one small SQLite transaction costs),
// so that inside synctest a loop that writes a window of runs before it
// dispatches is seen dispatching late, as it would be on a real store.
func writeCost(st *store.Store, perCommit time.Duration) {
	store.SetFault(st, func(string) error {
		time.Sleep(perCommit)
		return nil
	})
}

// manySeconds is one pipeline of n function tasks, each on its own
// every-second schedule: n triggers.
func manySeconds(n int) string {
	var b strings.Builder
	b.WriteString("pipeline: big\ntimezone: UTC\ntasks:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: t%04d, function: record, cron: \"* * * * * *\"}\n", i)
	}
	return b.String()
}

// countingLog counts the log records of one message.
type countingLog struct {
	mu   sync.Mutex
	msg  string
	n    int
	last slog.Record
}

func (c *countingLog) Enabled(context.Context, slog.Level) bool { return true }
func (c *countingLog) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Message == c.msg {
		c.n++
		c.last = r.Clone()
	}
	return nil
}
func (c *countingLog) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *countingLog) WithGroup(string) slog.Handler      { return c }

func (c *countingLog) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestEverySecondAtScaleDispatchesAtOnce: 1,000 function tasks, each on
// `* * * * * *`, on a store whose every write transaction takes 0.2 ms
// of simulated time (writeCost). The 5-minute window would be 300,000 runs; the runs made
// before the first attempt starts are bounded by AheadTotal plus one fire
// of each task, the first attempt starts within 2 s of the start,
// one window_bounded line says why, the runs are written in batches (a
// tenth as many commits as runs at most), and every fire of the first
// seconds runs once, none twice. AheadTotal is 3,000 rather than the default
// 20,000 to keep the test's real writes to a few seconds; the rule is the
// same. The race pass (-short) runs a fifth of it: 200 tasks, 600 ahead.
func TestEverySecondAtScaleDispatchesAtOnce(t *testing.T) {
	n, total := 1000, 3000
	if testing.Short() {
		n, total = 200, 600
	}
	const perCommit = 200 * time.Microsecond
	synctest.Test(t, func(t *testing.T) {
		var st *store.Store
		logs := &countingLog{msg: "window_bounded"}
		var mu sync.Mutex
		var firstAt time.Time
		runsAtFirst, commitsAtFirst := -1, uint64(0)
		cfg := Config{AheadTotal: total, Logger: slog.New(logs), OnEvent: func(ev Event) {
			if ev.Kind != "started" {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if runsAtFirst >= 0 {
				return
			}
			firstAt, commitsAtFirst = time.Now(), st.Commits()
			runs, err := st.Runs(context.Background(), "big", 1<<30)
			if err != nil {
				t.Errorf("count the runs: %v", err)
			}
			runsAtFirst = len(runs)
		}}
		start := time.Now()
		e := setupOn(t, cfg, nil, func(s *store.Store) { st = s; writeCost(s, perCommit) }, manySeconds(n))
		const span = 3
		sleep(span*time.Second + 500*time.Millisecond)
		e.stop()
		mu.Lock()
		defer mu.Unlock()
		if runsAtFirst < 0 {
			t.Fatal("no attempt started")
		}
		if bound := total + n; runsAtFirst > bound {
			t.Errorf("%d runs existed when the first attempt started, want at most %d (AheadTotal + one fire of each task)", runsAtFirst, bound)
		}
		t.Logf("first start %s after the start, %d runs and %d commits then", firstAt.Sub(start), runsAtFirst, commitsAtFirst)
		if want := uint64(runsAtFirst / 10); commitsAtFirst > want {
			t.Errorf("%d store commits for the %d runs made before the first start, want at most %d: runs ahead are written in batches", commitsAtFirst, runsAtFirst, want)
		}
		if late := firstAt.Sub(start); late > 2*time.Second {
			t.Errorf("the first attempt started %s after the start want within 2 s", late)
		}
		if got := logs.count(); got != 1 {
			t.Errorf("%d window_bounded lines, want 1", got)
		}
		ran := map[string]int{}
		for _, c := range e.rec.snapshot() {
			ran[fmt.Sprintf("%s@%s", c.task, c.logical.Sub(start))]++
		}
		for i := range n {
			for s := 1; s <= span-1; s++ {
				key := fmt.Sprintf("big.t%04d@%s", i, time.Duration(s)*time.Second)
				if ran[key] != 1 {
					t.Fatalf("%s ran %d times, want once", key, ran[key])
				}
			}
		}
		for key, k := range ran {
			if k > 1 {
				t.Fatalf("%s ran %d times, want at most once", key, k)
			}
		}
	})
}

// TestAheadPerScheduleKeepsEveryFire: an every-second schedule with a
// window of an hour would make 3,600 runs ahead; AheadPerSchedule 10 keeps
// at most 10 of its fires ahead (the runs in the store never exceed what
// ran, plus 10, plus the fire due now), logs one window_bounded line, and
// every fire of two minutes still runs once, on time.
func TestAheadPerScheduleKeepsEveryFire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &countingLog{msg: "window_bounded"}
		start := time.Now()
		e := setup(t, Config{Window: time.Hour, AheadPerSchedule: 10, Logger: slog.New(logs)}, nil,
			"pipeline: s\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: a, function: record}\n")
		const fires = 120
		over := ""
		for s := 1; s <= fires; s++ {
			sleep(time.Second)
			if runs := len(e.instances(store.InstanceFilter{TaskID: "s.a"})); runs > s+11 && over == "" {
				over = fmt.Sprintf("at +%ds: %d runs, want at most %d (what fired, 10 ahead and the one due)", s, runs, s+11)
			}
		}
		sleep(500 * time.Millisecond)
		e.stop()
		if over != "" {
			t.Error(over)
		}
		seen := map[time.Duration]int{}
		for _, c := range e.rec.snapshot() {
			seen[c.logical.Sub(start)]++
			if !c.at.Equal(c.logical) {
				t.Errorf("the fire at +%s started %s late", c.logical.Sub(start), c.at.Sub(c.logical))
			}
		}
		for s := time.Second; s <= fires*time.Second; s += time.Second {
			if seen[s] != 1 {
				t.Fatalf("the fire at +%s ran %d times, want once", s, seen[s])
			}
		}
		if got := logs.count(); got != 1 {
			t.Errorf("%d window_bounded lines, want 1", got)
		}
		for _, in := range e.instances(store.InstanceFilter{TaskID: "s.a", States: []axtype.State{axtype.Failed}}) {
			t.Errorf("the fire at +%s failed: %s", in.LogicalTime.Sub(start), in.Error)
		}
	})
}

// TestConfigRefusesAheadBounds: bounds of work ahead that could leave a
// fire without its run are refused, naming the fields; nothing starts.
func TestConfigRefusesAheadBounds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"one fire per schedule", Config{AheadPerSchedule: 1}},
		{"negative per schedule", Config{AheadPerSchedule: -3}},
		{"total below per schedule", Config{AheadPerSchedule: 50, AheadTotal: 10}},
	} {
		if _, err := c.cfg.withDefaults(); err == nil || !strings.Contains(err.Error(), "AheadPerSchedule") || !strings.Contains(err.Error(), "AheadTotal") {
			t.Errorf("%s: %v, want an error naming AheadPerSchedule and AheadTotal", c.name, err)
		}
		if _, err := New(c.cfg, nil, nil, nil); err == nil {
			t.Errorf("%s: New accepted the config", c.name)
		}
	}
	got, err := (Config{}).withDefaults()
	if err != nil || got.AheadPerSchedule != 300 || got.AheadTotal != DefaultAheadTotal {
		t.Errorf("defaults: AheadPerSchedule %d, AheadTotal %d, err %v; want 300, %d", got.AheadPerSchedule, got.AheadTotal, err, DefaultAheadTotal)
	}
}
