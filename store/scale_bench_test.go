package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// scale is the shape of the generated store of the scale benchmark: tasks ×
// runs instances, each with histPer history rows and an action.
type scale struct {
	tasks, runs, histPer int
}

// scaleOf reads AX_BENCH_HISTORY (history rows; default 10,000,000): 100
// tasks, 10 history rows per instance, so 1,000,000 instances by default.
func scaleOf(b *testing.B) scale {
	n := 10_000_000
	if v := os.Getenv("AX_BENCH_HISTORY"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 10_000 {
			b.Fatalf("AX_BENCH_HISTORY=%q: give a number of history rows from 10000", v)
		}
	}
	return scale{tasks: 100, runs: n / 10 / 100, histPer: 10}
}

// syncScaleTasks stores the definitions of sc's pipeline "big": tasks t0…
// t(N-1), the same for both generators, so that their rows match.
func syncScaleTasks(b *testing.B, s *store.Store, sc scale) {
	b.Helper()
	var defs []store.TaskDef
	for i := range sc.tasks {
		defs = append(defs, store.TaskDef{ID: fmt.Sprintf("big.t%d", i), Pipeline: "big", Name: fmt.Sprintf("t%d", i), Group: "g", Priority: 3, Hash: "h", Definition: []byte("{}")})
	}
	if _, err := s.SyncDefinitions(context.Background(), store.SyncParams{Pipelines: []store.PipelineDef{{Name: "big", Hash: "h", Definition: []byte("{}"), Tasks: defs}}, Now: storetest.T0}); err != nil {
		b.Fatal(err)
	}
}

// generate fills s with sc: runs of every task, each instance SUCCESS or
// FAILED with its history and a dispatch action, the last run's instances
// still running, written with plain multi-row INSERTs in large transactions.
func generate(b *testing.B, s *store.Store, sc scale) {
	b.Helper()
	ctx := context.Background()
	syncScaleTasks(b, s, sc)
	db := s.DB()
	t0 := storetest.T0.Add(-time.Duration(sc.runs) * time.Minute).UnixMilli()
	start := time.Now()
	var (
		runs, ins, hist, acts [][]any
		instID, histID        int64
	)
	flush := func(final bool) {
		if !final && len(hist) < 50_000 {
			return
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range []struct {
			name string
			cols string
			rows [][]any
		}{
			{"runs", "id, pipeline, trigger_name, kind, logical_time, actor, created_at", runs},
			{"instances", "id, run_id, task_id, pipeline, group_name, state, version, ticket, attempt, priority, logical_time, executor, started_at, ended_at, created_at, updated_at", ins},
			{"history", "id, instance_id, run_id, task_id, ticket, from_state, to_state, reason, actor, epoch, at", hist},
			{"actions", "at, actor, action, pipeline, task_id, instance_id, ticket, reason, detail", acts},
		} {
			if err := insertRows(ctx, tx, t.name, t.cols, t.rows); err != nil {
				tx.Rollback() //nolint:errcheck // failing anyway
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		runs, ins, hist, acts = runs[:0], ins[:0], hist[:0], acts[:0]
	}
	states := []string{"SCHEDULED", "RUNNING", "SUCCESS", "SCHEDULED", "RUNNING", "FAILED", "RETRYING", "RUNNING", "SUCCESS", "SUCCESS"}
	for r := range sc.runs {
		at := t0 + int64(r)*60_000
		runs = append(runs, []any{r + 1, "big", "big", "schedule", at, "scheduler", at})
		for t := range sc.tasks {
			instID++
			task := fmt.Sprintf("big.t%d", t)
			final, ended := "SUCCESS", any(at+1000)
			if r == sc.runs-1 {
				final, ended = "RUNNING", nil
			} else if (r+t)%17 == 0 {
				final = "FAILED"
			}
			ticket := fmt.Sprintf("%016x%016x", instID, r)
			ins = append(ins, []any{instID, r + 1, task, "big", "g", final, sc.histPer, ticket, 1, 3, at, "local:bench", at, ended, at, at + 1000})
			from := ""
			for h := range sc.histPer {
				histID++
				to := states[h%len(states)]
				if h == sc.histPer-1 {
					to = final
				}
				hist = append(hist, []any{histID, instID, r + 1, task, ticket, from, to, "generated", "scheduler", 1, at + int64(h)})
				from = to
			}
			acts = append(acts, []any{at, "scheduler", "dispatch", "big", task, instID, ticket, "dispatch attempt 1", "due"})
		}
		flush(false)
	}
	flush(true)
	// Rows written around the store: count their outcomes as an upgrade would.
	if _, err := db.ExecContext(ctx, store.FillOutcomes); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d instances and %d history rows in %s", instID, histID, time.Since(start).Round(time.Second))
}

// scaleMySQL opens the generated store on MySQL: a database ax_scale_N of
// the server of AX_TEST_MYSQL_DSN, kept between runs like the SQLite file
// (it is made again when it does not hold a whole generation).
func scaleMySQL(b *testing.B, sc scale) *store.Store {
	b.Helper()
	ctx := context.Background()
	storetest.MySQLDSN(b) // skips without AX_TEST_MYSQL_DSN
	cfg, err := mysql.ParseDSN(os.Getenv(storetest.DSNEnv))
	if err != nil {
		b.Fatal(err)
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	total := sc.tasks * sc.runs * sc.histPer
	name := fmt.Sprintf("ax_scale_%d", total)
	var n int64
	complete := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+name+".settings WHERE name = 'bench_generated'").Scan(&n) == nil && n == 1
	if !complete {
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			b.Fatal(err)
		}
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			b.Fatal(err)
		}
	}
	cfg.DBName = name
	s, err := store.Open(ctx, "mysql://"+cfg.FormatDSN(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if !complete {
		generateSeq(b, s, sc)
	}
	return s
}

// generateSeq writes what generate writes, row for row, on MariaDB: each
// table by INSERT … SELECT from a SEQUENCE table (seq_1_to_N), in ranges of
// 500,000 rows, one statement (and commit) each, so the rows never cross
// the network and no transaction grows large. Nothing is disabled: the
// unique keys and indexes are checked and maintained as they would be.
func generateSeq(b *testing.B, s *store.Store, sc scale) {
	b.Helper()
	ctx := context.Background()
	syncScaleTasks(b, s, sc)
	db := s.DB()
	start := time.Now()
	t0 := storetest.T0.Add(-time.Duration(sc.runs) * time.Minute).UnixMilli()
	T, R, H := sc.tasks, sc.runs, sc.histPer
	// For an instance id i (from 1): its run r = (i-1) DIV T (from 0), its
	// task t = (i-1) MOD T; the same formulas as generate's loops.
	inst := func(i string) (r, t, at, task, final, ended, ticket string) {
		r = fmt.Sprintf("((%s - 1) DIV %d)", i, T)
		t = fmt.Sprintf("((%s - 1) MOD %d)", i, T)
		at = fmt.Sprintf("(%d + %s * 60000)", t0, r)
		task = "CONCAT('big.t', " + t + ")"
		final = fmt.Sprintf("CASE WHEN %s = %d THEN 'RUNNING' WHEN (%s + %s) MOD 17 = 0 THEN 'FAILED' ELSE 'SUCCESS' END", r, R-1, r, t)
		ended = fmt.Sprintf("CASE WHEN %s = %d THEN NULL ELSE %s + 1000 END", r, R-1, at)
		ticket = fmt.Sprintf("CONCAT(LPAD(LOWER(HEX(%s)), 16, '0'), LPAD(LOWER(HEX(%s)), 16, '0'))", i, r)
		return
	}
	states := "'SCHEDULED', 'RUNNING', 'SUCCESS', 'SCHEDULED', 'RUNNING', 'FAILED', 'RETRYING', 'RUNNING', 'SUCCESS', 'SUCCESS'"
	r, _, at, task, final, ended, ticket := inst("seq")
	// History row seq: instance (seq-1) DIV H + 1, step h = (seq-1) MOD H.
	hi := fmt.Sprintf("((seq - 1) DIV %d + 1)", H)
	h := fmt.Sprintf("((seq - 1) MOD %d)", H)
	hr, _, hat, htask, hfinal, _, hticket := inst(hi)
	tables := []struct {
		name, cols, sel string
		rows            int
	}{
		{"runs", "id, pipeline, trigger_name, kind, logical_time, actor, created_at",
			fmt.Sprintf("seq, 'big', 'big', 'schedule', %d + (seq - 1) * 60000, 'scheduler', %d + (seq - 1) * 60000", t0, t0), R},
		{"instances", "id, run_id, task_id, pipeline, group_name, state, version, ticket, attempt, priority, logical_time, executor, started_at, ended_at, created_at, updated_at",
			fmt.Sprintf("seq, %s + 1, %s, 'big', 'g', %s, %d, %s, 1, 3, %s, 'local:bench', %s, %s, %s, %s + 1000", r, task, final, H, ticket, at, at, ended, at, at), R * T},
		{"history", "id, instance_id, run_id, task_id, ticket, from_state, to_state, reason, actor, epoch, at",
			fmt.Sprintf("seq, %s, %s + 1, %s, %s, CASE WHEN %s = 0 THEN '' ELSE ELT((%s - 1) MOD 10 + 1, %s) END, CASE WHEN %s = %d THEN %s ELSE ELT(%s MOD 10 + 1, %s) END, 'generated', 'scheduler', 1, %s + %s",
				hi, hr, htask, hticket, h, h, states, h, H-1, hfinal, h, states, hat, h), R * T * H},
		{"actions", "at, actor, action, pipeline, task_id, instance_id, ticket, reason, detail",
			fmt.Sprintf("%s, 'scheduler', 'dispatch', 'big', %s, seq, %s, 'dispatch attempt 1', 'due'", at, task, ticket), R * T},
	}
	const chunk = 500_000
	for _, tb := range tables {
		for lo := 1; lo <= tb.rows; lo += chunk {
			hi := min(lo+chunk-1, tb.rows)
			q := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM seq_%d_to_%d ORDER BY seq", tb.name, tb.cols, tb.sel, lo, hi)
			if _, err := db.ExecContext(ctx, q); err != nil {
				b.Fatalf("generate %s rows %d to %d: %v", tb.name, lo, hi, err)
			}
		}
	}
	if _, err := db.ExecContext(ctx, store.FillOutcomes); err != nil { // rows written around the store: count them as an upgrade would
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO settings (name, value, updated_at) VALUES ('bench_generated', ?, ?)", strconv.Itoa(R*T*H), time.Now().UnixMilli()); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d instances and %d history rows on MariaDB in %s", R*T, R*T*H, time.Since(start).Round(time.Second))
}

// insertRows inserts rows with multi-row INSERTs of 500.
func insertRows(ctx context.Context, tx *sql.Tx, table, cols string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	n := strings.Count(cols, ",") + 1
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
	for start := 0; start < len(rows); start += 500 {
		chunk := rows[start:min(start+500, len(rows))]
		args := make([]any, 0, len(chunk)*n)
		for _, r := range chunk {
			args = append(args, r...)
		}
		q := "INSERT INTO " + table + " (" + cols + ") VALUES " + strings.TrimSuffix(strings.Repeat(one+", ", len(chunk)), ", ")
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("generate %s: %w", table, err)
		}
	}
	return nil
}

// scaleStore opens the generated store: a SQLite file kept under
// $AX_BENCH_DIR (default the temporary directory) between runs, since
// generating it takes a while, or a new MySQL database.
func scaleStore(b *testing.B, kind string, sc scale) *store.Store {
	b.Helper()
	if kind == "mysql" {
		return scaleMySQL(b, sc)
	}
	dir := os.Getenv("AX_BENCH_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("ax-scale-%d.db", sc.tasks*sc.runs*sc.histPer)) // migrated at open when the schema moved on
	_, statErr := os.Stat(path)
	s, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if statErr != nil {
		generate(b, s, sc)
	}
	return s
}

// p99 returns the 99th percentile of ds.
func p99(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*99/100)]
}

// BenchmarkScaleReads times the reads behind the list endpoints, ax status
// and ax history, and the console's pages, on a store of 10 million history
// rows and 1 million instances: the figure is the worst p99 of them,
// the baseline the p99 of a plain indexed SELECT of a task's newest history
// rows on the same database.
func BenchmarkScaleReads(b *testing.B) {
	for _, kind := range []string{"sqlite", "mysql"} {
		b.Run(kind, func(b *testing.B) {
			sc := scaleOf(b)
			s := scaleStore(b, kind, sc)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(1, 2))
			task := func() string { return fmt.Sprintf("big.t%d", rng.IntN(sc.tasks)) }
			inst := func() int64 { return 1 + rng.Int64N(int64(sc.tasks*sc.runs)) }
			reads := []struct {
				name string
				fn   func() error
			}{
				{"instances of a task, newest 100", func() error {
					_, err := s.Instances(ctx, store.InstanceFilter{TaskID: task(), Limit: 100})
					return err
				}},
				{"instances of a task, a page further back", func() error {
					_, err := s.Instances(ctx, store.InstanceFilter{TaskID: task(), BeforeID: inst(), Limit: 100})
					return err
				}},
				{"running instances", func() error {
					_, err := s.Instances(ctx, store.InstanceFilter{States: []axtype.State{axtype.Running}, Limit: 100})
					return err
				}},
				{"instances of a run", func() error {
					_, err := s.Instances(ctx, store.InstanceFilter{RunID: 1 + rng.Int64N(int64(sc.runs)), Limit: 1000})
					return err
				}},
				{"history of a task, newest 100", func() error {
					_, err := s.History(ctx, store.LogFilter{TaskID: task(), Newest: true, Limit: 100})
					return err
				}},
				{"history of an instance", func() error {
					_, err := s.History(ctx, store.LogFilter{InstanceID: inst(), Limit: 100})
					return err
				}},
				{"actions of a task, newest 100", func() error {
					_, err := s.Actions(ctx, store.LogFilter{TaskID: task(), Newest: true, Limit: 100})
					return err
				}},
				{"runs of the pipeline, newest 100", func() error {
					_, err := s.Runs(ctx, "big", 100)
					return err
				}},
				{"runs of the pipeline in an old hour", func() error {
					to := storetest.T0.Add(-time.Duration(rng.IntN(sc.runs)) * time.Minute)
					_, err := s.RunsPage(ctx, store.RunFilter{Pipeline: "big", From: to.Add(-time.Hour), To: to, Limit: 100})
					return err
				}},
				{"runs of the pipeline, a page further back", func() error {
					_, err := s.RunsPage(ctx, store.RunFilter{Pipeline: "big", Before: 1 + rng.Int64N(int64(sc.runs)), Limit: 100})
					return err
				}},
				{"ax status: 5 recent runs with their instances", func() error {
					// What the runs endpoint's recent=true and ax status read.
					now := storetest.T0
					ahead, err := s.RunsMovedAhead(ctx, "big", now)
					if err != nil {
						return err
					}
					past, err := s.RunsPage(ctx, store.RunFilter{Pipeline: "big", To: now, Limit: 5})
					if err != nil {
						return err
					}
					var ids []int64
					for _, r := range append(ahead, past...)[:5] {
						ids = append(ids, r.ID)
					}
					_, err = s.InstancesOfRuns(ctx, ids)
					return err
				}},
				{"pipeline page: latest instance and next fire of its 100 tasks", func() error {
					ids := make([]string, sc.tasks)
					for i := range ids {
						ids[i] = fmt.Sprintf("big.t%d", i)
					}
					if _, err := s.LatestInstances(ctx, ids); err != nil {
						return err
					}
					_, err := s.NextFires(ctx, ids)
					return err
				}},
				{"task summary", func() error {
					_, err := s.TaskSummary(ctx, task())
					return err
				}},
			}
			plain := func() error {
				rows, err := s.DB().QueryContext(ctx, "SELECT id, to_state FROM history WHERE task_id = ? ORDER BY id DESC LIMIT 100", task())
				if err != nil {
					return err
				}
				defer rows.Close()
				var (
					id int64
					to string
				)
				for rows.Next() {
					if err := rows.Scan(&id, &to); err != nil {
						return err
					}
				}
				return rows.Err()
			}
			const n = 200
			var worst time.Duration
			var worstName string
			var base time.Duration
			for b.Loop() {
				worst, base = 0, 0
				for _, r := range reads {
					ds := make([]time.Duration, n)
					for i := range ds {
						t := time.Now()
						if err := r.fn(); err != nil {
							b.Fatalf("%s: %v", r.name, err)
						}
						ds[i] = time.Since(t)
					}
					if p := p99(ds); p > worst {
						worst, worstName = p, r.name
					}
					b.Logf("%-45s p99 %s", r.name, p99(ds))
				}
				ds := make([]time.Duration, n)
				for i := range ds {
					t := time.Now()
					if err := plain(); err != nil {
						b.Fatal(err)
					}
					ds[i] = time.Since(t)
				}
				base = p99(ds)
			}
			b.Logf("worst: %s (%s); plain indexed SELECT p99 %s", worstName, worst, base)
			b.ReportMetric(float64(worst.Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(base.Microseconds())/1000, "select-p99-ms")
			b.ReportMetric(float64(worst)/float64(max(base, time.Microsecond)), "x-select")
		})
	}
}
