package main

// The base mode (`make bench BASE=<rev>`, `make bench-base`): the same rows
// measured on a base commit and on the working tree, alternately in rounds,
// each row's figure printed for both with the ratio new/base, so that a
// change that costs more than 10 % shows before it lands.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// autoBase is the -base value that asks for the default base (pickBase).
const autoBase = "auto"

// defaultRows selects the rows the base mode runs when -rows is not given:
// the engine's benchmarks, but not its tests (they run peers' schedulers
// too) nor the long rows (a store of a million rows built first).
func defaultRows(r row) bool {
	return (r.Pkg == "./engine" || strings.HasPrefix(r.Pkg, "./engine/")) && !r.Test && !r.Long
}

// compareConfig is one run of the base mode.
type compareConfig struct {
	Dir      string  // the module root of the new side: its working tree, uncommitted changes included
	Base     string  // a revision of Dir's repository; autoBase: pickBase's choice
	Rounds   int     // how many times each side runs each benchmark, alternately; zero means 3
	Rows     []row   // the rows to measure (figures are read as run does)
	FlagOver float64 // a row whose cost ratio exceeds this is flagged; zero means 1.10
	FailOver float64 // a row whose cost ratio exceeds this makes the run fail; zero: never
	TempRoot string  // where the base's checkout and the binaries go; empty: os.TempDir()
	JSON     string  // write the comparison here too; empty: nowhere
	Out, Log io.Writer
}

// pickBase chooses the default base from what the repository has: its
// newest tag reachable from HEAD (the last release), else HEAD's merge base
// with origin/main (what a branch of a clone adds), else with a local main
// (a worktree of a clone without a remote). Each argument is empty when
// the repository has no such ref. why says which was chosen.
func pickBase(tag, originMergeBase, mainMergeBase string) (rev, why string, err error) {
	switch {
	case tag != "":
		return tag, "the newest tag, " + tag, nil
	case originMergeBase != "":
		return originMergeBase, "the merge base with origin/main", nil
	case mainMergeBase != "":
		return mainMergeBase, "the merge base with main", nil
	}
	return "", "", errors.New("no default base: no tag, no origin/main and no main; give one, as in make bench BASE=HEAD~1")
}

// defaultBase asks the repository at dir for pickBase's refs.
func defaultBase(ctx context.Context, dir string) (rev, why string, err error) {
	tag, _ := git(ctx, dir, "describe", "--tags", "--abbrev=0", "HEAD")
	origin, _ := git(ctx, dir, "merge-base", "HEAD", "refs/remotes/origin/main")
	local, _ := git(ctx, dir, "merge-base", "HEAD", "refs/heads/main")
	return pickBase(tag, origin, local)
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// group is one benchmark invocation and the rows read from its lines
// (row 13's four rows come from one run).
type group struct {
	Pkg, Pattern, BenchTime, Timeout string
	Test                             bool
	Rows                             []int // indexes into the rows measured
}

// groupRows pairs rows with the invocation that measures them, in the
// rows' order; a row skipped here (skipReason) is in no group.
func groupRows(rs []row) []group {
	var gs []group
	at := map[string]int{}
	for i, r := range rs {
		if skipReason(r) != "" {
			continue
		}
		key := fmt.Sprint(r.Pkg, "\x00", r.Bench, "\x00", r.BenchTime, "\x00", r.Timeout, "\x00", r.Test)
		j, ok := at[key]
		if !ok {
			j = len(gs)
			at[key] = j
			gs = append(gs, group{Pkg: r.Pkg, Pattern: r.Bench, BenchTime: r.BenchTime, Timeout: r.Timeout, Test: r.Test})
		}
		gs[j].Rows = append(gs[j].Rows, i)
	}
	return gs
}

// binArgs are the flags of a test binary (go test -c) that run a group as
// bench does through go test, with go test's default timeout of 10 m.
func binArgs(g group) []string {
	timeout := g.Timeout
	if timeout == "" {
		timeout = "10m"
	}
	if g.Test {
		return []string{"-test.run", "^" + g.Pattern + "$", "-test.count", "1", "-test.v", "-test.timeout", timeout}
	}
	return []string{"-test.run", "^$", "-test.bench", g.Pattern, "-test.benchtime", g.BenchTime, "-test.count", "1", "-test.timeout", timeout}
}

// errNoFigure: a run gave no figure for a row: the benchmark, its line or
// its metric does not exist on that side.
var errNoFigure = errors.New("no such figure")

// figureOf reads a row's figure from one run's lines.
func figureOf(r row, lines map[string]map[string]float64) (float64, error) {
	if hasLines(lines, r.Pkg, r.Sub) != nil {
		return 0, fmt.Errorf("%w: no result line %s", errNoFigure, r.Sub)
	}
	v, ok := lines[r.Sub][r.Figure]
	if !ok {
		return 0, fmt.Errorf("%w: no %s on %s's line", errNoFigure, r.Figure, r.Sub)
	}
	return v, nil
}

// normOf is a row's figure divided by the baseline its benchmark measured
// in the same run (the fork/exec floor, the raw transaction rate), which a
// swing in the machine's load moves less than the figure; ok is false for
// a row without a measured baseline.
func normOf(r row, lines map[string]map[string]float64) (float64, bool) {
	if r.Baseline == "" {
		return 0, false
	}
	fig, err := figureOf(r, lines)
	if err != nil {
		return 0, false
	}
	sub := r.Sub
	if r.BaseSub != "" {
		if hasLines(lines, r.Pkg, r.BaseSub) != nil {
			return 0, false
		}
		sub = r.BaseSub
	}
	base, ok := lines[sub][r.Baseline]
	if !ok || base == 0 {
		return 0, false
	}
	return fig / base, true
}

// higherIsBetter: a figure in a unit per second is a rate; every other
// figure (a time, a size, a p99) costs more as it grows.
func higherIsBetter(unit string) bool { return strings.HasSuffix(unit, "/s") }

// costRatio is how much more the new side costs than the base: new/base
// for times and sizes, base/new for rates, so that over 1 is worse
// whichever the unit. ok is false when either figure cannot divide.
func costRatio(base, new float64, unit string) (cost float64, ok bool) {
	if base <= 0 || new <= 0 {
		return 0, false
	}
	if higherIsBetter(unit) {
		return base / new, true
	}
	return new / base, true
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// side is one row's figures on one side, a value per round that gave one.
type side struct {
	Values []float64 `json:"values"`
	Median float64   `json:"median"`
	// Norms: normOf per round, when the row has a measured baseline.
	Norms      []float64 `json:"norms,omitempty"`
	NormMedian float64   `json:"norm_median,omitempty"`
	// Missing: the side has no such figure (a row new in this change);
	// Failed: its run failed, with what it said.
	Missing string `json:"missing,omitempty"`
	Failed  string `json:"failed,omitempty"`
}

// result is one row of the comparison.
type result struct {
	Name  string  `json:"name"`
	Unit  string  `json:"unit"`
	Base  side    `json:"base"`
	New   side    `json:"new"`
	Ratio float64 `json:"ratio,omitempty"` // new/base of the medians
	Cost  float64 `json:"cost,omitempty"`  // costRatio of the medians
	// NormRatio and NormCost: the same of the normOf medians.
	NormRatio float64 `json:"norm_ratio,omitempty"`
	NormCost  float64 `json:"norm_cost,omitempty"`
	Flagged   bool    `json:"flagged,omitempty"`
	Skipped   string  `json:"skipped,omitempty"`
	Rounds    int     `json:"rounds"`
	BaseRev   string  `json:"-"`
	flagOver  float64
}

// add records one run's outcome for a row on one side.
func (s *side) add(v float64, err error) {
	switch {
	case err == nil:
		s.Values = append(s.Values, v)
	case errors.Is(err, errNoFigure):
		s.Missing = err.Error()
	default:
		s.Failed = err.Error()
	}
}

// settle computes the medians, the ratio and the flag from the figures.
func (r *result) settle(flagOver float64) {
	r.Base.Median, r.New.Median = median(r.Base.Values), median(r.New.Values)
	r.Base.NormMedian, r.New.NormMedian = median(r.Base.Norms), median(r.New.Norms)
	r.flagOver = flagOver
	if c, ok := costRatio(r.Base.NormMedian, r.New.NormMedian, r.Unit); ok {
		r.NormRatio, r.NormCost = r.New.NormMedian/r.Base.NormMedian, c
	}
	if len(r.Base.Values) == 0 || len(r.New.Values) == 0 || r.Base.Median == 0 {
		return
	}
	r.Ratio = r.New.Median / r.Base.Median
	if c, ok := costRatio(r.Base.Median, r.New.Median, r.Unit); ok {
		r.Cost = c
		r.Flagged = c > flagOver
	}
}

// verdict is the last column: what to make of the row. When the figure
// and NORMALIZED say different things, it says both: one of them is the
// machine's load, and more rounds tell which.
func (r result) verdict() string {
	switch {
	case r.Skipped != "":
		return "skipped: " + r.Skipped
	case r.New.Failed != "":
		return "FAILED: " + r.New.Failed
	case len(r.Base.Values) == 0 && r.Base.Failed == "":
		return "new (not in the base)"
	case r.Base.Failed != "":
		return "base failed: " + r.Base.Failed
	case r.Cost == 0:
		return "-"
	}
	v := judge(r.Cost, r.flagOver)
	if r.Flagged {
		v = fmt.Sprintf("COSTS %.0f %% MORE (over %.2f)", (r.Cost-1)*100, r.flagOver)
	}
	if r.NormCost != 0 {
		if n := judge(r.NormCost, r.flagOver); n != judge(r.Cost, r.flagOver) {
			v += "; against its baseline " + n + ": rerun with more ROUNDS"
		}
	}
	return v
}

// judge names a cost ratio: over flagOver, under its inverse, or between.
func judge(cost, flagOver float64) string {
	switch {
	case cost > flagOver:
		return fmt.Sprintf("%.0f %% more", (cost-1)*100)
	case cost < 1/flagOver:
		return fmt.Sprintf("%.0f %% cheaper", (1-cost)*100)
	}
	return "within noise"
}

// render prints the comparison table.
func render(w io.Writer, rs []result) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tBASE (RANGE)\tNEW (RANGE)\tNEW/BASE\tNORMALIZED\tVERDICT")
	for _, r := range rs {
		fig := func(s side) string {
			if len(s.Values) == 0 {
				return "-"
			}
			return fmt.Sprintf("%.4g %s (%.4g–%.4g)", s.Median, r.Unit, slices.Min(s.Values), slices.Max(s.Values))
		}
		ratio, norm := "-", "-"
		if r.Ratio != 0 {
			ratio = fmt.Sprintf("%.3f", r.Ratio)
		}
		if r.NormRatio != 0 {
			norm = fmt.Sprintf("%.3f", r.NormRatio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, fig(r.Base), fig(r.New), ratio, norm, r.verdict())
	}
	return tw.Flush()
}

// overFail lists the rows whose cost ratio exceeds failOver (zero: none).
func overFail(rs []result, failOver float64) []string {
	var names []string
	for _, r := range rs {
		if failOver > 0 && r.Cost > failOver {
			names = append(names, fmt.Sprintf("%s (%.2f)", r.Name, r.Cost))
		}
	}
	return names
}

// binaries are one side's test binaries by package, or why a package has
// none (its build failed, or it has no tests on that side).
type binaries struct {
	Dir  string // the module root the binaries run in
	Bin  map[string]string
	Errs map[string]error
}

// build compiles the test binary of each package in src into binDir.
func build(ctx context.Context, src, binDir, name string, pkgs []string) binaries {
	b := binaries{Dir: src, Bin: map[string]string{}, Errs: map[string]error{}}
	for _, pkg := range pkgs {
		if _, err := os.Stat(filepath.Join(src, pkg)); err != nil {
			b.Errs[pkg] = fmt.Errorf("%w: no package %s in the %s", errNoFigure, pkg, name)
			continue
		}
		out := filepath.Join(binDir, name+"-"+strings.NewReplacer("/", "_", ".", "_").Replace(pkg)+".test")
		cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", out, pkg)
		cmd.Dir = src
		msg, err := cmd.CombinedOutput()
		if err == nil {
			if _, statErr := os.Stat(out); statErr != nil {
				err = fmt.Errorf("%w: no test files", errNoFigure)
			}
		}
		if errors.Is(err, errNoFigure) {
			b.Errs[pkg] = fmt.Errorf("%s on the %s: %w", pkg, name, err)
			continue
		}
		if err != nil {
			b.Errs[pkg] = fmt.Errorf("build the %s's tests of %s: %v: %s", name, pkg, err, lastLines(string(msg)))
			continue
		}
		b.Bin[pkg] = out
	}
	return b
}

// runGroup runs one group's benchmark on one side and returns its lines.
func runGroup(ctx context.Context, b binaries, g group) (map[string]map[string]float64, error) {
	bin, ok := b.Bin[g.Pkg]
	if !ok {
		return nil, b.Errs[g.Pkg]
	}
	cmd := exec.CommandContext(ctx, bin, binArgs(g)...)
	cmd.Dir = filepath.Join(b.Dir, g.Pkg)
	cmd.Env = append(os.Environ(), "AX_BENCH=1")
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	lines, _, err := parseRun(stdout.String(), stderr.String(), runErr, g.Test)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", g.Pkg, g.Pattern, err)
	}
	return lines, nil
}

// compare runs the base mode: it checks the base out into a temporary git
// worktree (removed on return, on Ctrl-C too: ctx is cancelled then),
// builds both sides' test binaries, runs each group on the base and then
// on the working tree, round after round, and prints the medians.
func compare(ctx context.Context, cfg compareConfig) (err error) {
	if cfg.Rounds <= 0 {
		cfg.Rounds = 3
	}
	if cfg.FlagOver <= 0 {
		cfg.FlagOver = 1.10
	}
	commit, why, newDesc, err := sides(ctx, cfg)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(cfg.TempRoot, "axbench-base-")
	if err != nil {
		return err
	}
	src := filepath.Join(tmp, "src")
	added := false
	defer func() {
		// Not ctx: it is cancelled on Ctrl-C, and the checkout goes then too.
		cleanup, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if added {
			if _, rmErr := git(cleanup, cfg.Dir, "worktree", "remove", "--force", src); rmErr != nil {
				fmt.Fprintf(cfg.Log, "axbench: %v (git worktree prune forgets it once its directory is gone)\n", rmErr)
			}
		}
		if rmErr := os.RemoveAll(tmp); rmErr != nil && err == nil {
			err = rmErr
		}
	}()
	if _, err := git(ctx, cfg.Dir, "worktree", "add", "--detach", src, commit); err != nil {
		return fmt.Errorf("check the base out: %w", err)
	}
	added = true

	groups := groupRows(cfg.Rows)
	var pkgs []string
	for _, g := range groups {
		if !slices.Contains(pkgs, g.Pkg) {
			pkgs = append(pkgs, g.Pkg)
		}
	}
	fmt.Fprintf(cfg.Log, "axbench: building the tests of %s for the base %s and the working tree …\n", strings.Join(pkgs, ", "), short(commit))
	baseBins := build(ctx, src, tmp, "base", pkgs)
	newBins := build(ctx, cfg.Dir, tmp, "new", pkgs)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for _, pkg := range pkgs {
		if e := newBins.Errs[pkg]; e != nil {
			return e
		}
	}
	results, err := alternate(ctx, cfg, groups, baseBins, newBins)
	if err != nil {
		return err
	}
	return report(cfg, commit, why, newDesc, results)
}

// sides resolves the base to a commit (and why it is the base) and
// describes the working tree it is measured against.
func sides(ctx context.Context, cfg compareConfig) (commit, why, newDesc string, err error) {
	baseRev, why := cfg.Base, "given"
	if baseRev == autoBase {
		if baseRev, why, err = defaultBase(ctx, cfg.Dir); err != nil {
			return "", "", "", err
		}
	}
	commit, err = git(ctx, cfg.Dir, "rev-parse", "--verify", "--quiet", baseRev+"^{commit}")
	if err != nil {
		return "", "", "", fmt.Errorf("base %q is not a commit of %s; give a tag, branch or hash (make bench BASE=<rev>): %w", baseRev, cfg.Dir, err)
	}
	head, err := git(ctx, cfg.Dir, "rev-parse", "HEAD")
	if err != nil {
		return "", "", "", err
	}
	dirty, err := git(ctx, cfg.Dir, "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return "", "", "", err
	}
	newDesc = "HEAD " + short(head)
	if dirty != "" {
		newDesc += " with uncommitted changes"
	}
	if commit == head && dirty == "" {
		fmt.Fprintf(cfg.Log, "axbench: the base %s is HEAD and the tree is clean: both sides are the same code, the ratios show the noise\n", short(commit))
	}
	return commit, why, newDesc, nil
}

// alternate runs every group on the base and then on the working tree,
// once a round, and settles each row's figures.
func alternate(ctx context.Context, cfg compareConfig, groups []group, baseBins, newBins binaries) ([]result, error) {
	results := make([]result, len(cfg.Rows))
	for i, r := range cfg.Rows {
		results[i] = result{Name: r.Name, Unit: r.Figure, Skipped: skipReason(r), Rounds: cfg.Rounds}
	}
	for round := 1; round <= cfg.Rounds; round++ {
		for _, g := range groups {
			for _, s := range []struct {
				name string
				bins binaries
				pick func(*result) *side
			}{
				{"base", baseBins, func(r *result) *side { return &r.Base }},
				{"new", newBins, func(r *result) *side { return &r.New }},
			} {
				fmt.Fprintf(cfg.Log, "round %d/%d, %s: %s %s …\n", round, cfg.Rounds, s.name, g.Pkg, g.Pattern)
				lines, runErr := runGroup(ctx, s.bins, g)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				for _, i := range g.Rows {
					if runErr != nil {
						s.pick(&results[i]).add(0, runErr)
						continue
					}
					sd := s.pick(&results[i])
					sd.add(figureOf(cfg.Rows[i], lines))
					if v, ok := normOf(cfg.Rows[i], lines); ok {
						sd.Norms = append(sd.Norms, v)
					}
				}
			}
		}
	}
	for i := range results {
		results[i].settle(cfg.FlagOver)
	}
	return results, nil
}

// report prints the table, writes the JSON when asked, and fails when a
// row costs more than cfg.FailOver.
func report(cfg compareConfig, commit, why, newDesc string, results []result) error {
	fmt.Fprintf(cfg.Out, "ax benchmarks, %s: base %s (%s) against %s, %d alternating rounds, medians; NEW/BASE over 1 costs more for times and sizes, less for rates (…/s), and a row is flagged when it costs more than %.2f×; NORMALIZED is NEW/BASE of each side's figure ÷ the baseline it measured in the same run, which a swing in load moves less\n",
		time.Now().Format(time.RFC3339), short(commit), why, newDesc, cfg.Rounds, cfg.FlagOver)
	if err := render(cfg.Out, results); err != nil {
		return err
	}
	if cfg.JSON != "" {
		b, err := json.MarshalIndent(struct {
			Base    string   `json:"base"`
			New     string   `json:"new"`
			Results []result `json:"rows"`
		}{commit, newDesc, results}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(cfg.JSON, b, 0o644); err != nil {
			return err
		}
	}
	if over := overFail(results, cfg.FailOver); len(over) > 0 {
		return fmt.Errorf("%d row(s) cost more than %.2f× the base %s: %s", len(over), cfg.FailOver, short(commit), strings.Join(over, "; "))
	}
	return nil
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// selectRows returns the rows whose name matches pattern, or with an empty
// pattern defaultRows's.
func selectRows(all []row, pattern string) ([]row, error) {
	keep := defaultRows
	if pattern != "" {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil, fmt.Errorf("-rows %q: %w", pattern, err)
		}
		keep = func(r row) bool { return re.MatchString(r.Name) }
	}
	var out []row
	for _, r := range all {
		if !keep(r) {
			continue
		}
		if r.KeptStore {
			return nil, fmt.Errorf("-rows %q selects %q, whose generated store is kept between runs and would be shared by the base and the working tree; leave it out", pattern, r.Name)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-rows %q matches no row; the rows are named as make bench prints them, e.g. -rows '^4 '", pattern)
	}
	return out, nil
}
