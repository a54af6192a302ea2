package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPickBase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, tag, origin, main string
		want, why               string
	}{
		{"a tag wins", "v1.2.0", "aaa", "bbb", "v1.2.0", "the newest tag, v1.2.0"},
		{"no tag: origin/main's merge base", "", "aaa", "bbb", "aaa", "the merge base with origin/main"},
		{"no remote: main's merge base", "", "", "bbb", "bbb", "the merge base with main"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rev, why, err := pickBase(tt.tag, tt.origin, tt.main)
			if err != nil || rev != tt.want || why != tt.why {
				t.Errorf("pickBase = %q, %q, %v; want %q, %q", rev, why, err, tt.want, tt.why)
			}
		})
	}
	if rev, _, err := pickBase("", "", ""); err == nil || rev != "" || !strings.Contains(err.Error(), "BASE=") {
		t.Errorf("no ref at all: %q, %v; want an error that says to give BASE=", rev, err)
	}
}

// TestGroupRows: rows read from one invocation share it, in the rows'
// order; rows that differ in pattern, benchtime or kind do not; a MySQL
// row without a DSN is in no group.
func TestGroupRows(t *testing.T) {
	t.Parallel()
	rs := []row{
		{Name: "a", Pkg: "./engine", Bench: "X", Sub: "X/one", BenchTime: "1x"},
		{Name: "b", Pkg: "./engine", Bench: "Y", Sub: "Y", BenchTime: "1x"},
		{Name: "c", Pkg: "./engine", Bench: "X", Sub: "X/two", BenchTime: "1x"},
		{Name: "d", Pkg: "./engine", Bench: "X", Sub: "X/one", BenchTime: "3x"},
		{Name: "e", Pkg: "./engine", Bench: "X", Sub: "X/one", Test: true},
		{Name: "f", Pkg: "./engine/wheel", Bench: "X", Sub: "X/one", BenchTime: "1x"},
	}
	if os.Getenv("AX_TEST_MYSQL_DSN") == "" {
		rs = append(rs, row{Name: "g", Pkg: "./engine", Bench: "X", Sub: "X/mysql", BenchTime: "1x"})
	}
	var got [][]int
	for _, g := range groupRows(rs) {
		got = append(got, g.Rows)
	}
	want := [][]int{{0, 2}, {1}, {3}, {4}, {5}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("groups %v, want %v", got, want)
	}
}

func TestBinArgs(t *testing.T) {
	t.Parallel()
	got := strings.Join(binArgs(group{Pattern: "RunCommands/chain", BenchTime: "1x"}), " ")
	if want := "-test.run ^$ -test.bench RunCommands/chain -test.benchtime 1x -test.count 1 -test.timeout 10m"; got != want {
		t.Errorf("benchmark: %q, want %q", got, want)
	}
	got = strings.Join(binArgs(group{Pattern: "TestCron", Test: true, Timeout: "90m"}), " ")
	if want := "-test.run ^TestCron$ -test.count 1 -test.v -test.timeout 90m"; got != want {
		t.Errorf("test: %q, want %q", got, want)
	}
}

// TestFigureOf reads a row's figure from parsed output, and says "no such
// figure" when the line or the metric is not there (a row the base lacks).
func TestFigureOf(t *testing.T) {
	t.Parallel()
	out := "goos: linux\nBenchmarkRunCommands/chain-2   \t1\t1.32 ax-s\t0.67 floor-s\t1.99 x-floor\nPASS\n"
	lines, _, err := parseRun(out, "", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	r := row{Pkg: "./engine", Sub: "RunCommands/chain", Figure: "ax-s"}
	if v, err := figureOf(r, lines); err != nil || v != 1.32 {
		t.Errorf("figure %v, %v; want 1.32", v, err)
	}
	r.Baseline = "floor-s"
	if v, ok := normOf(r, lines); !ok || !near(v, 1.32/0.67) {
		t.Errorf("normOf %v, %v; want 1.32/0.67", v, ok)
	}
	cron, _, err := parseRun("BenchmarkCron/ax 1 136 B/task\nBenchmarkCron/robfig 1 186 B/task\n", "", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := normOf(row{Pkg: "./engine", Sub: "Cron/ax", BaseSub: "Cron/robfig", Figure: "B/task", Baseline: "B/task"}, cron); !ok || !near(v, 136.0/186) {
		t.Errorf("normOf with BaseSub %v, %v; want 136/186", v, ok)
	}
	for _, r := range []row{
		{Pkg: "./engine", Sub: "RunCommands/chain", Figure: "ax-s"},                      // no baseline
		{Pkg: "./engine", Sub: "RunCommands/chain", Figure: "ax-s", Baseline: "other-s"}, // not measured
		{Pkg: "./engine", Sub: "Cron/ax", BaseSub: "Cron/gocron", Figure: "B/task", Baseline: "B/task"},
	} {
		in := lines
		if r.BaseSub != "" {
			in = cron
		}
		if v, ok := normOf(r, in); ok {
			t.Errorf("normOf %+v = %v, want none", r, v)
		}
	}
	for _, r := range []row{
		{Pkg: "./engine", Sub: "RunCommands/fanout", Figure: "ax-s"},
		{Pkg: "./engine", Sub: "RunCommands/chain", Figure: "p99-ms"},
	} {
		if _, err := figureOf(r, lines); !errors.Is(err, errNoFigure) {
			t.Errorf("%s %s: %v, want errNoFigure", r.Sub, r.Figure, err)
		}
	}
}

// TestSettle: the ratio is new/base of the medians; the cost is that for
// times and its inverse for rates; a row is flagged over the threshold
// only; a row the base lacks or whose base failed has no ratio.
func TestSettle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		unit           string
		base, new      []float64
		baseErr        error
		baseNorm, norm []float64 // normOf per round, when the row has a baseline
		ratio, cost    float64
		flagged        bool
		verdict        string
	}{
		{"slower time", "ax-s", []float64{1.0, 1.2, 1.1}, []float64{1.3, 1.21, 1.2}, nil, nil, nil, 1.1, 1.1, false, "within noise"},
		{"a time 20 % over", "ax-s", []float64{1.0, 0.9, 1.1}, []float64{1.2, 5, 1.1}, nil, nil, nil, 1.2, 1.2, true, "COSTS 20 % MORE (over 1.15)"},
		{"a rate down 20 %", "inst/s", []float64{1000, 1000}, []float64{800, 800}, nil, nil, nil, 0.8, 1.25, true, "COSTS 25 % MORE"},
		{"a rate up", "inst/s", []float64{1000}, []float64{2000}, nil, nil, nil, 2, 0.5, false, "50 % cheaper"},
		{"over, and over its baseline too", "ax-s", []float64{1}, []float64{1.2}, nil, []float64{2}, []float64{2.4}, 1.2, 1.2, true, "COSTS 20 % MORE (over 1.15)$"},
		{"over, not over its baseline", "ax-s", []float64{1}, []float64{1.2}, nil, []float64{2}, []float64{2}, 1.2, 1.2, true, "COSTS 20 % MORE (over 1.15); against its baseline within noise: rerun with more ROUNDS$"},
		{"cheaper, over its baseline", "ax-s", []float64{1}, []float64{0.8}, nil, []float64{1}, []float64{1.3}, 0.8, 0.8, false, "^20 % cheaper; against its baseline 30 % more: rerun with more ROUNDS$"},
		{"new row", "ax-s", nil, []float64{1}, errNoFigure, nil, nil, 0, 0, false, "new (not in the base)"},
		{"base failed", "ax-s", nil, []float64{1}, errors.New("exit status 2"), nil, nil, 0, 0, false, "base failed: exit status 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := result{Name: tt.name, Unit: tt.unit}
			for _, v := range tt.base {
				r.Base.add(v, nil)
			}
			if tt.baseErr != nil {
				r.Base.add(0, tt.baseErr)
			}
			for _, v := range tt.new {
				r.New.add(v, nil)
			}
			r.Base.Norms, r.New.Norms = tt.baseNorm, tt.norm
			r.settle(1.15)
			if !near(r.Ratio, tt.ratio) || !near(r.Cost, tt.cost) || r.Flagged != tt.flagged {
				t.Errorf("ratio %v cost %v flagged %v; want %v %v %v", r.Ratio, r.Cost, r.Flagged, tt.ratio, tt.cost, tt.flagged)
			}
			if v := r.verdict(); !verdictMatches(v, tt.verdict) {
				t.Errorf("verdict %q, want %q (^ and $: at its start, its end)", v, tt.verdict)
			}
		})
	}
}

// verdictMatches: v contains want, at its start if want begins with ^ and
// at its end if want ends with $.
func verdictMatches(v, want string) bool {
	w := strings.TrimSuffix(strings.TrimPrefix(want, "^"), "$")
	return strings.Contains(v, w) &&
		(!strings.HasPrefix(want, "^") || strings.HasPrefix(v, w)) &&
		(!strings.HasSuffix(want, "$") || strings.HasSuffix(v, w))
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestMedianAndOverFail(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := slices.Clone(tt.in)
		if got := median(tt.in); got != tt.want || !slices.Equal(in, tt.in) {
			t.Errorf("median(%v) = %v, want %v and its argument unchanged", in, got, tt.want)
		}
	}
	rs := []result{{Name: "a", Cost: 1.05}, {Name: "b", Cost: 1.2}, {Name: "c"}}
	if got := overFail(rs, 1.10); !slices.Equal(got, []string{"b (1.20)"}) {
		t.Errorf("overFail = %v", got)
	}
	if got := overFail(rs, 0); got != nil {
		t.Errorf("overFail with 0 = %v, want none", got)
	}
}

func TestSelectRows(t *testing.T) {
	t.Parallel()
	all := []row{
		{Name: "1 dag", Pkg: "./dag"},
		{Name: "4 chain", Pkg: "./engine"},
		{Name: "6 wheel", Pkg: "./engine/wheel"},
		{Name: "7 cron", Pkg: "./engine", Test: true},
		{Name: "12 pruning", Pkg: "./engine", Long: true},
		{Name: "11 reads", Pkg: "./store", KeptStore: true},
	}
	names := func(rs []row) (n []string) {
		for _, r := range rs {
			n = append(n, r.Name)
		}
		return n
	}
	if got, err := selectRows(all, ""); err != nil || !slices.Equal(names(got), []string{"4 chain", "6 wheel"}) {
		t.Errorf("default rows %v, %v", names(got), err)
	}
	if got, err := selectRows(all, "^(1|7|12) "); err != nil || !slices.Equal(names(got), []string{"1 dag", "7 cron", "12 pruning"}) {
		t.Errorf("-rows '^(1|7|12) ': %v, %v", names(got), err)
	}
	if got, err := selectRows(all, "^1"); err == nil || !strings.Contains(err.Error(), `"11 reads", whose generated store is kept`) || got != nil {
		t.Errorf("a kept store's row: %v, %v; want it refused", names(got), err)
	}
	if _, err := selectRows(all, "("); err == nil || !strings.Contains(err.Error(), "-rows") {
		t.Errorf("a bad regexp: %v", err)
	}
	if _, err := selectRows(all, "^9 "); err == nil || !strings.Contains(err.Error(), "matches no row") {
		t.Errorf("no match: %v", err)
	}
}

// fakeRepo makes a git repository holding a tiny module whose ./engine
// benchmark reports fixed figures (base), tagged v0.1, and then changes
// its working tree (new): the cost figure grows 25 % and so does its
// baseline (a loaded machine), the rate falls 20 %, and a benchmark the
// base lacks appears.
func fakeRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitT := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	write("go.mod", "module fake\n\ngo 1.26\n")
	write("engine/engine.go", "package engine\n")
	write("engine/fake_test.go", `package engine

import "testing"

func BenchmarkFake(b *testing.B) {
	for range b.N {
	}
	b.ReportMetric(100, "fake-ms")
	b.ReportMetric(50, "floor-ms")
	b.ReportMetric(50, "fake/s")
}
`)
	gitT("init", "-q", "-b", "main")
	gitT("add", ".")
	gitT("commit", "-q", "-m", "base")
	gitT("tag", "v0.1")
	write("engine/fake_test.go", `package engine

import "testing"

func BenchmarkFake(b *testing.B) {
	for range b.N {
	}
	b.ReportMetric(125, "fake-ms")
	b.ReportMetric(62.5, "floor-ms")
	b.ReportMetric(40, "fake/s")
}

func BenchmarkExtra(b *testing.B) {
	for range b.N {
	}
	b.ReportMetric(7, "extra-ms")
}
`)
	return dir
}

var fakeRows = []row{
	{Name: "fake cost", Pkg: "./engine", Bench: "Fake", Sub: "Fake", Figure: "fake-ms", Baseline: "floor-ms", BenchTime: "1x"},
	{Name: "fake rate", Pkg: "./engine", Bench: "Fake", Sub: "Fake", Figure: "fake/s", BenchTime: "1x"},
	{Name: "extra", Pkg: "./engine", Bench: "Extra", Sub: "Extra", Figure: "extra-ms", BenchTime: "1x"},
}

// TestCompare runs the base mode on the fake module: the default base is
// its tag; both sides run in alternating rounds; each row shows both
// figures and the ratio, a row the base lacks shows "new", rows over
// -fail-over fail the run, and the checkout and binaries are gone after.
func TestCompare(t *testing.T) {
	t.Parallel()
	dir := fakeRepo(t)
	tmp := t.TempDir()
	var out, log strings.Builder
	jsonPath := filepath.Join(tmp, "out.json")
	err := compare(context.Background(), compareConfig{Dir: dir, Base: autoBase, Rounds: 2, Rows: fakeRows,
		FailOver: 1.2, TempRoot: tmp, JSON: jsonPath, Out: &out, Log: &log})
	if err == nil || !strings.Contains(err.Error(), "2 row(s) cost more than 1.20×") || !strings.Contains(err.Error(), "fake cost (1.25)") || !strings.Contains(err.Error(), "fake rate (1.25)") {
		t.Errorf("compare: %v, want the two rows over 1.20", err)
	}
	text := out.String()
	for _, want := range []string{
		"(the newest tag, v0.1) against HEAD ",
		"with uncommitted changes, 2 alternating rounds",
		"fake cost  100 fake-ms (100–100)  125 fake-ms (125–125)  1.250     1.000       COSTS 25 % MORE (over 1.10); against its baseline within noise: rerun with more ROUNDS",
		"fake rate  50 fake/s (50–50)      40 fake/s (40–40)      0.800     -           COSTS 25 % MORE (over 1.10)",
		"extra      -                      7 extra-ms (7–7)       -         -           new (not in the base)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if got := strings.Count(log.String(), "base: ./engine Fake"); got != 2 {
		t.Errorf("the base ran Fake %d times, want 2 (one a round):\n%s", got, log.String())
	}
	if i, j := strings.Index(log.String(), "round 1/2, new: ./engine Fake"), strings.Index(log.String(), "round 2/2, base: ./engine Fake"); i < 0 || j < i {
		t.Errorf("rounds not alternating:\n%s", log.String())
	}
	if b, err := os.ReadFile(jsonPath); err != nil || !strings.Contains(string(b), `"values": [`) {
		t.Errorf("JSON: %v %s", err, b)
	}
	assertCleaned(t, dir, tmp, "out.json")
}

// TestCompareCancelled: a Ctrl-C (ctx cancelled) while the base runs stops
// the comparison and still removes the checkout and the binaries.
func TestCompareCancelled(t *testing.T) {
	t.Parallel()
	dir := fakeRepo(t)
	tmp := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out strings.Builder
	log := cancelOn{s: "round 1/3, base", cancel: cancel}
	err := compare(ctx, compareConfig{Dir: dir, Base: "v0.1", Rows: fakeRows, TempRoot: tmp, Out: &out, Log: &log})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("compare: %v, want context.Canceled", err)
	}
	if out.Len() != 0 {
		t.Errorf("a cancelled run printed a table:\n%s", out.String())
	}
	assertCleaned(t, dir, tmp)
}

// TestCompareBadBase: a base that is not a commit is refused with what to
// do, before anything is checked out.
func TestCompareBadBase(t *testing.T) {
	t.Parallel()
	dir := fakeRepo(t)
	tmp := t.TempDir()
	var out, log strings.Builder
	err := compare(context.Background(), compareConfig{Dir: dir, Base: "no-such-rev", Rows: fakeRows, TempRoot: tmp, Out: &out, Log: &log})
	if err == nil || !strings.Contains(err.Error(), `base "no-such-rev" is not a commit`) || !strings.Contains(err.Error(), "BASE=<rev>") {
		t.Errorf("compare: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("printed %q", out.String())
	}
	assertCleaned(t, dir, tmp)
}

// cancelOn cancels when what is written to it contains s.
type cancelOn struct {
	strings.Builder
	s      string
	cancel func()
}

func (c *cancelOn) Write(p []byte) (int, error) {
	n, err := c.Builder.Write(p)
	if strings.Contains(c.String(), c.s) {
		c.cancel()
	}
	return n, err
}

// assertCleaned checks that the repository has no worktree but its own and
// that tmp holds nothing but keep.
func assertCleaned(t *testing.T, dir, tmp string, keep ...string) {
	t.Helper()
	out, err := exec.Command("git", "-C", dir, "worktree", "list", "--porcelain").Output()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "worktree "); n != 1 {
		t.Errorf("%d worktrees left, want 1:\n%s", n, out)
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(keep, e.Name()) {
			t.Errorf("%s left in the temporary directory", e.Name())
		}
	}
}
