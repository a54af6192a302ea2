package defs

import (
	"strings"
	"testing"
)

const typedParams = `pipeline: load
timezone: UTC
schedule: "0 6 * * *"
params:
  region: {type: enum, values: [cn, us, eu], default: cn, description: the warehouse region}
  batch: {type: int, default: 5000}
  full: {type: bool, default: false}
  day: {type: date, default: "2026-12-01"}
  note: {type: string, default: ""}
tasks:
  - name: a
    command: ["sh", "-c", "load {{ .Params.region }} {{ .Params.batch }}{{ if .Params.full }} --full{{ end }}"]
  - name: b
    depends_on: [a]
    params: {own: x}
    function: noop
`

func TestPipelineParamsParsed(t *testing.T) {
	t.Parallel()
	p, errs := parseString(t, typedParams)
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	if len(p.Params) != 5 || p.Param("region").Type != ParamEnum || p.Param("region").Description != "the warehouse region" ||
		p.Param("batch").Default != int64(5000) || p.Param("full").Default != false || p.Param("day").Default != "2026-12-01" {
		t.Errorf("params = %+v", p.Params)
	}
	if b := p.Task("b").Params; b["own"] != "x" || b["region"] != "cn" || len(b) != 6 {
		t.Errorf("task b params = %v", b)
	}
	typed := p.TypedParams(map[string]any{"full": "true", "batch": "7", "region": "us"})
	if typed["full"] != true || typed["batch"] != int64(7) || typed["region"] != "us" {
		t.Errorf("typed = %#v", typed)
	}
}

func TestCheckGivenParams(t *testing.T) {
	t.Parallel()
	p, _ := parseString(t, typedParams)
	a := []*Task{p.Task("a")}
	for given, want := range map[string]string{
		"region=us":       "",
		"batch=12":        "",
		"full=true":       "",
		"day=2026-02-28":  "",
		"region=jp":       `param "region" is one of cn, us, eu: "jp" is not`,
		"region=cm":       `(did you mean "cn"?)`,
		"batch=12x":       `param "batch" is an int: "12x" is not a whole number`,
		"full=yes":        `param "full" is a bool: give true or false, not "yes"`,
		"day=2026-02-30":  `param "day" is a date: give YYYY-MM-DD`,
		"regoin=cn":       `param "regoin": no task run declares it (did you mean "region"?)`,
		"own=y":           `param "own": no task run declares it`, // b's, not in a run of a alone
		"note=a; touch x": "",
	} {
		k, v, _ := strings.Cut(given, "=")
		err := CheckGiven(p, a, map[string]string{k: v})
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", given, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: got %v, want %q", given, err, want)
		}
	}
	if err := CheckGiven(p, []*Task{p.Task("a"), p.Task("b")}, map[string]string{"own": "y"}); err != nil {
		t.Errorf("own with b in the run: %v", err)
	}
}

func TestPipelineParamsBadInput(t *testing.T) {
	t.Parallel()
	head := "pipeline: p\ntimezone: UTC\n"
	tail := "tasks:\n  - name: a\n    command: [\"true\"]\n"
	for src, want := range map[string]string{
		"params: [a]\n": "p.yaml:3:9: params must be a mapping",
		"params:\n  n: {type: int, default: x}\n":                  `p.yaml:4:27: param "n": default "x" is not of type int`,
		"params:\n  n: {type: integer, default: 1}\n":              `p.yaml:4:13: param "n": type "integer" is not a param type: use string, int, bool, date, enum`,
		"params:\n  n: {default: 1}\n":                             `p.yaml:4:6: param "n" has no type`,
		"params:\n  n: {type: int}\n":                              `p.yaml:4:6: param "n" has no default`,
		"params:\n  e: {type: enum, default: a}\n":                 `p.yaml:4:6: param "e" is an enum: list its values`,
		"params:\n  e: {type: enum, values: [a], default: b}\n":    `param "e" is one of a: "b" is not`,
		"params:\n  d: {type: date, default: 2026-13-01}\n":        `default: param "d" is a date`,
		"params:\n  s: {type: string, default: 5}\n":               `param "s": default 5 is not a string`,
		"params:\n  s: {type: string, default: a, valeus: [a]}\n":  `unknown key "valeus" (did you mean "values"?)`,
		"params:\n  b: {type: bool, default: true, values: [a]}\n": `values apply to an enum param`,
		"disabled: yes please\n":                                   "p.yaml:3:11: disabled must be true or false",
	} {
		_, errs := parseString(t, head+src+tail)
		if !strings.Contains(errs.Error(), want) {
			t.Errorf("%q: got\n%v\nwant %q", src, errs, want)
		}
	}
	_, errs := parseString(t, head+"params:\n  region: {type: string, default: cn}\ntasks:\n  - name: a\n    params: {region: us}\n    command: [\"true\"]\n")
	if !strings.Contains(errs.Error(), `p.yaml:6:5: task "a": param "region" is declared by the pipeline (line 4) and by the task`) {
		t.Errorf("shadowed: %v", errs)
	}
	_, errs = parseString(t, head+"tasks:\n  - name: a\n    params: {blob: \""+strings.Repeat("x", MaxEnvEntry)+"\"}\n    command: [\"true\"]\n")
	if !strings.Contains(errs.Error(), `p.yaml:5:20: task "a": param "blob" is 131071 bytes: a command's environment takes at most 131071`) {
		t.Errorf("oversized: %v", errs)
	}
}

func TestDisabled(t *testing.T) {
	t.Parallel()
	p, errs := parseString(t, "pipeline: p\ntimezone: UTC\ndisabled: true\nschedule: \"@daily\"\ntasks:\n  - name: a\n    command: [\"true\"]\n  - name: c\n    cron: \"@hourly\"\n    disabled: true\n    command: [\"true\"]\n")
	if len(errs) != 0 || !p.Disabled || !p.Task("c").Disabled || p.Task("a").Disabled {
		t.Fatalf("disabled: %v %+v", errs, p)
	}
	if why := DisabledReason(p, nil); !strings.Contains(why, "pipeline p is disabled (disabled: true in p.yaml)") {
		t.Errorf("reason %q", why)
	}
	_, errs = parseString(t, "pipeline: p\ntimezone: UTC\ntasks:\n  - name: a\n    disabled: true\n    command: [\"true\"]\n")
	if !strings.Contains(errs.Error(), `p.yaml:5:15: task "a": disabled applies to a task with its own cron`) {
		t.Errorf("disabled without cron: %v", errs)
	}
	_, errs = parseString(t, "pipeline: p\ntimezone: UTC\ndefaults: {disabled: true}\ntasks:\n  - name: a\n    command: [\"true\"]\n")
	if !strings.Contains(errs.Error(), `defaults: "disabled" cannot have a default`) {
		t.Errorf("disabled default: %v", errs)
	}
}

// Two params that would reach a command as one environment variable are
// refused, at the second one, naming both.
func TestParamEnvNameClashes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ params, want string }{
		{"params:\n  r: {type: string, default: x}\n  R: {type: string, default: y}\n",
			`p.yaml:5:3: param "R" and param "r" (line 4) both reach a command as AX_PARAM_R: rename one`},
		{"params:\n  a-b: {type: string, default: x}\n  a_b: {type: string, default: y}\n",
			`p.yaml:5:3: param "a_b" and param "a-b" (line 4) both reach a command as AX_PARAM_A_B: rename one`},
		{"tasks:\n  - name: t\n    params: {Region: x, region: y}\n    command: [\"true\"]\n",
			`p.yaml:5:25: task "t": param "region" and param "Region" (line 5) both reach a command as AX_PARAM_REGION: rename one`},
	} {
		src := "pipeline: q\ntimezone: UTC\n" + c.params
		if !strings.HasPrefix(c.params, "tasks:") {
			src += "tasks:\n  - name: t\n    command: [\"true\"]\n"
		}
		_, errs := parseString(t, src)
		if !strings.Contains(errs.Error(), c.want) {
			t.Errorf("%s: errors = %v\nwant %s", c.params, errs, c.want)
		}
	}
	if got := ParamEnvName("region-id"); got != "AX_PARAM_REGION_ID" {
		t.Errorf("ParamEnvName(region-id) = %q", got)
	}
}

// A task's own param names follow the same shape as the pipeline's.
func TestTaskParamNameShape(t *testing.T) {
	t.Parallel()
	_, errs := parseString(t, "pipeline: q\ntimezone: UTC\ntasks:\n  - name: t\n    params: {ö: 1}\n    command: [\"true\"]\n")
	want := `p.yaml:5:14: task "t": param name "ö": use letters, digits, _ and -, starting with a letter or _`
	if !strings.Contains(errs.Error(), want) {
		t.Fatalf("errors = %v\nwant %s", errs, want)
	}
}
