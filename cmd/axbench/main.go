// Command axbench is `make bench`: it runs ax's Go benchmarks, each of
// which measures a figure and a baseline in the same run, and prints one
// table of figures with their baselines and ratios (and writes it as JSON).
// Rows that cannot be measured here (MySQL without AX_TEST_MYSQL_DSN,
// PostgreSQL without AX_TEST_PG_DSN) are
// listed as skipped with the reason; no figure is ever reported that was
// not measured in this run.
//
// With -base REV it compares instead: it builds the tests of REV (checked
// out into a temporary git worktree) and of the working tree, runs the
// selected rows on both alternately for -rounds rounds, and prints each
// row's median figure on both sides with the ratio new/base, flagging a row
// that costs more than -flag-over times the base (base.go).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// row is one line of the table: a benchmark and the metrics that make its
// figure, its baseline and their ratio.
type row struct {
	Name      string `json:"name"`
	Pkg       string `json:"-"`
	Bench     string `json:"-"` // -bench pattern
	Sub       string `json:"-"` // the sub-benchmark whose line holds the metrics
	BaseSub   string `json:"-"` // the line that holds the baseline, when not Sub's
	Test      bool   `json:"-"` // Bench names a test run with AX_BENCH=1 that prints benchmark lines
	Figure    string `json:"-"` // metric unit of the figure
	Baseline  string `json:"-"`
	Ratio     string `json:"-"` // metric unit of the ratio; empty: figure ÷ baseline
	Target    string `json:"target,omitempty"`
	BenchTime string `json:"-"`
	Timeout   string `json:"-"` // go test -timeout, when the default 10 m is short (a generator)
	Long      bool   `json:"-"` // minutes a run: the base mode runs it only when -rows names it
	KeptStore bool   `json:"-"` // its generated store is kept between runs: not for the base mode, whose two sides would share it

	FigureV   float64 `json:"figure"`
	FigureU   string  `json:"figure_unit"`
	BaselineV float64 `json:"baseline"`
	BaselineU string  `json:"baseline_unit"`
	RatioV    float64 `json:"ratio"`
	Skipped   string  `json:"skipped,omitempty"`
	// Missed: the test (Test rows) printed its figures and then failed on
	// its targets; the figures stand, with what it said.
	Missed string `json:"missed,omitempty"`
}

var rows = []row{
	{Name: "1 validate+compile 10,000 tasks (ms) vs YAML parse", Pkg: "./dag", Bench: "Compile/random-10000", Sub: "Compile/random-10000", Figure: "ax-ms", Baseline: "yaml-ms", Ratio: "ratio", Target: "< 100 ms", BenchTime: "3x"},
	{Name: "2 store transitions/s, single, SQLite vs raw", Pkg: "./store", Bench: "Transition$/sqlite", Sub: "Transition/sqlite", Figure: "store-tx/s", Baseline: "raw-tx/s", Ratio: "ratio", Target: ">= 0.8", BenchTime: "2s"},
	{Name: "2 store transitions/s, single, MySQL vs raw", Pkg: "./store", Bench: "Transition$/mysql", Sub: "Transition/mysql", Figure: "store-tx/s", Baseline: "raw-tx/s", Ratio: "ratio", Target: ">= 0.8", BenchTime: "2s"},
	{Name: "2 store transitions/s, single, PostgreSQL vs raw", Pkg: "./store", Bench: "Transition$/postgres", Sub: "Transition/postgres", Figure: "store-tx/s", Baseline: "raw-tx/s", Ratio: "ratio", Target: ">= 0.8", BenchTime: "2s"},
	{Name: "2 store transitions/s, 100 per batch, SQLite vs single", Pkg: "./store", Bench: "TransitionBatch/sqlite", Sub: "TransitionBatch/sqlite", Figure: "batched-tx/s", Baseline: "single-tx/s", Ratio: "speedup", BenchTime: "2s"},
	{Name: "2 store transitions/s, 100 per batch, MySQL vs single", Pkg: "./store", Bench: "TransitionBatch/mysql", Sub: "TransitionBatch/mysql", Figure: "batched-tx/s", Baseline: "single-tx/s", Ratio: "speedup", BenchTime: "2s"},
	{Name: "2 store transitions/s, 100 per batch, PostgreSQL vs single", Pkg: "./store", Bench: "TransitionBatch/postgres", Sub: "TransitionBatch/postgres", Figure: "batched-tx/s", Baseline: "single-tx/s", Ratio: "speedup", BenchTime: "2s"},
	{Name: "3 engine instances/s, 1,000 no-op, SQLite vs raw rate / 2", Pkg: "./engine", Bench: "Throughput/sqlite", Sub: "Throughput/sqlite", Figure: "inst/s", Baseline: "raw-tx/s", Ratio: "ratio", Target: ">= 10,000/s", BenchTime: "3x"},
	{Name: "3 engine instances/s, 1,000 no-op, MySQL vs raw rate / 2", Pkg: "./engine", Bench: "Throughput/mysql", Sub: "Throughput/mysql", Figure: "inst/s", Baseline: "raw-tx/s", Ratio: "ratio", Target: ">= 1,000/s", BenchTime: "3x"},
	{Name: "3 engine instances/s, 1,000 no-op, PostgreSQL vs raw rate / 2", Pkg: "./engine", Bench: "Throughput/postgres", Sub: "Throughput/postgres", Figure: "inst/s", Baseline: "raw-tx/s", Ratio: "ratio", Target: ">= 1,000/s", BenchTime: "3x"},
	{Name: "4 1,000 command tasks, chain (s) vs fork/exec floor", Pkg: "./engine", Bench: "RunCommands/chain", Sub: "RunCommands/chain", Figure: "ax-s", Baseline: "floor-s", Ratio: "x-floor", Target: "<= 2x", BenchTime: "1x"},
	{Name: "4 1,000 command tasks, fan-out (s) vs fork/exec floor", Pkg: "./engine", Bench: "RunCommands/fanout", Sub: "RunCommands/fanout", Figure: "ax-s", Baseline: "floor-s", Ratio: "x-floor", Target: "<= 2x", BenchTime: "1x"},
	{Name: "5 fire->dispatch p99 (ms), 10,000 due at once, vs the 1 s tick", Pkg: "./engine", Bench: "FireToDispatch", Sub: "FireToDispatch", Figure: "p99-ms", Baseline: "", Ratio: "p99/tick", Target: "p99 < 50 ms", BenchTime: "1x"},
	{Name: "6 heap B per waiting instance, 100,000, vs []int64", Pkg: "./engine", Bench: "HeapPerInstance/100000", Sub: "HeapPerInstance/100000", Figure: "B/inst", Baseline: "B/int64", Ratio: "x-bare", Target: "< 200 B", BenchTime: "1x"},
	{Name: "6 heap B per waiting instance, 1,000,000, vs []int64", Pkg: "./engine", Bench: "HeapPerInstance/1000000", Sub: "HeapPerInstance/1000000", Figure: "B/inst", Baseline: "B/int64", Ratio: "x-bare", Target: "< 200 B", BenchTime: "1x"},
	{Name: "6 wheel alone: B per entry at 1,000,000 (insert ~60 ns)", Pkg: "./engine/wheel", Bench: "WheelAdd/1000000", Sub: "WheelAdd/1000000", Figure: "B/entry", Baseline: "B/int64", Ratio: "x-bare", BenchTime: "1x"},
	{Name: "8 HTTP executor tasks/s, 1 executor, vs bare HTTP pings/s", Pkg: "./runner", Bench: "RoundTrip/executors-1", Sub: "RoundTrip/executors-1", Figure: "tasks/s", Baseline: "pings/s", Ratio: "x-ping", BenchTime: "2s"},
	{Name: "8 HTTP executor tasks/s, 4 executors, vs bare HTTP pings/s", Pkg: "./runner", Bench: "RoundTrip/executors-4", Sub: "RoundTrip/executors-4", Figure: "tasks/s", Baseline: "pings/s", Ratio: "x-ping", BenchTime: "2s"},
	{Name: "9 backfill 365 days x 20 tasks (inst/s) vs engine plain rate", Pkg: "./engine", Bench: "BackfillYear", Sub: "BackfillYear", Figure: "inst/s", Baseline: "plain-inst/s", Ratio: "ratio", BenchTime: "1x"},
	{Name: "10 task output: cost per attempt (ms), 1,000 x 16 KiB stored, SQLite, vs no output", Pkg: "./engine", Bench: "TaskOutput/sqlite", Sub: "TaskOutput/sqlite", Figure: "ms/attempt", Baseline: "plain-ms/attempt", Ratio: "x-plain", BenchTime: "3x"},
	{Name: "10 task output: stored MB/s, SQLite (the same run)", Pkg: "./engine", Bench: "TaskOutput/sqlite", Sub: "TaskOutput/sqlite", Figure: "MB/s", Ratio: "x-plain", BenchTime: "3x"},
	{Name: "10 task output: cost per attempt (ms), 1,000 x 16 KiB stored, MySQL, vs no output", Pkg: "./engine", Bench: "TaskOutput/mysql", Sub: "TaskOutput/mysql", Figure: "ms/attempt", Baseline: "plain-ms/attempt", Ratio: "x-plain", BenchTime: "3x"},
	{Name: "10 task output: cost per attempt (ms), 1,000 x 16 KiB stored, PostgreSQL, vs no output", Pkg: "./engine", Bench: "TaskOutput/postgres", Sub: "TaskOutput/postgres", Figure: "ms/attempt", Baseline: "plain-ms/attempt", Ratio: "x-plain", BenchTime: "3x"},
	{Name: "11 list reads at 10M history rows, 1M instances: worst p99 (ms), SQLite, vs plain indexed SELECT", Pkg: "./store", Bench: "ScaleReads/sqlite", Sub: "ScaleReads/sqlite", Figure: "p99-ms", Baseline: "select-p99-ms", Ratio: "x-select", Target: "p99 < 100 ms", BenchTime: "1x", Timeout: "90m", KeptStore: true},
	{Name: "11 list reads at 10M history rows, 1M instances: worst p99 (ms), MySQL, vs plain indexed SELECT", Pkg: "./store", Bench: "ScaleReads/mysql", Sub: "ScaleReads/mysql", Figure: "p99-ms", Baseline: "select-p99-ms", Ratio: "x-select", Target: "p99 < 100 ms", BenchTime: "1x", Timeout: "90m", KeptStore: true},
	{Name: "12 fire->start p99 (ms), 100 tasks/s, while pruning 1M history rows, SQLite, vs no pruning (median of 5 alternating rounds)", Pkg: "./engine", Bench: "DispatchWhilePruning/sqlite", Sub: "DispatchWhilePruning/sqlite", Figure: "p99-ms", Baseline: "plain-p99-ms", Ratio: "x-plain", Target: "<= 1.1 (not delayed)", BenchTime: "1x", Long: true},
	{Name: "12 the same, MySQL", Pkg: "./engine", Bench: "DispatchWhilePruning/mysql", Sub: "DispatchWhilePruning/mysql", Figure: "p99-ms", Baseline: "plain-p99-ms", Ratio: "x-plain", Target: "<= 1.1 (not delayed)", BenchTime: "1x", Long: true},
	{Name: "13 graph library vs ours, 10,000 tasks: build the graph (us)", Pkg: "./dag", Bench: graphLibBench, Sub: "GraphLibrary/tasks-10000/build", Figure: "lib-us", Baseline: "ours-us", Ratio: "x-ours", Target: "library where <= 5x and output unchanged", BenchTime: "3x"},
	{Name: "13 the same: downstream closure of the first task, as --select's task+ (us)", Pkg: "./dag", Bench: graphLibBench, Sub: "GraphLibrary/tasks-10000/reach", Figure: "lib-us", Baseline: "ours-us", Ratio: "x-ours", Target: "ours: over 5x, per request in the engine's loop", BenchTime: "3x"},
	{Name: "13 the same: DOT of the pipeline (us)", Pkg: "./dag", Bench: graphLibBench, Sub: "GraphLibrary/tasks-10000/dot", Figure: "lib-us", Baseline: "ours-us", Ratio: "x-ours", Target: "ours: the library's DOT is not ax graph's output", BenchTime: "3x"},
	{Name: "13 the same: cycle detection, SCCs vs Kahn's sort (us)", Pkg: "./dag", Bench: graphLibBench, Sub: "GraphLibrary/tasks-10000/cycles", Figure: "lib-us", Baseline: "ours-us", Ratio: "x-ours", Target: "library names the cycles Kahn's sort leaves", BenchTime: "3x"},
	{Name: "13 graph library vs ours, 1,000 tasks: topological order (us)", Pkg: "./dag", Bench: "GraphLibrary/tasks-1000$/order$", Sub: "GraphLibrary/tasks-1000/order", Figure: "lib-us", Baseline: "ours-us", Ratio: "x-ours", Target: "ours: quadratic, seconds at 10,000", BenchTime: "3x"},
	{Name: "14 100,000 tasks, a run of 70,000: worst CLI/console read (ms) vs reading every page of the pipeline", Pkg: "./api", Bench: "BigPipelineReads", Sub: "BigPipelineReads", Figure: "worst-ms", Baseline: "all-pages-ms", Target: "< 1000 ms", BenchTime: "1x", Timeout: "30m"},
	{Name: "14 the same: largest answer (MB) vs every page of the pipeline (MB)", Pkg: "./api", Bench: "BigPipelineReads", Sub: "BigPipelineReads", Figure: "worst-MB", Baseline: "all-pages-MB", Ratio: "MB-ratio", Target: "< 10 MB", BenchTime: "1x", Timeout: "30m"},
	{Name: "7 cron 100,000 tasks: heap B/task, ax vs robfig/cron", Pkg: "./engine", Bench: "TestCronSchedulingVersusPeers", Test: true,
		Sub: "CronScheduling/ax_100k", BaseSub: "CronScheduling/robfig_100k", Figure: "B/task", Baseline: "B/task", Target: "< 1 (less memory)"},
	{Name: "7 cron 100,000 tasks: CPU ms per simulated hour, ax vs robfig/cron", Pkg: "./engine", Bench: "TestCronSchedulingVersusPeers", Test: true,
		Sub: "CronScheduling/ax_100k", BaseSub: "CronScheduling/robfig_100k", Figure: "cpu-ms/h", Baseline: "cpu-ms/h"},
	{Name: "7 cron 10,000 tasks: heap B/task, ax vs gocron v2", Pkg: "./engine", Bench: "TestCronSchedulingVersusPeers", Test: true,
		Sub: "CronScheduling/ax_10k", BaseSub: "CronScheduling/gocron_10k", Figure: "B/task", Baseline: "B/task", Target: "< 1 (less memory)"},
	{Name: "7 cron 10,000 tasks: CPU ms per simulated hour, ax vs gocron v2", Pkg: "./engine", Bench: "TestCronSchedulingVersusPeers", Test: true,
		Sub: "CronScheduling/ax_10k", BaseSub: "CronScheduling/gocron_10k", Figure: "cpu-ms/h", Baseline: "cpu-ms/h"},
	{Name: "10 burst, 10,000 command tasks due in 1 s, SQLite: fire->start p99 (ms) vs fork/exec floor (ms)", Pkg: "./cmd/ax", Bench: "TestBurstOfTenThousandCommands", Test: true,
		Sub: "Burst/sqlite", Figure: "fire-start-p99-ms", Baseline: "fork-floor-ms", Ratio: "x-floor", Target: "drains at fork/exec speed; 0 duplicates, 0 failures"},
	{Name: "10 burst, SQLite: API p99 (ms) vs worst lease renewal (ms)", Pkg: "./cmd/ax", Bench: "TestBurstOfTenThousandCommands", Test: true,
		Sub: "Burst/sqlite", Figure: "api-p99-ms", Baseline: "renew-late-ms", Ratio: "leader-changes", Target: "< 100 ms, renewal < TTL/3, 0 leader changes"},
	{Name: "10 burst, 2 MariaDB servers, TTL 3 s: fire->start p99 (ms) vs fork/exec floor (ms)", Pkg: "./cmd/ax", Bench: "TestBurstOfTenThousandCommands", Test: true,
		Sub: "Burst/mysql", Figure: "fire-start-p99-ms", Baseline: "fork-floor-ms", Ratio: "x-floor", Target: "drains at fork/exec speed; 0 duplicates, 0 failures"},
	{Name: "10 burst, 2 MariaDB servers: API p99 (ms) vs worst lease renewal (ms)", Pkg: "./cmd/ax", Bench: "TestBurstOfTenThousandCommands", Test: true,
		Sub: "Burst/mysql", Figure: "api-p99-ms", Baseline: "renew-late-ms", Ratio: "leader-changes", Target: "< 100 ms, renewal < 1000 ms, 0 leader changes"},
	{Name: "15 1,000 function tasks every second, SQLite, 20 s: first start (ms) vs fire->start p99 (ms), runs in store", Pkg: "./engine", Bench: "TestEverySecondSchedulesAtScale", Test: true,
		Sub: "EverySecond/tasks_1000", Figure: "first-ms", Baseline: "p99-ms", Ratio: "runs", Target: "first < 2000 ms, p99 < 100 ms; 0 dups, 0 missed", Timeout: "30m"},
	{Name: "15 5,000 function tasks every second, SQLite, 20 s: first start (ms) vs fire->start p99 (ms), runs in store", Pkg: "./engine", Bench: "TestEverySecondSchedulesAtScale", Test: true,
		Sub: "EverySecond/tasks_5000", Figure: "first-ms", Baseline: "p99-ms", Ratio: "runs", Target: "first < 2000 ms; runs bounded; 0 dups, 0 missed", Timeout: "30m"},
}

// graphLibBench runs the graph library's comparisons at 10,000 tasks but
// its topological order, which takes seconds a call there.
const graphLibBench = "GraphLibrary/tasks-10000$/(build|reach|dot|cycles)$"

// benchLine matches a result line: name, iterations, then value-unit pairs.
var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(-\d+)?\s+\d+\s+(.*)$`)

func main() {
	out := flag.String("json", "bench.json", "write the table here as JSON too (with -base: bench-base.json unless given)")
	base := flag.String("base", "", "compare with this revision instead (\"auto\": the newest tag, else the merge base with origin/main, else with main): both run the rows alternately")
	rounds := flag.Int("rounds", 3, "with -base: the rounds of base then new; each side's figure is the median of its rounds")
	rowsRE := flag.String("rows", "", "with -base: the rows whose name matches this regexp (default: the engine's benchmarks)")
	flagOver := flag.Float64("flag-over", 1.10, "with -base: flag a row that costs more than this times the base")
	failOver := flag.Float64("fail-over", 0, "with -base: exit 1 when a row costs more than this times the base (0: never)")
	flag.Parse()
	var err error
	if *base == "" {
		err = run(os.Stdout, *out)
	} else {
		jsonSet := false
		flag.Visit(func(f *flag.Flag) { jsonSet = jsonSet || f.Name == "json" })
		if !jsonSet {
			*out = "bench-base.json"
		}
		err = runCompare(*base, *rowsRE, *out, *rounds, *flagOver, *failOver)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "axbench:", err)
		os.Exit(1)
	}
}

func runCompare(base, rowsRE, jsonPath string, rounds int, flagOver, failOver float64) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	selected, err := selectRows(rows, rowsRE)
	if err != nil {
		return err
	}
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	return compare(ctx, compareConfig{Dir: dir, Base: base, Rounds: rounds, Rows: selected,
		FlagOver: flagOver, FailOver: failOver, JSON: jsonPath, Out: os.Stdout, Log: os.Stderr})
}

// skipReason says why a row cannot be measured here, or "".
func skipReason(r row) string {
	if strings.Contains(r.Sub, "mysql") && os.Getenv("AX_TEST_MYSQL_DSN") == "" {
		return "no MySQL: set AX_TEST_MYSQL_DSN"
	}
	if strings.Contains(r.Sub, "postgres") && os.Getenv("AX_TEST_PG_DSN") == "" {
		return "no PostgreSQL: set AX_TEST_PG_DSN"
	}
	return ""
}

func run(w io.Writer, jsonPath string) error {
	fmt.Fprintf(w, "ax benchmarks, %s, each figure against a baseline measured in the same run\n", time.Now().Format(time.RFC3339))
	for i := range rows {
		r := &rows[i]
		if r.Skipped = skipReason(*r); r.Skipped != "" {
			continue
		}
		fmt.Fprintf(os.Stderr, "running %s …\n", r.Name)
		lines, missed, err := bench(r.Pkg, r.Bench, r.BenchTime, r.Timeout, r.Test)
		r.Missed = missed
		if err == nil {
			err = hasLines(lines, r.Pkg, r.Sub, r.BaseSub)
		}
		if err != nil {
			r.Skipped = err.Error()
			continue
		}
		metrics := lines[r.Sub]
		r.FigureV, r.FigureU = metrics[r.Figure], r.Figure
		r.BaselineV, r.BaselineU = metrics[r.Baseline], r.Baseline
		if r.BaseSub != "" {
			r.BaselineV = lines[r.BaseSub][r.Baseline]
		}
		switch {
		case r.Ratio != "":
			r.RatioV = metrics[r.Ratio]
		case r.BaselineV != 0:
			r.RatioV = r.FigureV / r.BaselineV
		}
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tFIGURE\tBASELINE\tRATIO\tTARGET")
	for _, r := range rows {
		if r.Skipped != "" {
			fmt.Fprintf(tw, "%s\tskipped: %s\t\t\t%s\n", r.Name, r.Skipped, r.Target)
			continue
		}
		base := "-"
		if r.BaselineU != "" {
			base = fmt.Sprintf("%.4g %s", r.BaselineV, r.BaselineU)
		}
		target := r.Target
		if r.Missed != "" {
			target = "MISSED " + target + ": " + r.Missed
		}
		fmt.Fprintf(tw, "%s\t%.4g %s\t%s\t%.3g\t%s\n", r.Name, r.FigureV, r.FigureU, base, r.RatioV, target)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(jsonPath, b, 0o644)
}

// benchCache holds each go test run's result lines (and, for a test that
// failed on its targets, what it said), so that rows read from one run
// (row 7's four lines) run it once.
var (
	benchCache  = map[string]map[string]map[string]float64{}
	missedCache = map[string]string{}
)

// targetMiss matches what a test says when a figure misses its target
// (burst_test.go: "API p99 … during the burst, want < 100ms").
var targetMiss = regexp.MustCompile(`^\s+\S+_test\.go:\d+: (.*\bwant\b.*)$`)

// bench runs one benchmark (or, with test, one test under AX_BENCH=1) and
// returns the metrics of each result line, by name without "Benchmark".
// A test that printed its lines and then failed is not an error: its
// figures stand (the burst's lines carry its duplicates, false outcomes and
// leader changes too), and missed says what it failed on.
func bench(pkg, pattern, benchtime, timeout string, test bool) (lines map[string]map[string]float64, missed string, err error) {
	key := pkg + " " + pattern + " " + benchtime
	if lines, ok := benchCache[key]; ok {
		return lines, missedCache[key], nil
	}
	args := []string{"test", "-run", "^$", "-bench", pattern, "-benchtime", benchtime, "-count", "1", pkg}
	if timeout != "" {
		args = append(args[:len(args)-1], "-timeout", timeout, pkg)
	}
	if test {
		args = []string{"test", "-run", "^" + pattern + "$", "-count", "1", "-v", pkg}
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "AX_BENCH=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	lines, missed, err = parseRun(stdout.String(), stderr.String(), runErr, test)
	if err != nil {
		return nil, "", fmt.Errorf("go test %s %s: %w", pkg, pattern, err)
	}
	benchCache[key], missedCache[key] = lines, missed
	return lines, missed, nil
}

// parseRun reads the result lines of one go test run (stdout), whose
// command ended with runErr. A benchmark run that failed is an error; so is
// a test run that failed before it printed a line. A test run that printed
// its lines and then failed keeps its figures, and missed says why it
// failed: its "want" lines (a target missed), else its last lines.
func parseRun(stdout, stderr string, runErr error, test bool) (lines map[string]map[string]float64, missed string, err error) {
	lines = map[string]map[string]float64{}
	var misses []string
	for _, l := range strings.Split(stdout, "\n") {
		if m := targetMiss.FindStringSubmatch(l); m != nil {
			misses = append(misses, m[1])
		}
		m := benchLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		metrics := map[string]float64{}
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err == nil {
				metrics[f[i+1]] = v
			}
		}
		lines[m[1]] = metrics
	}
	switch {
	case runErr != nil && (!test || len(lines) == 0):
		return nil, "", fmt.Errorf("%v: %s", runErr, lastLines(stdout+stderr))
	case runErr != nil && len(misses) > 0:
		missed = strings.Join(misses, "; ")
	case runErr != nil:
		missed = "the test failed: " + lastLines(stdout)
	case len(lines) == 0 && strings.Contains(stdout, "SKIP"):
		return nil, "", fmt.Errorf("skipped by the benchmark: %s", lastLines(stdout))
	}
	return lines, missed, nil
}

// hasLines checks that the runs gave the lines a row reads (a sub-benchmark
// name is a prefix of its line's name, which may carry a -N suffix).
func hasLines(lines map[string]map[string]float64, pkg string, subs ...string) error {
	for _, sub := range subs {
		if sub == "" {
			continue
		}
		found := false
		for name, m := range lines {
			if strings.HasPrefix(name, sub) {
				lines[sub], found = m, true
				break
			}
		}
		if !found {
			return fmt.Errorf("no result line for %s in %s", sub, pkg)
		}
	}
	return nil
}

func lastLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}
