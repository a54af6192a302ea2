package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// TestEverySecondSchedulesAtScale is make bench's pair of rows for many
// second-level schedules: 1,000 and 5,000 function tasks, each on
// `* * * * * *`, on SQLite in real time for AX_BENCH_SECONDS (default 20)
// each. It prints, per size, when the first attempt started after the
// engine did, the fire → start p99, the runs in the store at the end (the
// runs created ahead are bounded by AheadTotal), the heap after a GC while
// the engine runs, and the fires run twice or not by the end (both must be
// 0; a fire counts as not run only when it was due more than 2 s before
// the end).
//
// It is a test, not a benchmark, because it runs for a wall-clock time;
// it runs under AX_BENCH=1 (make bench sets it) and prints benchmark lines.
func TestEverySecondSchedulesAtScale(t *testing.T) {
	if os.Getenv("AX_BENCH") == "" {
		t.Skip("a measurement for make bench: set AX_BENCH=1 to run it")
	}
	secs := 20
	if v := os.Getenv("AX_BENCH_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 5 {
			t.Fatalf("AX_BENCH_SECONDS=%q: give a whole number of seconds from 5", v)
		}
		secs = n
	}
	for _, n := range []int{1000, 5000} {
		fmt.Println(everySecondAtScale(t, n, time.Duration(secs)*time.Second))
	}
}

// everySecondAtScale runs n every-second function tasks for d and returns
// the benchmark line.
func everySecondAtScale(t *testing.T, n int, d time.Duration) string {
	t.Helper()
	p, errs := defs.Parse("big.yaml", []byte(manySeconds(n)), defs.Options{Now: time.Now()})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	g, errs := dag.Compile([]*defs.Pipeline{p}, dag.Options{Now: time.Now(), DispatchRate: -1})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "ax.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	type fire struct {
		task    string
		logical time.Time
	}
	var mu sync.Mutex
	started := map[fire]int{}
	var lat []time.Duration
	var first time.Time
	funcs := runner.NewFunctions(func(runner.Attempt) string { return "record" })
	if err := funcs.Register("record", func(_ context.Context, a runner.Attempt) error {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() {
			first = now
		}
		started[fire{a.Task, a.LogicalTime.UTC()}]++
		lat = append(lat, now.Sub(a.LogicalTime))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	eng, err := New(Config{Holder: "bench", MaxRunning: -1}, st, g, Executors{defs.ExecFunction: funcs})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- eng.Run(ctx) }()
	time.Sleep(d)
	heap := heapNow() // while it runs: the runs ahead are held
	cancel()
	if err := <-done; err != nil {
		t.Errorf("engine: %v", err)
	}
	runs, err := st.Runs(context.Background(), "big", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	dups, missed := 0, 0
	for _, k := range started {
		if k > 1 {
			dups++
		}
	}
	for s := began.Truncate(time.Second).Add(time.Second); s.Before(began.Add(d - 2*time.Second)); s = s.Add(time.Second) {
		for i := range n {
			if started[fire{fmt.Sprintf("t%04d", i), s.UTC()}] == 0 {
				missed++
			}
		}
	}
	slices.Sort(lat)
	p99 := time.Duration(0)
	if len(lat) > 0 {
		p99 = lat[len(lat)*99/100]
	}
	firstMS := -1.0
	if !first.IsZero() {
		firstMS = float64(first.Sub(began).Microseconds()) / 1000
	}
	if dups > 0 || missed > 0 {
		t.Errorf("%d tasks: %d fires ran twice and %d fires due 2 s before the end had not run", n, dups, missed)
	}
	return fmt.Sprintf("BenchmarkEverySecond/tasks_%d\t1\t%.1f first-ms\t%.1f p99-ms\t%d runs\t%.1f heap-MB\t%d starts\t%d dups\t%d missed",
		n, firstMS, float64(p99.Microseconds())/1000, len(runs), float64(heap)/(1<<20), len(lat), dups, missed)
}
