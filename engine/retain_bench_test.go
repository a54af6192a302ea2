package engine

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// oldHistory writes runs of finished instances that ended 60 days ago,
// histPer history rows each, with plain multi-row INSERTs: what retention
// has to delete.
func oldHistory(b *testing.B, st *store.Store, runs, tasks, histPer int) {
	b.Helper()
	ctx := context.Background()
	at := time.Now().Add(-60 * 24 * time.Hour).UnixMilli()
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit a no-op
	insert := func(table, cols string, rows [][]any) {
		n := strings.Count(cols, ",") + 1
		one := "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
		for start := 0; start < len(rows); start += 500 {
			chunk := rows[start:min(start+500, len(rows))]
			var args []any
			for _, r := range chunk {
				args = append(args, r...)
			}
			q := "INSERT INTO " + table + " (" + cols + ") VALUES " + strings.TrimSuffix(strings.Repeat(one+", ", len(chunk)), ", ")
			if _, err := tx.ExecContext(ctx, st.Bind(q), args...); err != nil {
				b.Fatal(err)
			}
		}
	}
	var (
		runRows, insRows, histRows [][]any
		inst                       int64
	)
	for r := range runs {
		id := int64(1_000_000 + r)
		runRows = append(runRows, []any{id, "old", "old", "schedule", at + int64(r), "scheduler", at})
		for t := range tasks {
			inst++
			iid := 1_000_000_000 + inst
			insRows = append(insRows, []any{iid, id, fmt.Sprintf("old.t%d", t), "old", "g", "SUCCESS", histPer, 1, 3, at, at, at, at, at})
			for h := range histPer {
				histRows = append(histRows, []any{iid, id, fmt.Sprintf("old.t%d", t), "RUNNING", "SUCCESS", "old", "scheduler", 1, at + int64(h)})
			}
		}
		if len(histRows) >= 50_000 || r == runs-1 {
			insert("runs", "id, pipeline, trigger_name, kind, logical_time, actor, created_at", runRows)
			insert("instances", "id, run_id, task_id, pipeline, group_name, state, version, attempt, priority, logical_time, started_at, ended_at, created_at, updated_at", insRows)
			insert("history", "instance_id, run_id, task_id, from_state, to_state, reason, actor, epoch, at", histRows)
			runRows, insRows, histRows = runRows[:0], insRows[:0], histRows[:0]
		}
	}
	// Rows written around the store: count their outcomes as an upgrade would.
	if _, err := tx.ExecContext(ctx, "DELETE FROM task_outcomes"); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, store.FillOutcomes); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// firing runs an engine on st with tasks functions firing every second for
// d and returns each attempt's latency from its fire time to its start, and
// the rows retention deleted meanwhile.
func firing(b *testing.B, st *store.Store, g *dag.Graph, cfg Config, d time.Duration) ([]time.Duration, store.PruneResult) {
	b.Helper()
	lat := &latencies{}
	warm := time.Now().Add(3 * time.Second) // start-up (syncing, the first window) is not steady state
	funcs := runner.NewFunctions(func(runner.Attempt) string { return "record" })
	_ = funcs.Register("record", func(ctx context.Context, a runner.Attempt) error {
		if a.LogicalTime.Before(warm) {
			return nil
		}
		return lat.record(ctx, a)
	})
	cfg.Holder = "bench"
	eng, err := New(cfg, st, g, Executors{defs.ExecFunction: funcs})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	time.Sleep(d) // a benchmark of wall-clock latency: it runs for d
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	var pruned store.PruneResult
	pruned.Runs = int64(testutil.ToFloat64(eng.retention.m.runs))
	pruned.History = int64(testutil.ToFloat64(eng.retention.m.rows.WithLabelValues("history")))
	lat.mu.Lock()
	defer lat.mu.Unlock()
	return slices.Clone(lat.d), pruned
}

// BenchmarkDispatchWhilePruning: 100 tasks fire every second while the
// primary's retention deletes a million history rows (100,000 finished
// instances of 10,000 runs from 60 days ago); the fire → start p99 against
// the same engine and schedule on a store with nothing to prune. Pruning
// goes in batches of 50 runs with a pause after each, so dispatch gets the
// write lock in between.
//
// The two sides alternate in short windows (pruning store, plain store,
// then plain, pruning, …), so a swing in the machine's load falls on both
// alike; each round gives a ratio of its two p99s and the bench reports
// the median ratio over the rounds in which retention pruned something.
// AX_BENCH_PRUNE_RUNS sets the old runs to prune (100 history rows each;
// default 10,000) for a quicker check.
func BenchmarkDispatchWhilePruning(b *testing.B) {
	const tasks, rounds, window = 100, 5, 9 * time.Second
	oldRuns := 10_000
	if v := os.Getenv("AX_BENCH_PRUNE_RUNS"); v != "" {
		var err error
		if oldRuns, err = strconv.Atoi(v); err != nil || oldRuns < 1 {
			b.Fatalf("AX_BENCH_PRUNE_RUNS=%q: give a number of old runs from 1", v)
		}
	}
	for name, open := range storetest.All() {
		b.Run(name, func(b *testing.B) {
			var src strings.Builder
			fmt.Fprintf(&src, "pipeline: tick\ntimezone: UTC\nschedule: \"* * * * * *\"\ndefaults: {function: record}\ntasks:\n")
			for i := range tasks {
				fmt.Fprintf(&src, "  - {name: t%03d}\n", i)
			}
			p, errs := defs.Parse("tick.yaml", []byte(src.String()), defs.Options{})
			if errs.Err() != nil {
				b.Fatal(errs)
			}
			g, errs := dag.Compile([]*defs.Pipeline{p}, dag.Options{DispatchRate: -1})
			if errs.Err() != nil {
				b.Fatal(errs)
			}
			pct := func(d []time.Duration, p float64) time.Duration {
				slices.Sort(d)
				return d[min(len(d)-1, int(p*float64(len(d))))]
			}
			median := func(v []float64) float64 {
				slices.Sort(v)
				if len(v)%2 == 1 {
					return v[len(v)/2]
				}
				return (v[len(v)/2-1] + v[len(v)/2]) / 2
			}
			// A short engine window: top-ups create 5 s of runs at a time,
			// as in a steady state, rather than 5 min of per-second fires.
			plainCfg := Config{Window: 10 * time.Second, TopUp: 5 * time.Second}
			pruneCfg := plainCfg
			pruneCfg.Retain, pruneCfg.RetainEvery = 30*24*time.Hour, time.Second
			var (
				ratios, withP99, plainP99 []float64
				pruned                    store.PruneResult
			)
			for b.Loop() {
				ratios, withP99, plainP99, pruned = nil, nil, nil, store.PruneResult{}
				plain, st := open(b), open(b)
				oldHistory(b, st, oldRuns, 10, 10)
				for r := range rounds {
					var (
						with, without []time.Duration
						p             store.PruneResult
					)
					sides := []func(){
						func() { with, p = firing(b, st, g, pruneCfg, window) },
						func() { without, _ = firing(b, plain, g, plainCfg, window) },
					}
					if r%2 == 1 { // ABBA: neither side always goes first
						slices.Reverse(sides)
					}
					for _, side := range sides {
						side()
					}
					pruned = pruned.Add(p)
					if p.History == 0 || len(with) == 0 || len(without) == 0 {
						b.Logf("round %d: %d history rows pruned, %d and %d latencies: not counted", r+1, p.History, len(with), len(without))
						continue
					}
					w, o := pct(with, 0.99), pct(without, 0.99)
					withP99, plainP99 = append(withP99, float64(w.Microseconds())/1000), append(plainP99, float64(o.Microseconds())/1000)
					ratios = append(ratios, float64(w)/float64(max(o, time.Millisecond)))
					b.Logf("round %d: p99 %v pruning %d history rows, %v plain: x%.2f", r+1, w, p.History, o, ratios[len(ratios)-1])
				}
			}
			if len(ratios) == 0 {
				b.Fatalf("no round pruned anything: %d history rows pruned of %d", pruned.History, oldRuns*100)
			}
			if pruned.History < int64(oldRuns)*100 {
				b.Logf("retention pruned %d history rows of %d within %d rounds", pruned.History, oldRuns*100, rounds)
			}
			b.ReportMetric(median(withP99), "p99-ms")
			b.ReportMetric(median(plainP99), "plain-p99-ms")
			b.ReportMetric(median(ratios), "x-plain")
			b.ReportMetric(float64(len(ratios)), "rounds")
			b.ReportMetric(float64(pruned.History), "history-pruned")
		})
	}
}
