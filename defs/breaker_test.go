package defs

import (
	"strings"
	"testing"
	"time"
)

func TestBreakerField(t *testing.T) {
	t.Parallel()
	src := `pipeline: b
schedule: "@hourly"
defaults: {breaker: {window: 10m, ratio: 0.25}}
tasks:
  - {name: a, function: f}
  - {name: b, function: f, breaker: {min_outcomes: 3}}
  - {name: c, function: f, breaker: {window: 1m, min_outcomes: 2, ratio: 0.9}}
`
	p, errs := Parse("b.yaml", []byte(src), Options{Now: time.Now()})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	want := map[string]Breaker{
		"a": {Window: 10 * time.Minute, Ratio: 0.25},
		"b": {Window: 10 * time.Minute, MinOutcomes: 3, Ratio: 0.25},
		"c": {Window: time.Minute, MinOutcomes: 2, Ratio: 0.9},
	}
	for _, task := range p.Tasks {
		if task.Breaker != want[task.Name] {
			t.Errorf("task %s breaker %+v, want %+v", task.Name, task.Breaker, want[task.Name])
		}
	}
	for _, tc := range []struct{ field, want string }{
		{`breaker: 5m`, `breaker must be a mapping such as {window: 5m, min_outcomes: 10, ratio: 0.5}, not a`},
		{`breaker: {window: 5s}`, `breaker window "5s" is too short: use at least "10s"`},
		{`breaker: {min_outcomes: 0}`, `breaker min_outcomes 0 is out of range: use 1 to 10000`},
		{`breaker: {ratio: 1.5}`, `breaker ratio 1.5 is out of range: use a failure ratio above 0 and below 1`},
		{`breaker: {ratio: half}`, `breaker ratio must be a number such as 0.5, not "half"`},
		{`breaker: {ratoi: 0.5}`, `ratoi`},
	} {
		src := "pipeline: b\nschedule: \"@hourly\"\ntasks:\n  - {name: a, function: f, " + tc.field + "}\n"
		_, errs := Parse("b.yaml", []byte(src), Options{Now: time.Now()})
		if errs.Err() == nil || !strings.Contains(errs.Err().Error(), tc.want) || !strings.Contains(errs.Err().Error(), "b.yaml:4:") {
			t.Errorf("%s: %v, want b.yaml:4:… %q", tc.field, errs.Err(), tc.want)
		}
	}
}
