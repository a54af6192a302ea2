package dag

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/defs"
	"gopkg.in/yaml.v3"
)

var refNow = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// compile parses each source as its own file (p0.yaml, p1.yaml, …) and compiles them together.
func compile(t testing.TB, opts Options, srcs ...string) (*Graph, defs.Errors) {
	t.Helper()
	var pls []*defs.Pipeline
	for i, src := range srcs {
		p, errs := defs.Parse(fmt.Sprintf("p%d.yaml", i), []byte(src), defs.Options{Now: refNow})
		if errs.Err() != nil {
			t.Fatalf("parse: %v", errs)
		}
		pls = append(pls, p)
	}
	if opts.Now.IsZero() {
		opts.Now = refNow
	}
	return Compile(pls, opts)
}

func names(ts []*defs.Task) string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return strings.Join(out, ",")
}

const diamond = `pipeline: d
schedule: "@daily"
tasks:
  - {name: root, function: f, priority: 2}
  - {name: zeta, depends_on: [root], function: f, priority: 1}
  - {name: alpha, depends_on: [root], function: f}
  - {name: beta, depends_on: [root], function: f}
  - {name: sink, depends_on: [alpha, beta, zeta], function: f}
  - {name: tail, depends_on: [sink], function: f}
`

func TestOrderAndLayers(t *testing.T) {
	t.Parallel()
	g, errs := compile(t, Options{}, diamond)
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	// Ties broken by priority (zeta is 1) then name.
	if got := names(g.Order()); got != "root,zeta,alpha,beta,sink,tail" {
		t.Errorf("order = %s", got)
	}
	var layers []string
	for _, l := range g.Layers("d") {
		layers = append(layers, names(l))
	}
	if got := strings.Join(layers, " | "); got != "root | zeta,alpha,beta | sink | tail" {
		t.Errorf("layers = %s", got)
	}
	if got := names(g.Upstream("d.sink")); got != "alpha,beta,zeta" {
		t.Errorf("upstream of sink = %s", got)
	}
	if got := names(g.Downstream("d.root")); got != "zeta,alpha,beta" {
		t.Errorf("downstream of root = %s", got)
	}
	if _, err := g.Lib().Edge("d.root", "d.zeta"); err != nil {
		t.Errorf("library graph lacks edge root -> zeta: %v", err)
	}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	g, errs := compile(t, Options{}, strings.Replace(diamond, "{name: beta, depends_on: [root], function: f}", "{name: beta, depends_on: [root], function: f, group: side}", 1))
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	for _, tc := range []struct{ expr, want string }{
		{"", "root,zeta,alpha,beta,sink,tail"},
		{"sink", "sink"},
		{"sink+", "sink,tail"},
		{"+sink", "root,zeta,alpha,beta,sink"},
		{"+alpha+", "root,alpha,sink,tail"},
		{"group:side", "beta"},
		{"tail, alpha", "alpha,tail"},
		{"zeta+,group:side", "zeta,beta,sink,tail"},
	} {
		got, err := g.Select("d", tc.expr)
		if err != nil || names(got) != tc.want {
			t.Errorf("Select(%q) = %s, %v; want %s", tc.expr, names(got), err, tc.want)
		}
	}
	for _, tc := range []struct{ pipe, expr, want string }{
		{"d", "snik+", `dag: select "snik+": pipeline "d" has no task "snik" (did you mean "sink"?)`},
		{"d", "group:sid", `pipeline "d" has no task in group "sid" (did you mean "side"?)`},
		{"e", "", `dag: unknown pipeline "e" (did you mean "d"?)`},
	} {
		_, err := g.Select(tc.pipe, tc.expr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Select(%q, %q) error = %v, want %q", tc.pipe, tc.expr, err, tc.want)
		}
	}
}

func TestRunSets(t *testing.T) {
	t.Parallel()
	g, errs := compile(t, Options{}, `pipeline: m
tasks:
  - {name: a, cron: "@hourly", function: f}
  - {name: a2, depends_on: [a], function: f}
  - {name: b, cron: "@daily", function: f}
  - {name: lonely, function: f}
  - {name: waits, depends_on: [lonely], function: f}
`, diamond)
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	got := map[string]string{}
	for _, tr := range g.Triggers() {
		got[tr.Name()] = strings.Join(tr.Tasks, ",")
	}
	want := map[string]string{"m.a": "a,a2", "m.b": "b", "d": "root,zeta,alpha,beta,sink,tail"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("run sets = %v, want %v", got, want)
	}
	w := errs.Warnings().Error()
	for _, s := range []string{`p0.yaml:6:5: warning: task "lonely": can never run on its own`, `p0.yaml:7:5: warning: task "waits": can never run on its own`} {
		if !strings.Contains(w, s) {
			t.Errorf("warnings lack %q:\n%s", s, w)
		}
	}
}

func TestCrossPipeline(t *testing.T) {
	t.Parallel()
	up := "pipeline: billing\nschedule: \"@daily\"\ntasks:\n  - {name: settle, function: f, priority: 1}\n"
	down := "pipeline: orders\nschedule: \"@daily\"\ntasks:\n  - {name: report, depends_on: [billing.settle], function: f, priority: 1}\n"
	g, errs := compile(t, Options{}, up, down)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if got := names(g.Upstream("orders.report")); got != "settle" {
		t.Errorf("upstream = %s", got)
	}
	_, errs = compile(t, Options{}, up, strings.Replace(down, "billing.settle", "billing.setle", 1))
	if !strings.Contains(errs.Error(), `p1.yaml:4:33: task "report": depends_on "billing.setle": pipeline "billing" (p0.yaml) has no task "setle" (did you mean "settle"?)`) {
		t.Errorf("errors = %v", errs)
	}
	_, errs = compile(t, Options{}, up, up)
	if !strings.Contains(errs.Error(), `pipeline "billing" is also defined in p0.yaml`) {
		t.Errorf("duplicate pipeline: errors = %v", errs)
	}
	// A cycle through two pipelines is named with pipeline prefixes.
	up2 := "pipeline: billing\ntasks:\n  - {name: settle, depends_on: [orders.report], function: f}\n"
	_, errs = compile(t, Options{}, up2, down)
	if !strings.Contains(errs.Error(), `dependency cycle: billing.settle -> orders.report -> billing.settle`) {
		t.Errorf("cross cycle: errors = %v", errs)
	}
}

func TestCycleOfManyAndPathShape(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("pipeline: ring\nschedule: \"@daily\"\ntasks:\n")
	const n = 5000
	for i := range n {
		fmt.Fprintf(&b, "  - {name: t%d, depends_on: [t%d], function: f}\n", i, (i+1)%n)
	}
	b.WriteString("  - {name: after, depends_on: [t0], function: f}\n")
	_, errs := compile(t, Options{}, b.String())
	if len(errs) != 1 {
		t.Fatalf("want exactly one error (the cycle; 'after' is only downstream of it), got %d", len(errs))
	}
	msg := errs[0].Msg
	if !strings.HasPrefix(msg, "dependency cycle: t0 -> t1 -> t2 -> ") || !strings.Contains(msg, "-> t4999 -> t0;") {
		t.Errorf("cycle message = %.120s…", msg)
	}
}

func TestCollisionWarning(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("pipeline: burst\ntimezone: UTC\ntasks:\n")
	for i := range 150 {
		fmt.Fprintf(&b, "  - {name: t%03d, cron: \"0 3 * * *\", function: f}\n", i)
	}
	_, errs := compile(t, Options{DispatchRate: 100}, b.String())
	w := errs.Warnings()
	if len(w) != 1 || !strings.Contains(w[0].Msg, "fire-time collision: 150 tasks are due at 2026-06-01T03:00:00Z") || !strings.Contains(w[0].Msg, "dispatch rate of 100/s") {
		t.Fatalf("warnings = %v", w)
	}
	if _, errs := compile(t, Options{DispatchRate: 200}, b.String()); len(errs) != 0 {
		t.Errorf("at 200/s: %v", errs)
	}
}

// genPipeline writes a pipeline of n tasks: a random DAG where each task
// depends on two earlier ones, or a chain.
func genPipeline(n int, chain bool) []byte {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	var b strings.Builder
	b.Grow(n * 80)
	b.WriteString("pipeline: big\nschedule: \"0 2 * * *\"\ndefaults:\n  function: noop\ntasks:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: t%d\n    priority: %d\n", i, 1+r.IntN(5))
		switch {
		case i == 0:
		case chain:
			fmt.Fprintf(&b, "    depends_on: [t%d]\n", i-1)
		case i == 1:
			b.WriteString("    depends_on: [t0]\n")
		default:
			a := r.IntN(i)
			c := (a + 1 + r.IntN(i-1)) % i
			fmt.Fprintf(&b, "    depends_on: [t%d, t%d]\n", a, c)
		}
	}
	return []byte(b.String())
}

func TestGeneratedPipelinesCompile(t *testing.T) {
	t.Parallel()
	for _, chain := range []bool{false, true} {
		data := genPipeline(2000, chain)
		p, errs := defs.Parse("big.yaml", data, defs.Options{Now: refNow})
		if errs.Err() != nil {
			t.Fatal(errs)
		}
		g, cerrs := Compile([]*defs.Pipeline{p}, Options{Now: refNow, DispatchRate: -1})
		if cerrs.Err() != nil {
			t.Fatal(cerrs)
		}
		// Every edge goes forward in the order.
		pos := map[string]int{}
		for i, task := range g.Order() {
			pos[task.Name] = i
		}
		for _, task := range p.Tasks {
			for _, d := range task.DependsOn {
				if pos[d.Task] >= pos[task.Name] {
					t.Fatalf("chain=%v: %s comes before its upstream %s", chain, task.Name, d.Task)
				}
			}
		}
		if chain && len(g.Layers("big")) != 2000 {
			t.Errorf("a 2000-chain has %d layers", len(g.Layers("big")))
		}
	}
}

// BenchmarkCompile measures parse + validate + compile of generated
// pipelines against the baseline of merely parsing the same YAML into
// nodes, interleaved in one loop: metrics ax-ms, yaml-ms and their ratio.
func BenchmarkCompile(b *testing.B) {
	for _, tc := range []struct {
		name  string
		n     int
		chain bool
	}{
		{"random-1000", 1000, false},
		{"random-10000", 10000, false},
		{"chain-10000", 10000, true},
	} {
		data := genPipeline(tc.n, tc.chain)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			var ax, parse time.Duration
			for b.Loop() {
				start := time.Now()
				var n yaml.Node
				if err := yaml.Unmarshal(data, &n); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				p, errs := defs.Parse("big.yaml", data, defs.Options{Now: refNow})
				if errs.Err() != nil {
					b.Fatal(errs)
				}
				if _, errs := Compile([]*defs.Pipeline{p}, Options{Now: refNow}); errs.Err() != nil {
					b.Fatal(errs)
				}
				parse += mid.Sub(start)
				ax += time.Since(mid)
			}
			b.ReportMetric(float64(ax.Milliseconds())/float64(b.N), "ax-ms")
			b.ReportMetric(float64(parse.Milliseconds())/float64(b.N), "yaml-ms")
			b.ReportMetric(ax.Seconds()/parse.Seconds(), "ratio")
		})
	}
}

// FuzzCompile parses arbitrary data beside a fixed upstream pipeline and
// compiles both: no input may panic the compiler.
func FuzzCompile(f *testing.F) {
	f.Add([]byte(diamond))
	f.Add([]byte("pipeline: x\ntasks:\n  - {name: a, depends_on: [b], function: f}\n  - {name: b, depends_on: [a], function: f}\n"))
	f.Add([]byte("pipeline: x\ntasks:\n  - {name: a, depends_on: [d.sink], function: f}\n"))
	base, _ := defs.Parse("base.yaml", []byte(diamond), defs.Options{Now: refNow})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, _ := defs.Parse("fuzz.yaml", data, defs.Options{Now: refNow})
		pls := []*defs.Pipeline{base}
		if p != nil {
			pls = append(pls, p)
		}
		g, errs := Compile(pls, Options{Now: refNow})
		if (g == nil) != (errs.Err() != nil) {
			t.Fatalf("graph %v with errors %v", g != nil, errs)
		}
		for _, e := range errs {
			if e.Line < 1 {
				t.Fatalf("error without line: %+v", e)
			}
		}
	})
}

// TestManualOnlyPipelines: a pipeline without a schedule, or with
// `schedule: none`, runs when an operator triggers it: valid, no warning. A
// task that no cron of its pipeline reaches is still worth a warning,
// unless the pipeline says `schedule: none`.
func TestManualOnlyPipelines(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src, warn string
	}{
		{"no schedule", "pipeline: m\ntasks:\n  - {name: a, function: f}\n  - {name: b, depends_on: [a], function: f}\n", ""},
		{"schedule none", "pipeline: m\nschedule: none\ntasks:\n  - {name: a, function: f}\n", ""},
		{"none beside a cron", "pipeline: m\nschedule: none\ntasks:\n  - {name: a, cron: \"@daily\", function: f}\n  - {name: b, function: f}\n", ""},
		{"a cron and an unreached task", "pipeline: m\ntasks:\n  - {name: a, cron: \"@daily\", function: f}\n  - {name: b, function: f}\n",
			`p0.yaml:4:5: warning: task "b": can never run on its own: no schedule reaches it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, errs := compile(t, Options{}, tc.src)
			if g == nil {
				t.Fatalf("not compiled: %v", errs)
			}
			if got := errs.Error(); (tc.warn == "" && got != "") || !strings.HasPrefix(got, tc.warn) {
				t.Errorf("problems:\n%s\nwant: %q", got, tc.warn)
			}
		})
	}
}

// TestEveryCycleReportedOnce: each cycle is reported once, by its path from
// its first task in the file; a task downstream of cycles is not on one.
func TestEveryCycleReportedOnce(t *testing.T) {
	t.Parallel()
	_, errs := compile(t, Options{}, `pipeline: c
schedule: "@daily"
tasks:
  - {name: a, depends_on: [b], function: f}
  - {name: b, depends_on: [a], function: f}
  - {name: x, depends_on: [z], function: f}
  - {name: y, depends_on: [x], function: f}
  - {name: z, depends_on: [y], function: f}
  - {name: sink, depends_on: [a, x], function: f}
`)
	want := []string{
		`p0.yaml:4:5: task "a": dependency cycle: a -> b -> a; remove one of these depends_on entries`,
		`p0.yaml:6:5: task "x": dependency cycle: x -> z -> y -> x; remove one of these depends_on entries`,
	}
	if len(errs) != len(want) {
		t.Fatalf("errors = %v, want %d", errs, len(want))
	}
	for i, e := range errs {
		if e.Error() != want[i] {
			t.Errorf("error %d = %s, want %s", i, e.Error(), want[i])
		}
	}
}
