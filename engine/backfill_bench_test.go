package engine

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store/storetest"
)

// runSpec runs spec to the end on a standalone engine (as ax run and
// ax backfill --standalone do) and returns the wall time.
func runSpec(b *testing.B, g *dag.Graph, execs Executors, spec BackfillSpec) time.Duration {
	b.Helper()
	st := storetest.SQLite(b)
	ctx := context.Background()
	id, err := CreateBackfill(ctx, st, g, spec, "bench", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	eng, err := New(Config{NoSchedules: true, FailIfHeld: true, Holder: "bench"}, st, g, execs)
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- eng.Run(runCtx) }()
	for {
		bs, err := st.Backfills(ctx, id)
		if err == nil && len(bs) == 1 && (bs[0].State == BackfillDone || bs[0].State == BackfillFailed) {
			if bs[0].FailedRuns > 0 {
				b.Fatalf("backfill failed: %s", bs[0].Error)
			}
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return took
}

func commandGraph(b *testing.B, n int, chain bool) *dag.Graph {
	b.Helper()
	var s strings.Builder
	s.WriteString("pipeline: cmds\ntimezone: UTC\nschedule: \"@daily\"\ndefaults: {command: [\"true\"]}\ntasks:\n  - {name: t0}\n")
	for i := 1; i < n; i++ {
		up := 0
		if chain {
			up = i - 1
		}
		fmt.Fprintf(&s, "  - {name: t%d, depends_on: [t%d]}\n", i, up)
	}
	p, errs := defs.Parse("cmds.yaml", []byte(s.String()), defs.Options{})
	if errs.Err() != nil {
		b.Fatal(errs)
	}
	g, errs := dag.Compile([]*defs.Pipeline{p}, dag.Options{DispatchRate: -1})
	if errs.Err() != nil {
		b.Fatal(errs)
	}
	return g
}

// BenchmarkRunCommands: ax run's engine on 1,000 `command: ["true"]` tasks,
// as a chain and as a fan-out, against 1,000 sequential fork/execs of
// `true` from Go in the same run (the floor).
func BenchmarkRunCommands(b *testing.B) {
	const n = 1000
	for _, shape := range []string{"chain", "fanout"} {
		b.Run(shape, func(b *testing.B) {
			g := commandGraph(b, n, shape == "chain")
			cmds := runner.NewCommands(func(a runner.Attempt) (runner.CommandSpec, error) {
				return runner.CommandSpec{Argv: []string{"true"}}, nil
			})
			var names []string
			for _, t := range g.Order() {
				names = append(names, t.Name)
			}
			var ax, floor time.Duration
			for b.Loop() {
				at := time.Now().Truncate(time.Second)
				ax += runSpec(b, g, Executors{defs.ExecCommand: cmds}, BackfillSpec{Pipeline: "cmds", Tasks: names, Times: []time.Time{at}, MaxActiveRuns: 1, Rerun: RerunAll})
				start := time.Now()
				for range n {
					if err := exec.Command("true").Run(); err != nil {
						b.Fatal(err)
					}
				}
				floor += time.Since(start)
			}
			b.ReportMetric(ax.Seconds()/float64(b.N), "ax-s")
			b.ReportMetric(floor.Seconds()/float64(b.N), "floor-s")
			b.ReportMetric(ax.Seconds()/floor.Seconds(), "x-floor")
		})
	}
}

// BenchmarkBackfillYear: 365 days × a 20-task pipeline of no-op functions,
// standalone on SQLite (8 runs in flight), against the engine's plain
// throughput on 1,000 no-op instances measured in the same run.
func BenchmarkBackfillYear(b *testing.B) {
	var s strings.Builder
	s.WriteString("pipeline: year\ntimezone: UTC\nschedule: \"0 2 * * *\"\ndefaults: {function: record}\ntasks:\n")
	for i := range 20 {
		if i < 4 {
			fmt.Fprintf(&s, "  - {name: t%02d}\n", i)
		} else {
			fmt.Fprintf(&s, "  - {name: t%02d, depends_on: [t%02d, t%02d]}\n", i, i-4, i-3)
		}
	}
	p, errs := defs.Parse("year.yaml", []byte(s.String()), defs.Options{})
	if errs.Err() != nil {
		b.Fatal(errs)
	}
	g, errs := dag.Compile([]*defs.Pipeline{p}, dag.Options{DispatchRate: -1})
	if errs.Err() != nil {
		b.Fatal(errs)
	}
	funcs := runner.NewFunctions(func(runner.Attempt) string { return "record" })
	_ = funcs.Register("record", func(context.Context, runner.Attempt) error { return nil })
	from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	spec, err := PlanBackfill(g, BackfillParams{Pipeline: "year", From: from, To: from.AddDate(1, 0, 0).Add(-time.Second), MaxActiveRuns: 8})
	if err != nil {
		b.Fatal(err)
	}
	var took time.Duration
	for b.Loop() {
		took += runSpec(b, g, Executors{defs.ExecFunction: funcs}, spec)
	}
	inst := float64(len(spec.Times)*len(spec.Tasks)) / (took.Seconds() / float64(b.N))
	st := storetest.SQLite(b)
	plain := benchGraph(b, 1000)
	base := runOnce(b, st, plain, &latencies{}, time.Now().Add(-time.Second))
	baseRate := 1000 / base.Seconds()
	b.ReportMetric(took.Seconds()/float64(b.N), "total-s")
	b.ReportMetric(inst, "inst/s")
	b.ReportMetric(baseRate, "plain-inst/s")
	b.ReportMetric(inst/baseRate, "ratio")
	_ = axtype.RunBackfill
}
