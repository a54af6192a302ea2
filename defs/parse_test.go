package defs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var refNow = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

func parseString(t *testing.T, src string) (*Pipeline, Errors) {
	t.Helper()
	return Parse("p.yaml", []byte(src), Options{Now: refNow})
}

func TestParseExampleResolvesDefaults(t *testing.T) {
	t.Parallel()
	p, errs := ParseFile("../examples/orders_daily.yaml", Options{Now: refNow})
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	if p.Name != "orders_daily" || p.Group != "data-platform" || p.Timezone != "Asia/Shanghai" || p.Misfire != MisfireFireOnce || p.Overlap != OverlapSkip {
		t.Errorf("pipeline = %+v", p)
	}
	if p.Schedule == nil || p.Schedule.Spec() != "0 2 * * *" {
		t.Fatalf("schedule = %v", p.Schedule)
	}
	sync := p.Task("sync_orders")
	if sync.Priority != 1 || sync.Timeout != 5*time.Minute || sync.Retry != (Retry{Count: 3, Interval: 30 * time.Second}) ||
		sync.Executor.Kind != ExecHTTP || sync.Executor.URL != "http://127.0.0.1:9090/dispatch" || sync.Group != "data-platform" {
		t.Errorf("sync_orders = %+v", sync)
	}
	if sync.Params["batch"] != 5000 || sync.Params["source"] != "orders_db" {
		t.Errorf("sync_orders params = %v", sync.Params)
	}
	report := p.Task("report")
	if report.Delay != 10*time.Minute || report.Priority != 3 || report.Executor.Function != "build_report" {
		t.Errorf("report = %+v", report)
	}
	if len(report.DependsOn) != 2 || report.DependsOn[1] != (Dep{Pipeline: "billing_daily", Task: "settle", Match: MatchInterval, Pos: report.DependsOn[1].Pos}) {
		t.Errorf("report depends_on = %+v", report.DependsOn)
	}
	approve := p.Task("approve_publish")
	if !approve.Manual || approve.Retry.Count != 0 || approve.Retry.Interval != 30*time.Second {
		t.Errorf("approve_publish = %+v (retry.count overridden, interval from defaults)", approve)
	}
	clean := p.Task("clean_orders")
	if clean.Executor.Kind != ExecCommand || len(clean.Executor.Command) != 1 || clean.WorkingDir != "scripts" || len(clean.Env) != 4 ||
		clean.Env[0].Name != "ORDERS_DAY" || clean.Env[0].Template == nil || clean.Env[3].Secret == nil {
		t.Errorf("clean_orders executor = %+v, working_dir %q, env %+v", clean.Executor, clean.WorkingDir, clean.Env)
	}
}

func TestParseBuiltinDefaults(t *testing.T) {
	t.Parallel()
	p, errs := parseString(t, "pipeline: bare\ntasks:\n  - name: a\n    command: [\"true\"]\n")
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	a := p.Task("a")
	if p.Timezone != DefaultTimezone || p.Location.String() != "Asia/Shanghai" {
		t.Errorf("default zone = %s (%v), want Asia/Shanghai", p.Timezone, p.Location)
	}
	if a.Priority != 3 || a.Timeout != 300*time.Second || a.Retry.Count != 0 || a.Retry.Interval != 30*time.Second ||
		a.Group != DefaultGroup || a.Misfire != MisfireFireOnce || a.Overlap != OverlapSkip {
		t.Errorf("task defaults = %+v", a)
	}
}

func TestParseDefaultsExecutorAndParamsMerge(t *testing.T) {
	t.Parallel()
	p, errs := parseString(t, `pipeline: merged
defaults:
  command: ["echo", "{{ .Task }}"]
  params: {a: 1, b: 2}
  misfire: skip
  overlap: allow
tasks:
  - name: x
    params: {b: 3}
  - name: y
    function: noop
    overlap: wait
`)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	x, y := p.Task("x"), p.Task("y")
	if x.Executor.Kind != ExecCommand || x.Params["a"] != 1 || x.Params["b"] != 3 || x.Misfire != MisfireSkip || x.Overlap != OverlapAllow {
		t.Errorf("x = %+v", x)
	}
	if y.Executor.Kind != ExecFunction || y.Overlap != OverlapWait {
		t.Errorf("y = %+v: a task's own executor replaces the default one", y)
	}
}

func TestParseErrorsAreAllReportedWithPositions(t *testing.T) {
	t.Parallel()
	_, errs := parseString(t, `pipeline: p
tasks:
  - name: a
    function: noop
    priority: 9
  - name: b
    depends_on: [a, a]
    function: noop
    retry: {count: 1, interval: 10}
  - name: 9bad
    function: noop
`)
	want := []string{
		`p.yaml:5:15: task "a": priority 9 is out of range`,
		`p.yaml:7:21: task "b": depends_on lists "a" twice`,
		`p.yaml:9:33: task "b": retry interval 10 has no unit`,
		`p.yaml:10:11: task name "9bad" is not a valid name`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), errs)
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, errs[i].Error(), w)
		}
	}
}

func TestParseOddDocuments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src, want string }{
		{"list at top", "- a\n- b\n", "must be a mapping"},
		{"second document", "pipeline: p\ntasks:\n  - {name: a, function: f}\n---\npipeline: q\n", "second YAML document"},
		{"tasks not a list", "pipeline: p\ntasks: {a: 1}\n", "tasks must be a list"},
		{"empty tasks", "pipeline: p\ntasks: []\n", "tasks is empty"},
		{"merge key", "pipeline: p\nx: &x {function: f}\ntasks:\n  - name: a\n    <<: *x\n", "merge keys"},
		{"repeated key", "pipeline: p\npipeline: q\ntasks:\n  - {name: a, function: f}\n", "repeated"},
		{"null value", "pipeline: p\ntasks:\n  - name: a\n    function:\n", "must be a string, not a empty value"},
		{"params list", "pipeline: p\ntasks:\n  - name: a\n    function: f\n    params: [1]\n", "params must be a mapping"},
		{"command string", "pipeline: p\ntasks:\n  - name: a\n    command: ls -l\n", "command must be an argv list"},
		{"bad dep shape", "pipeline: p\ntasks:\n  - name: a\n    function: f\n  - name: b\n    depends_on: [a.b.c]\n    function: f\n", "not a task reference"},
		{"own pipeline prefix", "pipeline: p\ntasks:\n  - name: a\n    function: f\n  - name: b\n    depends_on: [p.a]\n    function: f\n", `write "a"`},
		{"short timeout", "pipeline: p\ntasks:\n  - name: a\n    function: f\n    timeout: 10ms\n", "too short"},
		{"local zone", "pipeline: p\ntimezone: Local\ntasks:\n  - name: a\n    function: f\n", "not allowed"},
		{"short sla", "pipeline: p\ntasks:\n  - name: a\n    function: f\n    sla: 500ms\n", `5:10: task "a": sla "500ms" is too short`},
		{"bare number sla", "pipeline: p\ndefaults: {sla: 30}\ntasks:\n  - name: a\n    function: f\n", "sla"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, errs := parseString(t, tc.src)
			if errs.Err() == nil || !strings.Contains(errs.Error(), tc.want) {
				t.Errorf("errors = %v, want one containing %q", errs, tc.want)
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		word  string
		cands []string
		want  string
	}{
		{"synk", []string{"sync", "clean"}, "sync"},
		{"timout", taskKeys, "timeout"},
		{"xyz", []string{"sync", "clean"}, ""},
		{"", []string{"a"}, "a"},
	} {
		if got := Suggest(tc.word, tc.cands); got != tc.want {
			t.Errorf("Suggest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}

// A name from outside (a request's target, a URL's path) may be a
// megabyte long: judging it against the names there are measures no edit
// distance that cannot be close enough, so it costs no memory per letter.
func TestSuggestBoundsLongWords(t *testing.T) { // not parallel: AllocsPerRun
	word := strings.Repeat("s", 1<<20)
	allocs := testing.AllocsPerRun(1, func() {
		if got := Suggest(word, []string{"sync", "clean", strings.Repeat("s", 30)}); got != "" {
			t.Errorf("Suggest(1 MB) = %q", got)
		}
	})
	if allocs > 10 {
		t.Errorf("Suggest of a 1 MB word made %.0f allocations", allocs)
	}
}

// FuzzParse feeds arbitrary bytes to the parser: it must never panic, and
// every problem it reports must carry a position.
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"../examples/*.yaml", "../cmd/ax/testdata/invalid/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("pipeline: p\ntasks:\n  - name: a\n    cron: 'CRON_TZ='\n    function: f\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, errs := Parse("fuzz.yaml", data, Options{Now: refNow})
		for _, e := range errs {
			if e.Line < 1 || e.Col < 1 || e.File != "fuzz.yaml" || e.Msg == "" {
				t.Fatalf("error without position or message: %+v", e)
			}
		}
		if errs.Err() == nil {
			if p == nil || p.Name == "" || len(p.Tasks) == 0 {
				t.Fatalf("valid file but pipeline = %+v", p)
			}
			for _, task := range p.Tasks {
				if task.Executor.Kind == "" || task.Priority < 1 || task.Priority > 5 || task.Timeout <= 0 {
					t.Fatalf("valid file but task %+v", task)
				}
			}
		}
	})
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{{"sink", "snik", 1}, {"sync", "synk", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"same", "same", 0}} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestParseSLA: sla on a task wins over the one in defaults; none is zero.
func TestParseSLA(t *testing.T) {
	t.Parallel()
	p, errs := parseString(t, "pipeline: p\ndefaults: {sla: 30m}\ntasks:\n  - {name: a, function: f}\n  - {name: b, function: f, sla: 2h}\n")
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	if a, b := p.Task("a").SLA, p.Task("b").SLA; a != 30*time.Minute || b != 2*time.Hour {
		t.Errorf("sla a = %s, b = %s; want 30m0s and 2h0m0s", a, b)
	}
	q, errs := parseString(t, "pipeline: q\ntasks:\n  - {name: a, function: f}\n")
	if errs.Err() != nil || q.Task("a").SLA != 0 {
		t.Errorf("no sla: %s, %v", q.Task("a").SLA, errs)
	}
}

func TestParseWaitTimeout(t *testing.T) {
	t.Parallel()
	p, errs := Parse("w.yaml", []byte("pipeline: w\ndefaults: {function: f, wait_timeout: 6h}\ntasks:\n  - {name: a}\n  - {name: b, depends_on: [a], wait_timeout: 90m}\n"), Options{})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	if a, b := p.Task("a").WaitTimeout, p.Task("b").WaitTimeout; a != 6*time.Hour || b != 90*time.Minute {
		t.Errorf("wait_timeout a %s, b %s; want 6h from defaults and 90m of its own", a, b)
	}
	if p, _ := Parse("w.yaml", []byte("pipeline: w\ntasks:\n  - {name: a, function: f}\n"), Options{}); p.Task("a").WaitTimeout != 0 {
		t.Errorf("unset wait_timeout = %s, want 0 (none same-pipeline, %s cross-pipeline)", p.Task("a").WaitTimeout, DefaultCrossWait)
	}
	_, errs = Parse("w.yaml", []byte("pipeline: w\ntasks:\n  - {name: a, function: f, wait_timeout: 10ms}\n"), Options{})
	if got := errs.Error(); !strings.Contains(got, `w.yaml:3:42: task "a": wait_timeout "10ms" is too short`) {
		t.Errorf("errors %q", got)
	}
}

// TestParseStoreLimits: a name, group or URL longer than the store's column
// that keeps it is an error of validation, at its position, not a failure of
// the server's first write ("Data too long for column 'name'"); the longest
// that fits is accepted.
func TestParseStoreLimits(t *testing.T) {
	t.Parallel()
	name := func(n int) string { return "p" + strings.Repeat("x", n-1) }
	url := func(n int) string { return "http://h/" + strings.Repeat("u", n-len("http://h/")) }
	src := func(pl, task, group, u string) string {
		return "pipeline: " + pl + "\ngroup: " + group + "\ntasks:\n  - name: " + task + "\n    http: " + u + "\n"
	}
	if _, errs := parseString(t, src(name(128), name(128), name(128), url(255))); len(errs) != 0 {
		t.Fatalf("names of 128 and a URL of 255 characters: %v", errs)
	}
	p, errs := parseString(t, src(name(129), name(201), name(130), url(256)))
	want := []string{
		`p.yaml:1:11: pipeline "` + name(129)[:20] + `…" is 129 characters long: use at most 128 (the store keeps names in columns of 128)`,
		`p.yaml:2:8: group "` + name(130)[:20] + `…" is 130 characters long: use at most 128 (the store keeps names in columns of 128)`,
		`p.yaml:4:11: task name "` + name(201)[:20] + `…" is 201 characters long: use at most 128 (the store keeps names in columns of 128)`,
		`p.yaml:5:11: task "` + name(201) + `": http URL is 256 characters long: use at most 255 (the store keeps the executor's address in a column of 255)`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(errs), len(want), errs)
	}
	for i, w := range want {
		if errs[i].Error() != w {
			t.Errorf("problem %d:\n got %s\nwant %s", i, errs[i].Error(), w)
		}
	}
	if p == nil || p.Name != name(129) {
		t.Errorf("the pipeline is still read (for the checks of the other files): %v", p)
	}
}

// TestParseDefinitionAndPathLimits: a pipeline whose definition the store
// cannot hold (over 16 MiB as JSON) and a file path longer than the store's
// column are errors of validation.
func TestParseDefinitionAndPathLimits(t *testing.T) {
	t.Parallel()
	big := "pipeline: big\ntasks:\n  - name: a\n    command: [\"true\"]\n    params: {blob: [\"" + strings.Repeat("x", 1<<24) + "\"]}\n" // a list: not exported as AX_PARAM_BLOB
	_, errs := parseString(t, big)
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), `p.yaml:1:1: the pipeline's definition is 16777`) ||
		!strings.Contains(errs[0].Error(), "bytes as JSON: the store keeps at most 16777215") {
		t.Errorf("got %v", errs)
	}
	long := strings.Repeat("d/", 512) + "p.yaml"
	_, errs = Parse(long, []byte("pipeline: p\ntasks:\n  - name: a\n    command: [\"true\"]\n"), Options{Now: refNow})
	if len(errs) != 1 || errs[0].Error() != long+":1:1: the file's path is 1030 characters long: use at most 1024 (the store keeps it in a column of 1024); move the file up" {
		t.Errorf("got %v", errs)
	}
}

// TestParseUnregisteredFunction: with the names the binary registers, a
// function it does not register is an error, with a suggestion; without
// them (nil) any well-formed name passes.
func TestParseUnregisteredFunction(t *testing.T) {
	t.Parallel()
	src := "pipeline: p\ntasks:\n  - name: load\n    function: load_to_warehouse\n  - name: ok\n    function: noop\n"
	funcs := []string{"build_report", "load_warehouse", "noop"}
	_, errs := Parse("p.yaml", []byte(src), Options{Now: refNow, Functions: funcs})
	want := `p.yaml:4:15: task "load": function "load_to_warehouse" is not registered in this ax binary (did you mean "load_warehouse"?); it registers build_report, load_warehouse, noop`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("got %v\nwant %s", errs, want)
	}
	if _, errs := Parse("p.yaml", []byte(src), Options{Now: refNow}); len(errs) != 0 {
		t.Errorf("without Functions: %v", errs)
	}
}

// TestTemplateProblemsAllNamedWithSuggestions: every unknown field, helper
// and param of a template is named, with a suggestion, not only the first
// one its execution meets; templates that can run are not reported.
func TestTemplateProblemsAllNamedWithSuggestions(t *testing.T) {
	t.Parallel()
	arg := func(a string) string {
		return "pipeline: p\nschedule: \"@daily\"\ntasks:\n  - name: a\n    params: {region: cn, dates: [a, b]}\n    command: [\"sh\", " + strconvQuote(a) + "]\n"
	}
	for _, ok := range []string{
		`{{ .LogicalTime.Prev.Date }} {{ (.LogicalTime.AddDays -1).Compact }} {{ $.Task }} {{ .Params.region }}`,
		`{{ range .Params.dates }}{{ . }}{{ end }} {{ with .LogicalTime }}{{ .Date }}{{ end }} {{ if .Ticket }}{{ .Pipeline }}{{ end }}`,
		`{{ .LogicalTime | printf "%s" }} {{ index .Params "region" }} {{ .LogicalTime.Format "2006" }}`,
	} {
		if _, errs := parseString(t, arg(ok)); len(errs) != 0 {
			t.Errorf("%s: %v", ok, errs)
		}
	}
	_, errs := parseString(t, arg(`{{ .LogicalTime.Dat }} {{ .Param.region }} {{ .Params.regin }} {{ if .Tiket }}{{ $.Pipelin }}{{ end }}`))
	var got []string
	for _, e := range errs {
		_, why, _ := strings.Cut(e.Msg, "cannot be expanded: ")
		why, _, _ = strings.Cut(why, "; templates may use")
		got = append(got, why)
	}
	want := []string{
		`.LogicalTime has no helper "Dat" (did you mean "Date"?)`,
		`there is no field "Param" (did you mean "Params"?)`,
		`there is no field "Pipelin" (did you mean "Pipeline"?)`,
		`there is no field "Tiket" (did you mean "Ticket"?)`,
		`uses the param "regin", which the task does not declare (did you mean "region"?): add it under params (a trigger's --param regin=... overrides it)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// A depends_on entry may be a mapping that says which run of another
// pipeline meets it; match and offset on a same-pipeline dependency, an
// unknown rule and an offset that is neither days nor a duration are
// refused where they are written.
func TestParseDependencyMatch(t *testing.T) {
	t.Parallel()
	p, errs := parseString(t, `pipeline: p
tasks:
  - name: a
    function: f
  - name: b
    function: f
    depends_on: [a, other.x, {task: billing.load, match: exact, offset: -1d}, {task: billing.fx, offset: -2h}, {task: billing.y, match: latest}]
`)
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	got := p.Task("b").DependsOn
	want := []Dep{{Task: "a"}, {Pipeline: "other", Task: "x"}, {Pipeline: "billing", Task: "load", Match: MatchExact, Offset: Offset{Days: -1}},
		{Pipeline: "billing", Task: "fx", Offset: Offset{D: -2 * time.Hour}}, {Pipeline: "billing", Task: "y", Match: MatchLatest}}
	if len(got) != len(want) {
		t.Fatalf("depends_on = %+v, want %+v", got, want)
	}
	for i := range want {
		got[i].Pos = Pos{}
		if got[i] != want[i] {
			t.Errorf("depends_on[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, tc := range []struct{ name, dep, want string }{
		{"match on same pipeline", "{task: a, match: exact}", `p.yaml:7:28: task "b": depends_on "a" is in the same pipeline: match and offset apply to a dependency on another pipeline`},
		{"offset on same pipeline", "{task: a, offset: -1d}", `p.yaml:7:28: task "b": depends_on "a" is in the same pipeline`},
		{"unknown rule", "{task: o.x, match: newest}", `p.yaml:7:37: task "b": depends_on match "newest" is not a match rule: use exact, interval, latest`},
		{"offset not a step", "{task: o.x, offset: yesterday}", `p.yaml:7:38: task "b": depends_on offset "yesterday" is not a calendar step or a duration`},
		{"offset days and hours", "{task: o.x, offset: 1d2h}", `p.yaml:7:38: task "b": depends_on offset "1d2h" is not a calendar step or a duration`},
		{"no task", "{match: exact}", `p.yaml:7:18: task "b": depends_on entry has no task`},
		{"unknown key", "{task: o.x, when: exact}", `p.yaml:7:30: task "b": depends_on entry: unknown key "when"`},
	} {
		_, errs := parseString(t, "pipeline: p\ntasks:\n  - name: a\n    function: f\n  - name: b\n    function: f\n    depends_on: ["+tc.dep+"]\n")
		if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tc.want) {
			t.Errorf("%s: errors %v, want one starting %q", tc.name, errs, tc.want)
		}
	}
}

// CrossWindow is the matching rule: the downstream's schedule interval that
// holds the logical time (never an older one), the same time, or the latest
// at or before it, each shifted by the offset.
func TestCrossWindow(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	daily := mustSchedule(t, "0 2 * * *", "UTC")
	nyDaily := mustSchedule(t, "0 2 * * *", "America/New_York")
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name    string
		dep     Dep
		own     *Schedule
		loc     *time.Location
		logical string
		want    string
	}{
		{"interval of a fire", Dep{}, daily, time.UTC, "2026-12-06T02:00:00Z", "a run in (2026-12-05T02:00:00Z, 2026-12-06T02:00:00Z]"},
		{"interval of a manual time", Dep{}, daily, time.UTC, "2026-12-06T00:00:00Z", "a run in (2026-12-05T02:00:00Z, 2026-12-06T02:00:00Z]"},
		{"interval, offset a day", Dep{Offset: Offset{Days: -1}}, daily, time.UTC, "2026-12-06T02:00:00Z", "a run in (2026-12-04T02:00:00Z, 2026-12-05T02:00:00Z]"},
		{"no schedule: days", Dep{}, nil, time.UTC, "2026-12-06T10:00:00Z", "a run in (2026-12-06T00:00:00Z, 2026-12-07T00:00:00Z]"},
		{"no schedule: midnight", Dep{}, nil, time.UTC, "2026-12-06T00:00:00Z", "a run in (2026-12-05T00:00:00Z, 2026-12-06T00:00:00Z]"},
		{"exact", Dep{Match: MatchExact}, daily, time.UTC, "2026-12-06T02:00:00Z", "the run of 2026-12-06T02:00:00Z"},
		{"exact, offset hours", Dep{Match: MatchExact, Offset: Offset{D: -2 * time.Hour}}, daily, time.UTC, "2026-12-06T02:00:00Z", "the run of 2026-12-06T00:00:00Z"},
		{"latest", Dep{Match: MatchLatest}, daily, time.UTC, "2026-12-06T02:00:00Z", "a run at or before 2026-12-06T02:00:00Z"},
		// a calendar day across the fall-back change is 25 hours: midnight the day before, not 01:00
		{"calendar day across DST", Dep{Match: MatchExact, Offset: Offset{Days: -1}}, nyDaily, ny, "2026-11-02T05:00:00Z", "the run of 2026-11-01T04:00:00Z"},
	} {
		w := CrossWindow(tc.dep, tc.own, tc.loc, at(tc.logical))
		if got := w.String(); got != tc.want {
			t.Errorf("%s: window %s, want %s", tc.name, got, tc.want)
		}
	}
	w := CrossWindow(Dep{}, daily, time.UTC, at("2026-12-06T02:00:00Z"))
	for s, want := range map[string]bool{"2026-12-05T02:00:00Z": false, "2026-12-05T02:00:01Z": true, "2026-12-06T02:00:00Z": true, "2026-12-06T02:00:01Z": false} {
		if w.Contains(at(s)) != want {
			t.Errorf("interval %s contains %s: %v, want %v", w, s, !want, want)
		}
	}
}
