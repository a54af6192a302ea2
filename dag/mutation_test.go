package dag

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/defs"
)

// Tests below pin what mutation testing (gremlins) found no test checking;
// every expected value is worked out by hand from the pipelines written here.

const billing = "pipeline: billing\nschedule: \"@daily\"\ntasks:\n  - {name: settle, function: f, priority: 1}\n"

const ordersExt = `pipeline: orders
schedule: "@daily"
tasks:
  - {name: report, depends_on: [billing.settle, ext.load], function: f, priority: 1}
  - {name: approve, depends_on: [report], manual: true, command: ["true"]}
`

// TestExternalReferences: with External, an upstream in a pipeline that was
// not compiled is recorded and drawn dashed, not reported; one naming a
// missing task of a pipeline that was compiled is still an error, as is any
// unknown pipeline without External.
func TestExternalReferences(t *testing.T) {
	t.Parallel()
	g, errs := compile(t, Options{External: true}, billing, ordersExt)
	if len(errs) != 0 {
		t.Fatalf("errors with External: %v", errs)
	}
	var b bytes.Buffer
	if err := g.WriteDOT(&b, "orders"); err != nil {
		t.Fatal(err)
	}
	want := "digraph \"orders\" {\n\trankdir=LR;\n\tnode [shape=box];\n" +
		"\t\"report\" [label=\"report\\np1 function\"];\n" +
		"\t\"approve\" [label=\"approve\\np3 command\", style=rounded];\n" +
		"\t\"billing.settle\" [style=dashed];\n" +
		"\t\"ext.load\" [style=dashed];\n" +
		"\t\"billing.settle\" -> \"report\";\n" +
		"\t\"ext.load\" -> \"report\";\n" +
		"\t\"report\" -> \"approve\";\n" +
		"}\n"
	if b.String() != want {
		t.Errorf("DOT of orders:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := g.WriteDOT(&b, "billing"); err != nil {
		t.Fatal(err)
	}
	if want := "digraph \"billing\" {\n\trankdir=LR;\n\tnode [shape=box];\n\t\"settle\" [label=\"settle\\np1 function\"];\n}\n"; b.String() != want {
		t.Errorf("DOT of billing:\n%s\nwant:\n%s", b.String(), want)
	}
	if err := g.WriteDOT(&b, "nope"); err == nil || !strings.Contains(err.Error(), `unknown pipeline "nope"`) {
		t.Errorf("WriteDOT of an unknown pipeline: %v", err)
	}

	_, errs = compile(t, Options{External: true}, billing, strings.Replace(ordersExt, "billing.settle", "billing.setle", 1))
	if errs.Err() == nil || !strings.Contains(errs.Error(), `depends_on "billing.setle": pipeline "billing" (p0.yaml) has no task "setle"`) {
		t.Errorf("missing task of a compiled pipeline with External: %v", errs)
	}
	_, errs = compile(t, Options{}, billing, ordersExt)
	if errs.Err() == nil || !strings.Contains(errs.Error(), `depends_on "ext.load": no pipeline "ext" among the files given`) {
		t.Errorf("unknown pipeline without External: %v", errs)
	}
}

// TestCrossPipelineEdgesStayOutOfSelections: Select, Layers and run sets
// follow edges inside the pipeline only; Upstream and Downstream list the
// other pipelines' tasks too.
func TestCrossPipelineEdgesStayOutOfSelections(t *testing.T) {
	t.Parallel()
	g, errs := compile(t, Options{External: true}, billing, ordersExt)
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	for _, tc := range []struct{ pipe, expr, want string }{
		{"orders", "+approve", "report,approve"},
		{"orders", "+report+", "report,approve"},
		{"billing", "settle+", "settle"},
	} {
		got, err := g.Select(tc.pipe, tc.expr)
		if err != nil || names(got) != tc.want {
			t.Errorf("Select(%q, %q) = %s, %v; want %s", tc.pipe, tc.expr, names(got), err, tc.want)
		}
	}
	var layers []string
	for _, l := range g.Layers("orders") {
		layers = append(layers, names(l))
	}
	if got := strings.Join(layers, " | "); got != "report | approve" {
		t.Errorf("layers of orders = %s, want report | approve", got)
	}
	if got := names(g.Downstream("billing.settle")); got != "report" {
		t.Errorf("downstream of billing.settle = %s, want report", got)
	}
	if got := names(g.Upstream("orders.report")); got != "settle" {
		t.Errorf("upstream of orders.report = %s, want settle", got)
	}
	if g.Upstream("orders.nope") != nil || g.Downstream("nope") != nil || g.Task("orders.nope") != nil {
		t.Error("an unknown id has upstreams, downstreams or a task")
	}
	got := map[string]string{}
	for _, tr := range g.Triggers() {
		got[tr.Name()] = strings.Join(tr.Tasks, ",")
	}
	if want := map[string]string{"billing": "settle", "orders": "report,approve"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("run sets = %v, want %v", got, want)
	}
}

// TestTriggerOf: the schedule whose run set holds a task, matched by
// pipeline and name.
func TestTriggerOf(t *testing.T) {
	t.Parallel()
	g, errs := compile(t, Options{}, `pipeline: m
tasks:
  - {name: a, cron: "@hourly", function: f}
  - {name: a2, depends_on: [a], function: f}
  - {name: lonely, function: f}
  - {name: sink, function: f}
`, diamond)
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	for id, want := range map[string]string{"m.a": "m.a", "m.a2": "m.a", "d.sink": "d", "d.root": "d", "m.sink": "", "m.lonely": "", "x.y": ""} {
		got := ""
		if tr := g.TriggerOf(id); tr != nil {
			got = tr.Name()
		}
		if got != want {
			t.Errorf("TriggerOf(%s) = %q, want %q", id, got, want)
		}
	}
}

// TestTwoSchedulesAndUnreachableUpstreams: the error for a task two
// schedules reach names both, and the warning for a task that waits for an
// upstream no run includes names the upstream and the schedule.
func TestTwoSchedulesAndUnreachableUpstreams(t *testing.T) {
	t.Parallel()
	_, errs := compile(t, Options{}, `pipeline: two
schedule: "@daily"
tasks:
  - {name: a, cron: "@hourly", function: f}
  - {name: b, depends_on: [a], function: f}
`)
	both := `is reachable from 2 schedules (the pipeline schedule "@daily" at line 2 and the cron "@hourly" of task "a" at line 4): a task must belong to one schedule's runs; remove a cron or split the pipeline`
	if len(errs) != 2 || errs[0].Error() != `p0.yaml:4:5: task "a": `+both || errs[1].Error() != `p0.yaml:5:5: task "b": `+both {
		t.Errorf("errors = %v, want a and b reachable from both schedules", errs)
	}

	_, errs = compile(t, Options{}, `pipeline: w
tasks:
  - {name: a, cron: "@daily", function: f}
  - {name: lonely, function: f}
  - {name: c, depends_on: [a, lonely], function: f}
`)
	want := []string{
		`p0.yaml:4:5: warning: task "lonely": can never run on its own`,
		`p0.yaml:5:31: warning: task "c": can never run: it waits for "lonely", which the runs of the cron "@daily" of task "a" at line 3 do not include`,
	}
	if len(errs) != len(want) {
		t.Fatalf("errors = %v, want %d warnings", errs, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("warning %d = %q, want it to start %q", i, errs[i].Error(), w)
		}
	}
}

// TestPriorityInversionWarning: an upstream less urgent than its downstream
// is named at the depends_on entry; equal priorities are fine.
func TestPriorityInversionWarning(t *testing.T) {
	t.Parallel()
	_, errs := compile(t, Options{}, `pipeline: inv
schedule: "@daily"
tasks:
  - {name: up, function: f, priority: 4}
  - {name: down, depends_on: [up], function: f, priority: 2}
  - {name: same, depends_on: [up], function: f, priority: 4}
`)
	want := `p0.yaml:5:31: warning: task "down": priority inversion: upstream "up" has priority 4, lower than this task's 2; raise the upstream's priority`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("errors = %v, want only %q", errs, want)
	}
}

// cronTasks writes a pipeline whose tasks each have their own cron: count
// tasks firing at each of the given hours (UTC), named h<hour>_<i>.
func cronTasks(name string, count int, hours ...int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline: %s\ntimezone: UTC\ntasks:\n", name)
	for _, h := range hours {
		for i := range count {
			fmt.Fprintf(&b, "  - {name: h%d_%d, cron: \"0 %d * * *\", function: f}\n", h, i, h)
		}
	}
	return b.String()
}

// TestCollisionMessage: the whole warning: count, second, the first five
// triggers by name and how many more, the rate, the queueing time.
func TestCollisionMessage(t *testing.T) {
	t.Parallel()
	_, errs := compile(t, Options{DispatchRate: 2}, cronTasks("burst", 8, 3))
	want := `p0.yaml:4:5: warning: task "h3_0": fire-time collision: 8 tasks are due at 2026-06-01T03:00:00Z (burst.h3_0, burst.h3_1, burst.h3_2, burst.h3_3, burst.h3_4, and 3 more), more than the dispatch rate of 2/s; they will queue for about 4s: spread their schedules or raise the rate`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("errors = %v\nwant %s", errs, want)
	}
	// Exactly the rate is no collision.
	if _, errs := compile(t, Options{DispatchRate: 8}, cronTasks("burst", 8, 3)); len(errs) != 0 {
		t.Errorf("8 tasks at 8/s: %v", errs)
	}
	// Five triggers: all named, none "more".
	var srcs []string
	for i := range 5 {
		srcs = append(srcs, fmt.Sprintf("pipeline: p%d\ntimezone: UTC\nschedule: \"0 3 * * *\"\ntasks:\n  - {name: a, function: f}\n  - {name: b, function: f}\n", i))
	}
	_, errs = compile(t, Options{DispatchRate: 9}, srcs...)
	want = `p0.yaml:3:11: warning: fire-time collision: 10 tasks are due at 2026-06-01T03:00:00Z (p0, p1, p2, p3, p4), more than the dispatch rate of 9/s; they will queue for about 1s: spread their schedules or raise the rate`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("five pipelines: errors = %v\nwant %s", errs, want)
	}
}

// TestCollisionTieTakesTheEarliest: among seconds equally over the rate, the
// earliest is reported.
func TestCollisionTieTakesTheEarliest(t *testing.T) {
	t.Parallel()
	_, errs := compile(t, Options{DispatchRate: 1}, cronTasks("tie", 2, 6, 1, 5, 2, 4, 3))
	if len(errs) != 1 || !strings.Contains(errs[0].Msg, "2 tasks are due at 2026-06-01T01:00:00Z (tie.h1_0, tie.h1_1)") {
		t.Errorf("errors = %v, want the collision at 01:00", errs)
	}
}

// TestCollisionCountsRootsOnly: of a run set, only the tasks due at the fire
// itself count: not those that wait for an upstream, not manual ones.
func TestCollisionCountsRootsOnly(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("pipeline: roots\ntimezone: UTC\nschedule: \"0 3 * * *\"\ntasks:\n")
	for i := range 6 {
		fmt.Fprintf(&b, "  - {name: r%d, function: f}\n  - {name: d%d, depends_on: [r%d], function: f}\n", i, i, i)
	}
	for i := range 3 {
		fmt.Fprintf(&b, "  - {name: m%d, manual: true, function: f}\n", i)
	}
	_, errs := compile(t, Options{DispatchRate: 5}, b.String())
	if len(errs) != 1 || !strings.Contains(errs[0].Msg, "fire-time collision: 6 tasks are due at 2026-06-01T03:00:00Z (roots)") {
		t.Errorf("errors = %v, want 6 roots due at 03:00", errs)
	}
	if _, errs := compile(t, Options{DispatchRate: 6}, b.String()); len(errs) != 0 {
		t.Errorf("6 roots at 6/s: %v", errs)
	}
}

// TestLoadDropsFollowOnWarnings: Load keeps every problem of a file that
// parsed and only the errors of one that did not (its broken schedule would
// otherwise add "can never run" warnings); the graph is nil on any error.
func TestLoadDropsFollowOnWarnings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "pipeline: a\ntasks:\n  - {name: x, function: f}\n  - {name: c, cron: \"@daily\", function: f}\n")
	g, errs, err := Load([]string{dir}, defs.Options{Now: refNow}, Options{Now: refNow})
	if err != nil || g == nil || len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), filepath.Join(dir, "a.yaml")+`:3:5: warning: task "x": can never run on its own`) {
		t.Fatalf("one file with a warning: graph %v, errors %v, err %v", g != nil, errs, err)
	}
	write("b.yaml", "pipeline: b\nschedule: \"0 0 30 2 *\"\ntasks:\n  - {name: y, function: f}\n")
	g, errs, err = Load([]string{dir}, defs.Options{Now: refNow}, Options{Now: refNow})
	if err != nil || g != nil || len(errs) != 2 {
		t.Fatalf("with a broken schedule: graph %v, errors %v, err %v; want no graph and 2 problems", g != nil, errs, err)
	}
	if !strings.HasPrefix(errs[0].Error(), filepath.Join(dir, "a.yaml")+":3:5: warning:") ||
		!strings.HasPrefix(errs[1].Error(), filepath.Join(dir, "b.yaml")+":2:11: schedule") || !strings.Contains(errs[1].Msg, "can never fire") {
		t.Errorf("errors = %v, want a's warning and b's schedule error only", errs)
	}
	if _, _, err := Load([]string{filepath.Join(dir, "missing")}, defs.Options{}, Options{}); err == nil {
		t.Error("Load of a missing path: no error")
	}
}

// TestCycleOnOneLine: a cycle is named from its first task in the file,
// also when its tasks share a line (a flow-style list), as it is when they
// are on lines of their own.
func TestCycleOnOneLine(t *testing.T) {
	t.Parallel()
	_, errs := compile(t, Options{}, "pipeline: c\nschedule: \"@daily\"\ntasks:\n  - {name: a, depends_on: [b], function: f}\n  - {name: b, depends_on: [a], function: f}\n")
	if want := `p0.yaml:4:5: task "a": dependency cycle: a -> b -> a; remove one of these depends_on entries`; len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("cycle on two lines: %v, want %s", errs, want)
	}
	_, errs = compile(t, Options{}, "pipeline: c\nschedule: \"@daily\"\ntasks: [{name: a, depends_on: [b], function: f}, {name: b, depends_on: [a], function: f}]\n")
	if want := `p0.yaml:3:9: task "a": dependency cycle: a -> b -> a; remove one of these depends_on entries`; len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("cycle on one line: %v, want %s", errs, want)
	}
}
