package defs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Tests below pin what mutation testing (gremlins) found no test checking.
// Every expected value is worked out by hand (weekdays from the calendar:
// 2026-01-01 is a Thursday) or read from the code's documented messages.

func TestErrorsFormatSortAndFilter(t *testing.T) {
	t.Parallel()
	es := Errors{
		{Pos: Pos{File: "b.yaml", Line: 1, Col: 1}, Msg: "m", Severity: SevError},
		{Pos: Pos{File: "a.yaml", Line: 2, Col: 5}, Task: "t", Msg: "z", Severity: SevWarning},
		{Pos: Pos{File: "a.yaml", Line: 2, Col: 5}, Msg: "y", Severity: SevError},
		{Pos: Pos{File: "a.yaml", Line: 10, Col: 1}, Pipeline: "p", Msg: "w", Severity: SevError},
		{Pos: Pos{File: "a.yaml", Line: 2, Col: 3}, Msg: "x", Severity: SevError},
	}
	es.Sort()
	want := "a.yaml:2:3: x\na.yaml:2:5: y\na.yaml:2:5: warning: task \"t\": z\na.yaml:10:1: w\nb.yaml:1:1: m"
	if got := es.Error(); got != want {
		t.Errorf("sorted errors:\n%s\nwant:\n%s", got, want)
	}
	if got := es.Warnings().Error(); got != `a.yaml:2:5: warning: task "t": z` {
		t.Errorf("Warnings() = %q", got)
	}
	if got := es.Fatal().Error(); got != "a.yaml:2:3: x\na.yaml:2:5: y\na.yaml:10:1: w\nb.yaml:1:1: m" {
		t.Errorf("Fatal() = %q", got)
	}
	if err := es.Err(); err == nil || err.Error() != es.Fatal().Error() {
		t.Errorf("Err() = %v, want the four errors", err)
	}
	if err := es.Warnings().Err(); err != nil {
		t.Errorf("Err() of warnings only = %v, want nil", err)
	}
	if len(Errors(nil).Warnings()) != 0 || Errors(nil).Err() != nil {
		t.Error("an empty list has problems")
	}
}

func TestSuggestPrefersTheClosestThenTheFirstByName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		word  string
		cands []string
		want  string
	}{
		{"sync", []string{"sync", "synk"}, "sync"}, // exact beats one edit, in either order
		{"sync", []string{"synk", "sync"}, "sync"},
		{"R", []string{"b", "r"}, "r"},             // a change of case beats a one-letter name at the same distance
		{"Ab", []string{"Aa", "ab"}, "ab"},         // case alone beats one edit ahead of it by name
		{"sinc", []string{"sync", "sine"}, "sine"}, // one edit each: the first by name
		{"sinc", []string{"sine", "sync"}, "sine"},
		{"abcdef", []string{"abcxyz"}, ""},                // 3 edits, limit 2 (6/3)
		{"abcdef", []string{"abxyef"}, "abxyef"},          // 2 edits, limit 2
		{"prinft", []string{"print", "printf"}, "printf"}, // one edit each: the length kept (a swap)
		{"prinft", []string{"printf", "print"}, "printf"},
	} {
		if got := Suggest(tc.word, tc.cands); got != tc.want {
			t.Errorf("Suggest(%q, %q) = %q, want %q", tc.word, tc.cands, got, tc.want)
		}
	}
}

// TestEditDistanceIsOptimalStringAlignment: neighbours swapped cost one,
// but a swapped pair is not edited again (ca -> abc is 3, not 2), and
// distances count runes.
func TestEditDistanceIsOptimalStringAlignment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{{"ab", "ba", 1}, {"ca", "abc", 3}, {"abcd", "badc", 2}, {"a", "", 1}, {"", "", 0}, {"über", "uber", 1}, {"flaw", "lawn", 2}} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestFindFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"a.yaml", "b.yml", "c.txt", ".hidden/x.yaml", "testdata/y.yaml", "sub/z.yaml", "sub/.git/w.yaml"} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := FindFiles([]string{filepath.Join(dir, "sub"), dir, filepath.Join(dir, "a.yaml")})
	want := []string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yml"), filepath.Join(dir, "sub/z.yaml")}
	if err != nil || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("FindFiles = %v, %v; want %v", got, err, want)
	}
	// A hidden directory named on the command line is searched.
	got, err = FindFiles([]string{filepath.Join(dir, ".hidden")})
	if err != nil || len(got) != 1 || got[0] != filepath.Join(dir, ".hidden/x.yaml") {
		t.Errorf("FindFiles(.hidden) = %v, %v", got, err)
	}
	// A file is taken as it is, whatever its name.
	got, err = FindFiles([]string{filepath.Join(dir, "c.txt"), filepath.Join(dir, "c.txt")})
	if err != nil || len(got) != 1 || got[0] != filepath.Join(dir, "c.txt") {
		t.Errorf("FindFiles(c.txt twice) = %v, %v", got, err)
	}
	if _, err := FindFiles([]string{filepath.Join(dir, "nope")}); err == nil || !strings.Contains(err.Error(), "nope: no such file or directory") {
		t.Errorf("missing path: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := FindFiles([]string{empty}); err == nil || err.Error() != "defs: no pipeline files (*.yaml, *.yml) in directory "+empty {
		t.Errorf("empty directory: %v", err)
	}
}

func TestParseFilesKeepsWhatParsed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("pipeline: g\ntasks:\n  - {name: a, function: f}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	pls, errs := ParseFiles([]string{missing, good}, Options{Now: refNow})
	if len(pls) != 1 || pls[0].Name != "g" || pls[0].File != good {
		t.Errorf("pipelines = %v, want g only", pls)
	}
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), missing+":1:1: cannot read file:") {
		t.Errorf("errors = %v, want the missing file named at 1:1", errs)
	}
}

// parseErr parses src and returns all problems as one string.
func parseErr(t *testing.T, src string) string {
	t.Helper()
	_, errs := parseString(t, src)
	return errs.Error()
}

// TestParseBounds: each bounded field accepts its bounds and refuses one
// past them, naming the field and the range.
func TestParseBounds(t *testing.T) {
	t.Parallel()
	task := func(fields string) string {
		return "pipeline: p\ntasks:\n  - {name: a, function: f, " + fields + "}\n"
	}
	for _, ok := range []string{
		"priority: 1", "priority: 5", "max_running: 1", "max_running: 1000000", "timeout: 1s", "wait_timeout: 1s", "sla: 1s",
		"delay: 0s", "retry: {count: 0, interval: 1s}", "breaker: {window: 10s, min_outcomes: 1, ratio: 0.01}",
		"breaker: {min_outcomes: 10000, ratio: 0.99}", "http: https://exec.example:8443/run", "manual: false",
	} {
		if _, errs := parseString(t, strings.Replace(task(ok), "function: f, http", "http", 1)); len(errs) != 0 {
			t.Errorf("%s: %v", ok, errs)
		}
	}
	for field, want := range map[string]string{
		"priority: 0":                         `priority 0 is out of range: use 1 (highest) to 5 (lowest)`,
		"priority: 6":                         `priority 6 is out of range`,
		"priority: 99999999999":               `priority 99999999999 is out of range`,
		"priority: high":                      `priority must be a whole number, not a scalar "high"`,
		"max_running: 0":                      `max_running 0 is out of range: use 1 to 1000000 (leave it out for no cap)`,
		"max_running: 1000001":                `max_running 1000001 is out of range`,
		"timeout: 999ms":                      `timeout "999ms" is too short: use at least "1s"`,
		"delay: -1s":                          `delay "-1s" is negative: durations must be zero or more`,
		"delay: 1.5":                          `delay 1.5 has no unit: write a duration such as "1.5s" or "5m"`,
		"delay: soon":                         `delay "soon" is not a duration`,
		"retry: {count: -1}":                  `retry count -1 is negative: use 0 for no retry`,
		"retry: {interval: 999ms}":            `retry interval "999ms" is too short: use at least "1s"`,
		"retry: 3":                            `retry must be a mapping such as {count: 3, interval: 30s}, not a scalar "3"`,
		"breaker: {window: 9s}":               `breaker window "9s" is too short`,
		"breaker: {min_outcomes: 10001}":      `breaker min_outcomes 10001 is out of range: use 1 to 10000`,
		"breaker: {ratio: 0}":                 `breaker ratio 0 is out of range: use a failure ratio above 0 and below 1, such as 0.5`,
		"breaker: {ratio: 1}":                 `breaker ratio 1 is out of range`,
		`breaker: {ratio: "0.5"}`:             `breaker ratio must be a number such as 0.5, not "0.5"`,
		"manual: yes":                         `manual must be true or false, not a scalar "yes"`,
		"params: {a: {1: x}}":                 `params must be plain values (strings, numbers, lists, mappings with string keys)`,
		"misfire: once":                       `misfire "once" is not a policy: use fire_once, skip or fire_all`,
		"overlap: alow":                       `overlap "alow" is not a policy: use skip, wait or allow (did you mean "allow"?)`,
		"group: a.b":                          `group "a.b" is not a valid name`,
		"depends_on: a":                       `depends_on must be a list such as [sync_orders], not a scalar "a"`,
		"depends_on: [a]":                     `depends on itself: remove "a" from depends_on`,
		"depends_on: [b]":                     `depends_on "b": no such task`,
		"depends_on: [p.x]":                   `depends_on "p.x" names its own pipeline: write "x"`,
		"cron: \"@daily\", depends_on: [x.y]": `has both cron and depends_on: a task with upstreams fires when they succeed; remove one of them`,
		"cron: \"0 0 30 2 *\"":                `cron "0 0 30 2 *" can never fire`,
	} {
		if got := parseErr(t, task(field)); !strings.Contains(got, want) {
			t.Errorf("%s: errors %q, want %q", field, got, want)
		}
	}
	for exec, want := range map[string]string{
		"http: ftp://x/y":                        `http "ftp://x/y" is not an executor URL: write http://host:port/path`,
		"http: http://":                          `http "http://" is not an executor URL`,
		"function: \"bad name\"":                 `function "bad name" is not a valid function name`,
		"command: [\" \"]":                       `command has an empty program name: the first item is the program to run`,
		"command: []":                            `command is empty`,
		"command: [echo, \"{{ .LogicalTime\"]":   `command argument 1 is not a valid template`,
		"command: [echo, \"{{ .Params.day }}\"]": `command argument 1 cannot be expanded: uses the param "day", which the task does not declare: add it under params (a trigger's --param day=... overrides it)`,
		"command: [echo, \"{{ .Nope }}\"]":       `command argument 1 cannot be expanded: there is no field "Nope"`,
		"command: [echo, [x]]":                   `command argument must be a string, not a list`,
		"function: f, command: [echo]":           `has 2 executors (function at line 3, command at line 3): keep exactly one of function, http, command`,
		"group: g":                               `has no executor: add one of`,
	} {
		src := "pipeline: p\ntasks:\n  - {name: a, " + exec + "}\n"
		if got := parseErr(t, src); !strings.Contains(got, want) {
			t.Errorf("%s: errors %q, want %q", exec, got, want)
		}
	}
	// An empty argument after the program is kept; a command's template
	// may use its declared params and the schedule's fires, with or
	// without a schedule.
	p, errs := parseString(t, "pipeline: p\ntasks:\n  - {name: a, command: [echo, \"\", \"{{ .Params.day }} {{ .LogicalTime.Prev }} {{ .LogicalTime.Next }}\"], params: {day: 1}}\n")
	if len(errs) != 0 || len(p.Task("a").Executor.Command) != 3 || p.Task("a").Executor.Command[1] != "" {
		t.Errorf("command with an empty argument and templates: %v, %v", errs, p)
	}
}

func TestParseDocumentShapes(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		"pipeline: p\n  bad: indent\n":             `p.yaml:2:1: YAML syntax error: mapping values are not allowed in this context`,
		"# only a comment\n":                       `p.yaml:1:1: file is empty`,
		"   \n\n":                                  `p.yaml:1:1: file is empty`,
		"tasks:\n  - {name: a, function: f}\n":     `p.yaml:1:1: missing ` + "`pipeline:`",
		"pipeline: p\n":                            `p.yaml:1:1: missing ` + "`tasks:`" + `: list at least one task`,
		"pipeline: p\ntasks:\n  - a\n":             `p.yaml:3:5: each task must be a mapping starting with ` + "`name:`" + `, not a scalar "a"`,
		"pipeline: p\ntasks:\n  - {function: f}\n": `p.yaml:3:5: task without ` + "`name:`",
		"pipeline: p\ntasks:\n  - {name: a, function: f}\n  - {name: a, function: g}\n": `p.yaml:4:5: task "a": duplicate task name (first defined at line 3)`,
		"pipeline: p\ndefaults: [x]\ntasks:\n  - {name: a, function: f}\n":              `p.yaml:2:11: defaults must be a mapping of task fields, not a list`,
		"pipeline: p\ndefaults: {name: x}\ntasks:\n  - {name: a, function: f}\n":        `defaults: "name" cannot have a default: each task needs its own name`,
		"pipeline: p\ntimezone: Mars/Olympus\ntasks:\n  - {name: a, function: f}\n":     `p.yaml:2:11: unknown time zone "Mars/Olympus"`,
		"pipeline: p\ntasks:\n  - {name: a, function: f, [k]: v}\n":                     `task: keys must be plain words, not a list`,
		"pipeline: p\nschedule: \"0 0 30 2 *\"\ntasks:\n  - {name: a, function: f}\n":   `p.yaml:2:11: schedule "0 0 30 2 *" can never fire`,
		"pipeline: p\nmisfire: never\ntasks:\n  - {name: a, function: f}\n":             `misfire "never" is not a policy`,
		"pipeline: p\noverlap: never\ntasks:\n  - {name: a, function: f}\n":             `overlap "never" is not a policy`,
	} {
		if got := parseErr(t, src); !strings.Contains(got, want) {
			t.Errorf("%q: errors %q, want %q", src, got, want)
		}
	}
}

// TestParseAliasesAndTaskCron: YAML aliases are followed; a task's cron is
// parsed in the pipeline's zone; the pipeline's settings reach its tasks.
func TestParseAliasesAndTaskCron(t *testing.T) {
	t.Parallel()
	p, errs := parseString(t, `pipeline: p
group: grp
timezone: Europe/Berlin
misfire: fire_all
overlap: wait
tasks:
  - {name: a, function: &fn noop, cron: "0 2 * * *"}
  - {name: b, function: *fn, depends_on: [a]}
`)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	a, b := p.Task("a"), p.Task("b")
	if b.Executor.Function != "noop" {
		t.Errorf("b's function through an alias = %q, want noop", b.Executor.Function)
	}
	if a.Cron != "0 2 * * *" || a.Schedule == nil || a.Schedule.Location().String() != "Europe/Berlin" || b.Schedule != nil {
		t.Errorf("a cron %q schedule %v, b schedule %v", a.Cron, a.Schedule, b.Schedule)
	}
	if a.Group != "grp" || a.Misfire != MisfireFireAll || a.Overlap != OverlapWait || p.Timezone != "Europe/Berlin" {
		t.Errorf("a = %+v, pipeline zone %q: want the pipeline's group, misfire, overlap", a, p.Timezone)
	}
	if p.Task("nope") != nil || strings.Join(p.TaskNames(), ",") != "a,b" || a.ID() != "p.a" {
		t.Errorf("lookups: %v %v %s", p.Task("nope"), p.TaskNames(), a.ID())
	}
	if d := b.DependsOn[0]; d.String() != "a" || (Dep{Pipeline: "q", Task: "x"}).String() != "q.x" {
		t.Errorf("dep strings: %s", d)
	}
	// A bad zone leaves the zone unnamed.
	q, _ := parseString(t, "pipeline: q\ntimezone: Nowhere\ntasks:\n  - {name: a, function: f}\n")
	if q == nil || q.Timezone != "" || q.Location == nil {
		t.Errorf("bad zone: %+v", q)
	}
}

func TestParseDefaultParamsReachTasksWithout(t *testing.T) {
	t.Parallel()
	p, errs := parseString(t, "pipeline: p\ndefaults: {function: f, params: {a: 1}}\ntasks:\n  - {name: x}\n")
	if len(errs) != 0 || len(p.Task("x").Params) != 1 || p.Task("x").Params["a"] != 1 {
		t.Errorf("x params = %v, %v; want the defaults' {a: 1}", p.Task("x").Params, errs)
	}
	q, _ := parseString(t, "pipeline: q\ntasks:\n  - {name: x, function: f}\n")
	if q.Task("x").Params != nil {
		t.Errorf("no params anywhere: %v, want nil", q.Task("x").Params)
	}
}

func mustSchedule(t *testing.T, spec, zone string) *Schedule {
	t.Helper()
	s, err := ParseSchedule(spec, mustLoc(t, zone), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMoment(t *testing.T) {
	t.Parallel()
	ny := mustLoc(t, "America/New_York")
	at := time.Date(2026, 3, 7, 17, 0, 0, 0, time.UTC) // noon in New York, the day before spring-forward
	m := NewMoment(at, ny, mustSchedule(t, "0 12 * * *", "America/New_York"))
	for _, tc := range []struct{ name, got, want string }{
		{"String", m.String(), "2026-03-07T12:00:00-05:00"},
		{"Format", m.Format("2006-01-02 15:04 MST"), "2026-03-07 12:00 EST"},
		{"Date", m.Date(), "2026-03-07"},
		{"Compact", m.Compact(), "20260307"},
		{"AddDays 1 keeps the wall clock", m.AddDays(1).String(), "2026-03-08T12:00:00-04:00"},
		{"AddDays -1", m.AddDays(-1).String(), "2026-03-06T12:00:00-05:00"},
		{"AddHours 24 is real time", m.AddHours(24).String(), "2026-03-08T13:00:00-04:00"},
		{"AddHours -1", m.AddHours(-1).String(), "2026-03-07T11:00:00-05:00"},
		{"no zone keeps the time's", NewMoment(at, nil, nil).String(), "2026-03-07T17:00:00Z"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %s, want %s", tc.name, tc.got, tc.want)
		}
	}
	if m.Unix() != at.Unix() || !m.Time().Equal(at) {
		t.Errorf("Unix %d, Time %s; want %d", m.Unix(), m.Time(), at.Unix())
	}
	prev, err := m.Prev()
	if err != nil || prev.String() != "2026-03-06T12:00:00-05:00" {
		t.Errorf("Prev = %s, %v", prev, err)
	}
	next, err := m.Next()
	if err != nil || next.String() != "2026-03-08T12:00:00-04:00" {
		t.Errorf("Next = %s, %v", next, err)
	}
	if p2, err := m.AddDays(1).Prev(); err != nil || p2.String() != "2026-03-07T12:00:00-05:00" {
		t.Errorf("Prev after AddDays keeps the schedule: %s, %v", p2, err)
	}
	bare := NewMoment(at, ny, nil)
	if _, err := bare.Prev(); err == nil || err.Error() != "LogicalTime.Prev: the task has no schedule" {
		t.Errorf("Prev without a schedule: %v", err)
	}
	if _, err := bare.Next(); err == nil || err.Error() != "LogicalTime.Next: the task has no schedule" {
		t.Errorf("Next without a schedule: %v", err)
	}
	rare := NewMoment(time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC, mustSchedule(t, "0 0 * 2 MON#5", "UTC"))
	if _, err := rare.Prev(); err == nil || err.Error() != `LogicalTime.Prev: "0 0 * 2 MON#5" has no fire before 2040-01-01T00:00:00Z` {
		t.Errorf("Prev with none within ten years: %v", err)
	}
}

// TestSchedulePrev: the latest fire strictly before t, within ten years.
// The fifth Monday of February falls on 2016-02-29 and 2044-02-29; the
// fifth Tuesday on 2028-02-29 (2028-02-01 is a Tuesday); none between.
func TestSchedulePrev(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ spec, at, want string }{
		{"0 12 * * *", "2026-03-07T12:00:00Z", "2026-03-06T12:00:00Z"},
		{"0 12 * * *", "2026-03-07T12:00:01Z", "2026-03-07T12:00:00Z"},
		{"* * * * * *", "2026-03-07T12:00:00Z", "2026-03-07T11:59:59Z"},
		{"0 0 1 1 *", "2026-01-01T00:00:00Z", "2025-01-01T00:00:00Z"},
		// The next fire is 18 years away, the last one 10 months.
		{"0 0 * 2 MON#5", "2026-01-15T00:00:00Z", "2016-02-29T00:00:00Z"},
		// The next fire is 28 years away, the last one a day.
		{"0 0 * 2 MON#5", "2044-03-01T00:00:00Z", "2044-02-29T00:00:00Z"},
		// The next fire is 2 years away, the last one almost 10.
		{"0 0 * 2 MON#5,TUE#5", "2026-01-01T00:00:00Z", "2016-02-29T00:00:00Z"},
		{"0 0 * 2 MON#5", "2040-01-01T00:00:00Z", ""}, // 24 years: none within ten
	} {
		at, err := time.Parse(time.RFC3339, tc.at)
		if err != nil {
			t.Fatal(err)
		}
		got := mustSchedule(t, tc.spec, "UTC").Prev(at)
		s := ""
		if !got.IsZero() {
			s = got.Format(time.RFC3339)
		}
		if s != tc.want {
			t.Errorf("Prev(%q, %s) = %q, want %q", tc.spec, tc.at, s, tc.want)
		}
	}
}

// TestTemplatePrevOfARareSchedule: a command's template may use Prev on a
// schedule whose next fire is years away.
func TestTemplatePrevOfARareSchedule(t *testing.T) {
	t.Parallel()
	_, errs := parseString(t, "pipeline: p\ntimezone: UTC\ntasks:\n  - {name: a, cron: \"0 0 * 2 MON#5\", command: [echo, \"{{ .LogicalTime.Prev }}\"]}\n")
	if len(errs) != 0 {
		t.Errorf("errors %v, want none: the fire before the sample time is 2016-02-29", errs)
	}
}

func TestScheduleWildcardAndAccessors(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]bool{"@every 5m": true, "*/5 * * * *": true, "0 * * * *": true, "30 2 * * *": false, "@daily": false,
		"* 30 2 * * *": true, "0 30 2 * * *": false, "30 2,3 * * *": false} {
		s := mustSchedule(t, spec, "UTC")
		if s.Wildcard() != want || s.Spec() != spec || s.Location() != time.UTC {
			t.Errorf("%q: Wildcard %v (want %v), Spec %q", spec, s.Wildcard(), want, s.Spec())
		}
	}
}

func TestCronMoreForms(t *testing.T) {
	t.Parallel()
	runNextCases(t, []nextCase{
		{"*/1 is every minute", "UTC", "*/1 * * * *", "2026-01-01T00:00:30Z", []string{"2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"}},
		{"FRI-TUE/2 counts the step across the wrap", "UTC", "0 0 * * FRI-TUE/2", "2026-01-07T00:00:00Z",
			[]string{"2026-01-09T00:00:00Z", "2026-01-11T00:00:00Z", "2026-01-13T00:00:00Z", "2026-01-16T00:00:00Z"}},
		{"FRI-TUE/3 counts on after the wrap", "UTC", "0 0 * * FRI-TUE/3", "2026-01-07T00:00:00Z",
			[]string{"2026-01-09T00:00:00Z", "2026-01-12T00:00:00Z", "2026-01-16T00:00:00Z", "2026-01-19T00:00:00Z"}},
		{"NOV-FEB/2", "UTC", "0 0 1 NOV-FEB/2 *", "2026-03-01T00:00:00Z",
			[]string{"2026-11-01T00:00:00Z", "2027-01-01T00:00:00Z", "2027-11-01T00:00:00Z"}},
		{"THU is a name, not H", "UTC", "0 0 * * THU", "2026-01-01T00:00:00Z", []string{"2026-01-08T00:00:00Z", "2026-01-15T00:00:00Z"}},
		{"L-0 is L", "UTC", "0 0 L-0 * *", "2026-02-01T00:00:00Z", []string{"2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z"}},
		{"L-30 is the 1st of 31-day months", "UTC", "0 0 L-30 * *", "2026-01-01T00:00:00Z", []string{"2026-03-01T00:00:00Z", "2026-05-01T00:00:00Z"}},
		{"MON#1", "UTC", "0 0 * * MON#1", "2026-01-01T00:00:00Z", []string{"2026-01-05T00:00:00Z", "2026-02-02T00:00:00Z"}},
		{"7#2 is the second Sunday", "UTC", "0 0 * * 7#2", "2026-01-01T00:00:00Z", []string{"2026-01-11T00:00:00Z", "2026-02-08T00:00:00Z"}},
		{"the largest value of each field", "UTC", "59 59 23 31 12 6", "2026-12-01T00:00:00Z",
			[]string{"2026-12-05T23:59:59Z", "2026-12-12T23:59:59Z", "2026-12-19T23:59:59Z", "2026-12-26T23:59:59Z", "2026-12-31T23:59:59Z"}},
		{"5 to the end every 20", "UTC", "5/20 0 * * *", "2026-01-01T00:00:00Z", []string{"2026-01-01T00:05:00Z", "2026-01-01T00:25:00Z", "2026-01-01T00:45:00Z", "2026-01-02T00:05:00Z"}},
		{"0-7/7 is Sunday", "UTC", "0 0 * * 0-7/7", "2026-01-01T00:00:00Z", []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		// From the last day of a leap year past New York's zone table to a
		// fire after the next spring-forward (2041-03-10): 00:00 EDT, 04:00 UT.
		{"wildcard past the zone table into DST", "America/New_York", "0 * 1 4 *", "2040-12-31T12:00:00-05:00", []string{"2041-04-01T00:00:00-04:00"}},
	})
}

func TestCronMessages(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		"0 0 * JANUARY *":  `month field "JANUARY": "JANUARY" is not a value: write a number 1-12 or a name (JAN … DEC)`,
		"0 0 * * FUNDAY":   `day-of-week field "FUNDAY": "FUNDAY" is not a value: write a number 0-7 or a name (SUN, MON, … SAT)`,
		"x 0 * * *":        `minute field "x": "x" is not a value: write a number 0-59`,
		"0 0 * * 5W":       `day-of-week field "5W": "5W" is not a value: L, W and # belong to day of month (L, L-3, 15W, LW) or day of week (5L, FRIL, MON#2), alone in their list item`,
		"0 0 12 ? * 2/10":  `write names instead: MON/10`,
		"0 0 12 ? * 1-7":   `write names instead: SUN-SAT`,
		"*/x * * * *":      `minute field "*/x": step "x" is not a positive number: write e.g. */15`,
		"0 0 * * MON#0":    `day-of-week field "MON#0": "MON#0": d#k needs k 1-5 (MON#2 is the second Monday)`,
		"0 0 32W * *":      `day-of-month field "32W": "32W": nW needs a day 1-31 (15W is the weekday nearest the 15th)`,
		"0 0 0W * *":       `nW needs a day 1-31`,
		"0 0 0 0 0 0 0 0":  `has 8 fields: write 5`,
		"0 0 0":            `has 3 fields`,
		"0 0 * * 1,FUNDAY": `day-of-week field "1,FUNDAY"`,
		"0 0 15,L-40 * *":  `day-of-month field "15,L-40": "L-40": L-n needs n 0-30`,
		"0 0 * * FUNL":     `day-of-week field "FUNL": "FUN" is not a value`,
		"0 0 * * FUN#2":    `day-of-week field "FUN#2": "FUN" is not a value`,
		"59-0 * * * *":     `minute field "59-0": range 59-0 runs backwards: only day of week and month wrap around; write 59-59,0-0`,
		"0 0 32 * *":       `day-of-month field "32": 32 is out of range: write 1-31`,
		"0 0 * 0 *":        `month field "0": 0 is out of range: write 1-12`,
		"60 * * * *":       `minute field "60": 60 is out of range: write 0-59`,
		"0 0 * * SUN-X":    `"X" is not a value`,
		"@every 1h, daily": `@every needs a Go duration`,
	} {
		_, err := ParseSchedule(spec, time.UTC, time.Time{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSchedule(%q) = %v, want %q", spec, err, want)
		}
	}
}

func TestScheduleNoteEdges(t *testing.T) {
	t.Parallel()
	ny := "America/New_York"
	for _, tc := range []struct{ zone, spec, prev, at, want string }{
		// 02:00 does not exist, but nothing between 02:00 and 03:00 would have fired.
		{ny, "0 */3 * * *", "2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", ""},
		{ny, "15 30 2 * * *", "2026-03-07T12:00:00-05:00", "2026-03-08T03:00:00-04:00", "02:30:15 does not exist on 2026-03-08; fires at 03:00 (fixed schedule)"},
		{ny, "@every 1h", "2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", ""},
		// at is not the fire that follows prev.
		{ny, "30 2 * * *", "2026-03-07T12:00:00-05:00", "2026-03-09T02:30:00-04:00", ""},
		{ny, "30 2 * * *", "2026-03-07T12:00:00-05:00", "", ""},
		// Berlin falls back at 03:00: 02:30 occurs twice.
		{"Europe/Berlin", "*/30 * * * *", "2026-10-25T02:10:00+01:00", "2026-10-25T02:30:00+01:00", "02:30 occurs twice on 2026-10-25; this is the second (+01:00), a wildcard schedule fires at both"},
	} {
		loc := mustLoc(t, tc.zone)
		prev, _ := time.Parse(time.RFC3339, tc.prev)
		var at time.Time
		if tc.at != "" {
			at, _ = time.Parse(time.RFC3339, tc.at)
		}
		s, err := ParseSchedule(tc.spec, loc, prev)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Note(prev, at); got != tc.want {
			t.Errorf("%q in %s, fire %s after %s: note %q, want %q", tc.spec, tc.zone, tc.at, tc.prev, got, tc.want)
		}
	}
}
