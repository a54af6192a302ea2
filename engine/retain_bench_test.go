package engine

import (
	"context"
	"fmt"
	"slices"
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
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
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
	pruned.Runs = int64(testutil.ToFloat64(eng.rm.runs))
	pruned.History = int64(testutil.ToFloat64(eng.rm.rows.WithLabelValues("history")))
	lat.mu.Lock()
	defer lat.mu.Unlock()
	return slices.Clone(lat.d), pruned
}

// BenchmarkDispatchWhilePruning: 100 tasks fire every second while the
// primary's retention deletes a million history rows (100,000 finished
// instances of 10,000 runs from 60 days ago); the fire → start p99 against
// the same engine and schedule with nothing to prune. Pruning goes in
// batches of 50 runs with a pause after each, so dispatch gets the write
// lock in between.
func BenchmarkDispatchWhilePruning(b *testing.B) {
	const tasks, seconds = 100, 25
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
			var with, without []time.Duration
			var pruned store.PruneResult
			for b.Loop() {
				plain := open(b)
				// A short window: top-ups create 5 s of runs at a time, as
				// in a steady state, rather than 5 min of per-second fires.
				without, _ = firing(b, plain, g, Config{Window: 10 * time.Second, TopUp: 5 * time.Second}, seconds*time.Second)
				st := open(b)
				oldHistory(b, st, 10_000, 10, 10)
				with, pruned = firing(b, st, g, Config{Window: 10 * time.Second, TopUp: 5 * time.Second, Retain: 30 * 24 * time.Hour, RetainEvery: time.Second}, seconds*time.Second)
			}
			if pruned.History < 1_000_000 {
				b.Logf("retention pruned %d history rows of 1,000,000 within %d s", pruned.History, seconds)
			}
			pct := func(d []time.Duration, p float64) time.Duration {
				slices.Sort(d)
				return d[min(len(d)-1, int(p*float64(len(d))))]
			}
			b.ReportMetric(float64(pct(with, 0.99).Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(pct(without, 0.99).Microseconds())/1000, "plain-p99-ms")
			b.ReportMetric(float64(pct(with, 0.99))/float64(max(pct(without, 0.99), time.Millisecond)), "x-plain")
			b.ReportMetric(float64(pruned.History), "history-pruned")
		})
	}
}
