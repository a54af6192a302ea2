package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/defs"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/invalid")

// runAxLimit bounds each in-process command, so that a command that never
// ends fails its own test, by name, instead of the whole package's timeout.
const runAxLimit = 2 * time.Minute

// runAx calls the program like main does and returns exit code, stdout and stderr.
func runAx(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runAxLimit)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, args, &out, &errOut)
	if ctx.Err() != nil {
		t.Fatalf("ax %s: still running after %s (exit %d)\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), runAxLimit, code, out.String(), errOut.String())
	}
	return code, out.String(), errOut.String()
}

func TestValidateExamples(t *testing.T) {
	t.Parallel()
	code, out, errOut := runAx(t, "validate", "--strict", "../../examples")
	if code != cli.ExitOK {
		t.Fatalf("ax validate --strict examples: exit %d\n%s%s", code, out, errOut)
	}
	if out != "" {
		t.Errorf("valid examples printed problems:\n%s", out)
	}
	if !strings.Contains(errOut, "ok: 4 file(s) valid") {
		t.Errorf("summary = %q, want it to count 4 valid files", errOut)
	}
}

// TestValidateInvalidGolden checks the exact messages for every kind of
// invalid file: each testdata/invalid/X.yaml has its expected output in X.golden.
func TestValidateInvalidGolden(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil || len(files) < 15 {
		t.Fatalf("want at least 15 invalid fixtures, found %d (%v)", len(files), err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runAx(t, "validate", f)
			if code != cli.ExitFailed {
				t.Errorf("exit %d, want %d; stderr: %s", code, cli.ExitFailed, errOut)
			}
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./cmd/ax -run Golden -update to create it)", err)
			}
			if out != string(want) {
				t.Errorf("ax validate %s:\n got: %s\nwant: %s", f, out, want)
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.HasPrefix(line, f+":") {
					t.Errorf("line does not start with file:line:col: %q", line)
				}
			}
		})
	}
}

func TestValidateAllFilesInOneRun(t *testing.T) {
	t.Parallel()
	code, out, _ := runAx(t, "validate", "testdata/invalid/unknown_key.yaml", "testdata/invalid/bad_priority.yaml", "testdata/invalid/cycle.yaml")
	if code != cli.ExitFailed {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{"unknown_key.yaml:5:5", "bad_priority.yaml:5:15", "bad_priority.yaml:8:15", "cycle.yaml:6:5"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	// Sorted by file, then line.
	if strings.Index(out, "bad_priority") > strings.Index(out, "cycle.yaml") || strings.Index(out, "cycle.yaml") > strings.Index(out, "unknown_key") {
		t.Errorf("errors are not sorted by file:\n%s", out)
	}
}

// TestValidateBrokenCopy is what `make validate-dag` does to a checked-in
// pipeline directory in which someone broke a dependency.
func TestValidateBrokenCopy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	entries, err := os.ReadDir("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join("../../examples", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "orders_daily.yaml" {
			data = bytes.Replace(data, []byte("depends_on: [sync_orders]"), []byte("depends_on: [sync_order]"), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ := runAx(t, "validate", dir)
	if code != cli.ExitFailed {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	want := filepath.Join(dir, "orders_daily.yaml") + `:19:18: task "clean_orders": depends_on "sync_order": no such task (did you mean "sync_orders"?)`
	if strings.TrimSpace(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

func TestValidateUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no paths", []string{"validate"}, "requires at least 1 arg"},
		{"missing path", []string{"validate", "no/such/dir"}, "no such file or directory"},
		{"bad format", []string{"validate", "--format", "xml", "../../examples"}, `--format "xml": use text or json`},
		{"unknown flag", []string{"validate", "--strikt", "../../examples"}, "unknown flag: --strikt"},
		{"empty dir", []string{"validate", "testdata/empty"}, "no pipeline files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.name == "empty dir" {
				dir := t.TempDir()
				tc.args[1] = dir
			}
			code, _, errOut := runAx(t, tc.args...)
			if code != cli.ExitUsage {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr %q lacks %q", errOut, tc.want)
			}
		})
	}
}

func TestValidateJSON(t *testing.T) {
	t.Parallel()
	code, out, _ := runAx(t, "validate", "--format", "json", "testdata/invalid/unknown_dependency.yaml", "../../examples")
	if code != cli.ExitFailed {
		t.Fatalf("exit %d, want 1", code)
	}
	var r cli.ValidateReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if r.Valid || len(r.Errors) != 1 || len(r.Files) != 5 {
		t.Fatalf("report = %+v, want invalid with 1 error over 5 files", r)
	}
	e := r.Errors[0]
	if e.File != "testdata/invalid/unknown_dependency.yaml" || e.Line != 7 || e.Col != 18 || e.Task != "clean" || e.Severity != defs.SevError ||
		e.Msg != `depends_on "synk": no such task (did you mean "sync"?)` {
		t.Errorf("error = %+v", e)
	}
}

func TestValidateStrictFailsOnWarnings(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "inverted.yaml")
	src := "pipeline: inv\nschedule: \"@daily\"\ntasks:\n  - name: up\n    priority: 5\n    function: noop\n  - name: down\n    depends_on: [up]\n    priority: 1\n    function: noop\n"
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runAx(t, "validate", f); code != cli.ExitOK || !strings.Contains(out, "warning: task \"down\": priority inversion") {
		t.Errorf("without --strict: exit %d, out %q; want 0 and the warning", code, out)
	}
	if code, _, _ := runAx(t, "validate", "--strict", f); code != cli.ExitFailed {
		t.Errorf("with --strict: exit %d, want 1", code)
	}
}

func TestGraphDOTAndLayers(t *testing.T) {
	t.Parallel()
	code, out, errOut := runAx(t, "graph", "--format", "layers", "../../examples/events_hourly.yaml")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "pipeline events_hourly (UTC, schedule \"0 5 * * * *\")\nlayer 0: extract\nlayer 1: transform_clicks, transform_sessions, transform_views\nlayer 2: load\n"
	if out != want {
		t.Errorf("layers:\n%s\nwant:\n%s", out, want)
	}
	code, out, _ = runAx(t, "graph", "../../examples/orders_daily.yaml")
	if code != cli.ExitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{`digraph "orders_daily" {`, `"billing_daily.settle" [style=dashed];`, `"sync_orders" -> "clean_orders";`, `"report" -> "approve_publish";`} {
		if !strings.Contains(out, want) {
			t.Errorf("DOT lacks %s:\n%s", want, out)
		}
	}
	// Deterministic output.
	_, again, _ := runAx(t, "graph", "../../examples/orders_daily.yaml")
	if again != out {
		t.Error("DOT output differs between two runs")
	}
}

func TestNext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"pipeline schedule", []string{"next", "../../examples/orders_daily.yaml", "-n", "2", "--from", "2026-02-28T00:00:00Z"},
			"2026-03-01T02:00:00+08:00\n2026-03-02T02:00:00+08:00\n"},
		{"task with delay", []string{"next", "../../examples/orders_daily.yaml", "report", "-n", "1", "--from", "2026-02-28T00:00:00Z"},
			"2026-03-01T02:10:00+08:00\n"},
		{"task crons merged", []string{"next", "../../examples/maintenance.yaml", "-n", "3", "--from", "2026-03-28T23:59:00+01:00"},
			"2026-03-28T23:59:30+01:00 heartbeat\n2026-03-29T00:00:00+01:00 compact_cache\n2026-03-29T00:00:00+01:00 heartbeat\n"},
		{"downstream of a task cron", []string{"next", "../../examples/maintenance.yaml", "verify_cache", "-n", "1", "--from", "2026-03-29T00:00:00+01:00"},
			"2026-03-29T06:01:00+02:00\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runAx(t, tc.args...)
			if code != cli.ExitOK || out != tc.want {
				t.Errorf("exit %d, out:\n%s\nwant:\n%s\nstderr: %s", code, out, tc.want, errOut)
			}
		})
	}
	code, _, errOut := runAx(t, "next", "../../examples/orders_daily.yaml", "reprot")
	if code != cli.ExitFailed || !strings.Contains(errOut, `no task "reprot" (did you mean "report"?)`) {
		t.Errorf("unknown task: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runAx(t, "next", "../../examples/orders_daily.yaml", "--from", "yesterday")
	if code != cli.ExitUsage || !strings.Contains(errOut, "RFC 3339") {
		t.Errorf("bad --from: exit %d, stderr %q", code, errOut)
	}
}

// TestNextBoundedAndInterruptible: ax next refuses a count past cli.MaxNext
// before computing any (a typo in -n filled 9.7 GB and ignored SIGTERM), and
// stops when its context ends (Ctrl-C) instead of finishing the list.
func TestNextBoundedAndInterruptible(t *testing.T) {
	t.Parallel()
	file := "../../examples/orders_daily.yaml"
	code, out, errOut := runAx(t, "next", file, "-n", "100001", "--from", "2026-02-28T00:00:00Z")
	if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, "-n 100001: give a count from 1 to 100000") {
		t.Errorf("-n 100001: exit %d, %d bytes out, stderr %q; want usage error naming the bound, nothing printed", code, len(out), errOut)
	}
	code, out, errOut = runAx(t, "next", file, "-n", "0")
	if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, "-n 0: give a count from 1 to 100000") {
		t.Errorf("-n 0: exit %d, out %q, stderr %q", code, out, errOut)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // as if Ctrl-C came before the first fire was computed
	var stdout, stderr bytes.Buffer
	code = run(ctx, []string{"next", file, "-n", "100000", "--from", "2026-02-28T00:00:00Z"}, &stdout, &stderr)
	if code != cli.ExitFailed || stdout.Len() != 0 || !strings.Contains(stderr.String(), "interrupted after 0 of 100000 fire times") {
		t.Errorf("interrupted: exit %d, %d bytes out, stderr %q; want exit 1, nothing printed, the interruption named", code, stdout.Len(), stderr.String())
	}
}

// TestSchema checks that the JSON Schema accepts every example and rejects
// the invalid fixtures that a schema can catch.
func TestSchema(t *testing.T) {
	t.Parallel()
	code, out, _ := runAx(t, "schema")
	if code != cli.ExitOK {
		t.Fatalf("exit %d", code)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("schema does not compile: %v", err)
	}
	examples, _ := filepath.Glob("../../examples/*.yaml")
	if len(examples) == 0 {
		t.Fatal("no examples found")
	}
	for _, f := range examples {
		if err := sch.Validate(yamlAsJSON(t, f)); err != nil {
			t.Errorf("schema rejects example %s: %v", f, err)
		}
	}
	// Fixtures whose fault lies in the shape of the file; the others (cycles,
	// unknown dependencies, cron semantics, zones) need ax validate.
	for _, name := range []string{"unknown_key", "bad_priority", "bad_duration", "no_executor", "two_executors",
		"negative_retry", "cron_with_depends_on", "missing_name", "bad_policy", "bad_url", "many_errors", "bad_env", "bad_outputs", "bad_params"} {
		f := "testdata/invalid/" + name + ".yaml"
		if err := sch.Validate(yamlAsJSON(t, f)); err == nil {
			t.Errorf("schema accepts invalid fixture %s", f)
		}
	}
}

// yamlAsJSON reads a YAML file into the generic values a JSON Schema validates.
func yamlAsJSON(t *testing.T, file string) any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestNextPrintsDSTRule: on DST days ax next says which rule it applied.
func TestNextPrintsDSTRule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "dst.yaml")
	src := "pipeline: dst\ntimezone: America/New_York\ntasks:\n" +
		"  - {name: fixed, cron: \"30 2 * * *\", function: noop}\n" +
		"  - {name: sync, cron: \"*/30 * * * *\", function: noop}\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runAx(t, "next", file, "fixed", "-n", "2", "--from", "2026-03-07T12:00:00-05:00")
	want := "2026-03-08T03:00:00-04:00  # 02:30 does not exist on 2026-03-08; fires at 03:00 (fixed schedule)\n" +
		"2026-03-09T02:30:00-04:00\n"
	if code != cli.ExitOK || out != want {
		t.Errorf("fixed: exit %d, out:\n%s\nwant:\n%s\nstderr: %s", code, out, want, errOut)
	}
	code, out, errOut = runAx(t, "next", file, "sync", "-n", "3", "--from", "2026-11-01T01:20:00-04:00")
	want = "2026-11-01T01:30:00-04:00  # 01:30 occurs twice on 2026-11-01; this is the first (-04:00), a wildcard schedule fires at both\n" +
		"2026-11-01T01:00:00-05:00  # 01:00 occurs twice on 2026-11-01; this is the second (-05:00), a wildcard schedule fires at both\n" +
		"2026-11-01T01:30:00-05:00  # 01:30 occurs twice on 2026-11-01; this is the second (-05:00), a wildcard schedule fires at both\n"
	if code != cli.ExitOK || out != want {
		t.Errorf("wildcard: exit %d, out:\n%s\nwant:\n%s\nstderr: %s", code, out, want, errOut)
	}
}

// TestValidateReportsEveryBadCron: one run of ax validate names every bad
// expression, each with its field and the fix.
func TestValidateReportsEveryBadCron(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "crons.yaml")
	src := "pipeline: crons\ntimezone: UTC\ntasks:\n" +
		"  - {name: quartz, cron: \"0 0 12 ? * 2-6\", function: noop}\n" +
		"  - {name: midnight, cron: \"0 24 * * *\", function: noop}\n" +
		"  - {name: hashed, cron: \"H 3 * * *\", function: noop}\n" +
		"  - {name: sixth, cron: \"0 0 * * MON#6\", function: noop}\n" +
		"  - {name: year, cron: \"0 0 12 * * ? 2026\", function: noop}\n" +
		"  - {name: two, cron: \"61 25 * * *\", function: noop}\n" +
		"  - {name: fine, cron: \"0 0 L * FRI-MON\", function: noop}\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runAx(t, "validate", file)
	if code == cli.ExitOK {
		t.Fatalf("ax validate accepted bad crons")
	}
	errOut = out + errOut
	for _, want := range [][]string{
		{`:4:`, `task "quartz"`, `day-of-week field "2-6"`, "Sunday is 1", "MON-FRI"},
		{`:5:`, `task "midnight"`, `hour field "24"`, "write 0 for midnight"},
		{`:6:`, `task "hashed"`, `minute field "H"`, "write the value"},
		{`:7:`, `task "sixth"`, `day-of-week field "MON#6"`, "k 1-5"},
		{`:8:`, `task "year"`, "year field is not supported", "remove it"},
		{`:9:`, `task "two"`, `minute field "61"`, "write 0-59", `hour field "25"`, "write 0-23"},
	} {
		found := false
		for line := range strings.SplitSeq(errOut, "\n") {
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(line, w)
			}
			found = found || ok
		}
		if !found {
			t.Errorf("no line with all of %q in:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, `"fine"`) {
		t.Errorf("the valid cron was reported:\n%s", errOut)
	}
}

// TestStoreReadsCreateNoStore: ax status --store (or history) at a path
// with no store said "never started" and left a new 274 KB store there.
func TestStoreReadsCreateNoStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.db")
	for _, args := range [][]string{
		{"status", "--store", typo},
		{"history", "--store", typo, "p.t"},
		{"pause", "--store", typo, "p.t"},
	} {
		code, _, errOut := runAx(t, args...)
		if code == cli.ExitOK || !strings.Contains(errOut, "no such file") || !strings.Contains(errOut, typo) {
			t.Errorf("ax %s: exit %d, stderr %q; want a failure naming the missing store", strings.Join(args, " "), code, errOut)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("ax %s created %v", strings.Join(args, " "), entries)
		}
	}
}

// TestLimitsRefusesNonFiniteRates: JSON cannot carry NaN or ±Inf, so ax
// limits --global NaN failed with "json: unsupported value: NaN", naming
// no flag. It is a usage error naming the flag, refused before any request.
func TestLimitsRefusesNonFiniteRates(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--global", "NaN"},
		{"--global", "+Inf"},
		{"--group", "etl=NaN"},
		{"--group", "etl=-Inf"},
	} {
		code, _, errOut := runAx(t, append([]string{"limits", "--server", "http://127.0.0.1:1"}, args...)...)
		if code != cli.ExitUsage || !strings.Contains(errOut, args[0]+" ") || !strings.Contains(errOut, "give a rate per second") {
			t.Errorf("ax limits %s: exit %d, stderr %q; want a usage error naming %s", strings.Join(args, " "), code, errOut, args[0])
		}
	}
}

// TestValidateKnowsWhatTheServerRuns: ax validate --strict refuses what ax
// server would refuse to start with: a function this binary does not
// register, and a name longer than the store's column; a file with neither
// passes.
func TestValidateKnowsWhatTheServerRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, src string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	fn := write("fn.yaml", "pipeline: fn\ntasks:\n  - name: load\n    function: load_to_warehouse\n")
	long := write("long.yaml", "pipeline: p"+strings.Repeat("x", 200)+"\ntasks:\n  - name: a\n    function: noop\n")
	code, out, _ := runAx(t, "validate", "--strict", fn, long)
	if code != cli.ExitFailed {
		t.Errorf("exit %d, want %d", code, cli.ExitFailed)
	}
	for _, want := range []string{
		fn + `:4:15: task "load": function "load_to_warehouse" is not registered in this ax binary (did you mean "load_warehouse"?)`,
		long + `:1:11: pipeline "pxxxxxxxxxxxxxxxxxxx…" is 201 characters long: use at most 128`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	// ax diff refuses it before asking a server (none answers here).
	code, _, errOut := runAx(t, "diff", "--server", "http://127.0.0.1:1", fn)
	if code != cli.ExitFailed || !strings.Contains(errOut, `function "load_to_warehouse" is not registered`) {
		t.Errorf("ax diff: exit %d, want %d and the function named:\n%s", code, cli.ExitFailed, errOut)
	}
}

// TestValidateStrictManualOnly: a pipeline an operator triggers (no
// schedule, or `schedule: none`) passes ax validate --strict, which is what
// make validate-dag runs in CI.
func TestValidateStrictManualOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, src := range map[string]string{
		"absent.yaml": "pipeline: absent\ntasks:\n  - {name: a, function: noop}\n  - {name: b, depends_on: [a], function: noop}\n",
		"none.yaml":   "pipeline: none_given\nschedule: none\ntasks:\n  - {name: a, command: [\"true\"]}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runAx(t, "validate", "--strict", dir)
	if code != cli.ExitOK || out != "" || !strings.Contains(errOut, "ok: 2 file(s) valid, 0 warning(s)") {
		t.Errorf("exit %d, want 0 with nothing reported:\n%s%s", code, out, errOut)
	}
}

// TestValidateEveryErrorInOnePass: every error of every file is printed by
// the first run, so that fixing the printed ones never reveals another: a
// bad pipeline name does not hide its tasks' errors, a bad task name or a
// second executor does not hide the task's other fields, one bad command
// argument does not hide the next, one bad action of an argument does not
// hide the next, and a cycle does not hide a task reachable from two
// schedules in another file.
func TestValidateEveryErrorInOnePass(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	one := filepath.Join(dir, "one.yaml")
	two := filepath.Join(dir, "two.yaml")
	src := `pipeline: one.pass
schedule: "@daily"
tasks:
  - name: a
    depends_on: [b]
    command: ["echo", "{{ .Bad", "{{ .LogicalTime.Fromat \"x\" }}"]
  - name: b
    depends_on: [a]
    function: noop
  - name: bad.name
    depends_on: [nosuch]
    function: nope_fn
  - name: c
    cron: "bad cron"
    depends_on: [b]
    function: lod_warehouse
    command: ["{{ .Tsk }}"]
  - name: d
    command: ["sh", "-c", "{{ .Parms.x }} {{ .Params.regoin }} {{ .LogicalTime.AddDay 1 }}"]
    params: {region: cn}
`
	if err := os.WriteFile(one, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(two, []byte("pipeline: two\nschedule: \"@daily\"\ntasks:\n  - {name: x, cron: \"@hourly\", function: noop}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runAx(t, "validate", one, two)
	if code != cli.ExitFailed {
		t.Errorf("exit %d, want %d", code, cli.ExitFailed)
	}
	for _, want := range [][]string{
		{one + ":1:11:", `pipeline "one.pass" is not a valid name`},
		{one + ":4:5:", `task "a": dependency cycle`},
		{one + ":6:23:", `task "a": command argument 1 is not a valid template`},
		{one + ":6:34:", `task "a": command argument 2 cannot be expanded`, `"Fromat"`, `did you mean "Format"?`},
		{one + ":10:11:", `task name "bad.name" is not a valid name`},
		{one + ":11:18:", `depends_on "nosuch": no such task`},
		{one + ":12:15:", `function "nope_fn" is not registered`},
		{one + ":14:11:", `task "c": cron cannot parse "bad cron"`},
		{one + ":14:11:", `task "c": has both cron and depends_on`},
		{one + ":16:15:", `task "c": function "lod_warehouse" is not registered`, `did you mean "load_warehouse"?`},
		{one + ":17:5:", `task "c": has 2 executors`},
		{one + ":17:15:", `task "c": command argument 0 cannot be expanded`, `"Tsk"`, `did you mean "Task"?`},
		{one + ":19:27:", `task "d": command argument 2 cannot be expanded`, `"Parms"`, `did you mean "Params"?`},
		{one + ":19:27:", `task "d": command argument 2 cannot be expanded`, `param "regoin"`, `did you mean "region"?`},
		{one + ":19:27:", `task "d": command argument 2 cannot be expanded`, `"AddDay"`, `did you mean "AddDays"?`},
		{two + ":4:5:", `task "x": is reachable from 2 schedules`},
	} {
		found := false
		for line := range strings.SplitSeq(out, "\n") {
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(line, w)
			}
			found = found || ok
		}
		if !found {
			t.Errorf("no line with all of %q in:\n%s", want, out)
		}
	}
}

// TestCIRunsValidateDag: the project's CI validates its own pipelines the
// way it tells users to (make validate-dag, warnings fail too), on
// examples/, before the tests.
func TestCIRunsValidateDag(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	var validate, test int
	for i, line := range strings.Split(string(data), "\n") {
		switch strings.TrimSpace(line) {
		case "make validate-dag PIPELINES=examples":
			validate = i + 1
		case "make test":
			test = i + 1
		}
	}
	if validate == 0 || test == 0 || validate > test {
		t.Errorf(".ci/run: `make validate-dag PIPELINES=examples` at line %d, `make test` at line %d: want the first before the second", validate, test)
	}
}

// TestValidateNamesTheZones: a valid set of files is summed up with the
// zone each pipeline schedules in, marking those that name none (and so
// take the default, Asia/Shanghai).
func TestValidateNamesTheZones(t *testing.T) {
	t.Parallel()
	code, _, errOut := runAx(t, "validate", "../../examples")
	want := "zones: Asia/Shanghai (billing_daily*, orders_daily), Europe/Berlin (maintenance), UTC (events_hourly); " +
		"* names no timezone: Asia/Shanghai is the default (write timezone: in the file to change it)\n"
	if code != cli.ExitOK || !strings.HasSuffix(errOut, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant it to end with:\n%s", code, errOut, want)
	}
}
