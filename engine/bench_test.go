package engine

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/wheel"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// benchGraph compiles one pipeline of n independent no-op function tasks.
func benchGraph(b *testing.B, n int) *dag.Graph {
	b.Helper()
	p, errs := defs.Parse("bench.yaml", []byte(priorities(n, "@yearly")), defs.Options{})
	if errs.Err() != nil {
		b.Fatal(errs)
	}
	g, errs := dag.Compile([]*defs.Pipeline{p}, dag.Options{DispatchRate: -1})
	if errs.Err() != nil {
		b.Fatal(errs)
	}
	return g
}

// latencies is a function executor that records, per call, how long after
// its logical (fire) time it started.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) record(_ context.Context, a runner.Attempt) error {
	d := time.Since(a.LogicalTime)
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
	return nil
}

// runOnce creates one run of every task of g due at `at` directly in the
// store, runs an engine until all of them succeeded and returns how long
// that took from the engine's start.
func runOnce(b *testing.B, st *store.Store, g *dag.Graph, lat *latencies, at time.Time) time.Duration {
	b.Helper()
	return runOnceWith(b, st, g, lat.record, at)
}

// runOnceWith is runOnce with fn as every task's function.
func runOnceWith(b *testing.B, st *store.Store, g *dag.Graph, fn runner.Func, at time.Time) time.Duration {
	b.Helper()
	var news []store.NewInstance
	for _, t := range g.Order() {
		news = append(news, store.NewInstance{TaskID: t.ID(), Group: t.Group, Priority: t.Priority, State: axtype.Scheduled, NextFireAt: at})
	}
	ctx := context.Background()
	if _, _, err := st.CreateRun(ctx, store.CreateRunParams{Pipeline: "burst", Trigger: "bench", Kind: axtype.RunManual,
		LogicalTime: at, Instances: news, Now: time.Now()}); err != nil {
		b.Fatal(err)
	}
	funcs := runner.NewFunctions(func(runner.Attempt) string { return "record" })
	_ = funcs.Register("record", fn)
	eng, err := New(Config{Holder: "bench", MaxRunning: -1}, st, g, Executors{defs.ExecFunction: funcs})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- eng.Run(runCtx) }()
	for eng.Stats().Applied < int64(len(news)) {
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return took
}

// rawRate measures single raw CAS transitions with history on st, the
// baseline of the store benchmarks, for n transitions.
func rawRate(b *testing.B, st *store.Store, n int) float64 {
	b.Helper()
	ctx := context.Background()
	_, ins, err := st.CreateRun(ctx, store.CreateRunParams{Pipeline: "raw", Trigger: "raw", Kind: axtype.RunManual,
		LogicalTime: time.Now(), Instances: []store.NewInstance{{TaskID: "raw.t", State: axtype.Scheduled, NextFireAt: time.Now()}}, Now: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	id, v := ins[0].ID, ins[0].Version
	states := []axtype.State{axtype.Scheduled, axtype.Running, axtype.Success}
	start := time.Now()
	for i := range n {
		from, to := states[i%3], states[(i+1)%3]
		tx, err := st.DB().BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, st.Bind("UPDATE instances SET state = ?, version = version + 1, updated_at = ? WHERE id = ? AND version = ?"), string(to), time.Now().UnixMilli(), id, v); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, st.Bind("INSERT INTO history (instance_id, run_id, task_id, ticket, from_state, to_state, reason, actor, epoch, at) VALUES (?, 0, 'raw.t', NULL, ?, ?, '', '', 0, ?)"), id, string(from), string(to), time.Now().UnixMilli()); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		v++
	}
	return float64(n) / time.Since(start).Seconds()
}

// BenchmarkThroughput: a run of 1,000 no-op function instances, end to end
// through a real engine (dispatch and result recorded for each), against the
// store's raw single-transition rate on the same database divided by the two
// transitions an instance needs. ratio > 1 means batching beat raw SQL.
func BenchmarkThroughput(b *testing.B) {
	const n = 1000
	for name, open := range storetest.All() {
		b.Run(name, func(b *testing.B) {
			st := open(b)
			g := benchGraph(b, n)
			var took time.Duration
			runs := 0
			for b.Loop() {
				took += runOnce(b, st, g, &latencies{}, time.Now().Add(-time.Second).Add(-time.Duration(runs)*time.Hour))
				runs++
			}
			rate := float64(runs*n) / took.Seconds()
			raw := rawRate(b, st, 2*n)
			b.ReportMetric(rate, "inst/s")
			b.ReportMetric(raw, "raw-tx/s")
			b.ReportMetric(rate/(raw/2), "ratio")
		})
	}
}

// BenchmarkFireToDispatch: 10,000 instances due in the same second, no rate
// limit; latency from the fire time to the start of each attempt on its
// executor, against the one-second tick.
func BenchmarkFireToDispatch(b *testing.B) {
	const n = 10000
	st := storetest.SQLite(b)
	g := benchGraph(b, n)
	lat := &latencies{}
	runs := 0
	for b.Loop() {
		// Due a few whole seconds ahead, after the engine started and loaded
		// it into the wheel (syncing 10,000 task definitions takes a while):
		// the steady state, where a fire time comes to a running scheduler.
		at := time.Now().Truncate(time.Second).Add(4 * time.Second).Add(time.Duration(runs) * time.Hour)
		if runs > 0 {
			b.Fatal("run the latency benchmark with -benchtime 1x")
		}
		runOnce(b, st, g, lat, at)
		runs++
	}
	d := slices.Clone(lat.d)
	slices.Sort(d)
	pct := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	b.ReportMetric(float64(d[0].Milliseconds()), "min-ms")
	b.ReportMetric(float64(pct(0.5).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(pct(0.99).Milliseconds()), "p99-ms")
	b.ReportMetric(float64(d[len(d)-1].Milliseconds()), "max-ms")
	b.ReportMetric(pct(0.99).Seconds()/time.Second.Seconds(), "p99/tick")
}

// BenchmarkHeapPerInstance: bytes of heap per instance waiting in the engine
// (wheel entry and pending record) at 100,000 and 1,000,000, against a bare
// []int64 of the same length.
func BenchmarkHeapPerInstance(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			g := benchGraph(b, 1)
			funcs := runner.NewFunctions(func(runner.Attempt) string { return "record" })
			_ = funcs.Register("record", (&latencies{}).record)
			now := time.Now()
			e, err := New(Config{Now: func() time.Time { return now }}, nil, g, Executors{defs.ExecFunction: funcs})
			if err != nil {
				b.Fatal(err)
			}
			task := g.Order()[0].ID()
			e.resolver.runs.kinds[0] = axtype.RunSchedule // the instances below belong to run 0: no store to ask
			var per, bare float64
			var load time.Duration
			for b.Loop() {
				before := heap()
				start := time.Now()
				e.planner.wheel = wheel.New(now, e.cfg.Window)
				e.dispatcher.pending = make(map[int64]*pend)
				for i := range n {
					e.planner.enqueue(context.Background(), axtype.Instance{ID: int64(i + 1), TaskID: task, State: axtype.Scheduled, Version: 1,
						NextFireAt: now.Add(time.Second + time.Duration(i%290)*time.Second), LogicalTime: now})
				}
				load += time.Since(start)
				per = float64(heap()-before) / float64(n)
				before = heap()
				ids := make([]int64, 0)
				for i := range n {
					ids = append(ids, int64(i))
				}
				bare = float64(heap()-before) / float64(n)
				runtime.KeepAlive(ids)
				if e.planner.wheel.Len() != n {
					b.Fatalf("wheel holds %d of %d", e.planner.wheel.Len(), n)
				}
			}
			b.ReportMetric(per, "B/inst")
			b.ReportMetric(bare, "B/int64")
			b.ReportMetric(per/bare, "x-bare")
			b.ReportMetric(load.Seconds()*1000/float64(b.N), "load-ms")
		})
	}
}

func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
