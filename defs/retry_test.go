package defs

import (
	"strings"
	"testing"
	"time"
)

func TestRetryField(t *testing.T) {
	t.Parallel()
	src := `pipeline: r
schedule: "@hourly"
defaults: {retry: {count: 2, interval: 1m}}
tasks:
  - {name: a, function: f}
  - {name: b, function: f, retry: {backoff: fixed, jitter: 0.1}}
  - {name: c, function: f, retry: {count: 5, interval: 10s, backoff: exponential, factor: 3, max_interval: 15m}}
`
	p, errs := Parse("r.yaml", []byte(src), Options{Now: time.Now()})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	want := map[string]Retry{
		"a": {Count: 2, Interval: time.Minute},
		"b": {Count: 2, Interval: time.Minute, Backoff: BackoffFixed, Jitter: 0.1},
		"c": {Count: 5, Interval: 10 * time.Second, Backoff: BackoffExponential, Factor: 3, MaxInterval: 15 * time.Minute},
	}
	for _, task := range p.Tasks {
		if task.Retry != want[task.Name] {
			t.Errorf("task %s retry %+v, want %+v", task.Name, task.Retry, want[task.Name])
		}
	}
	for _, tc := range []struct{ field, want string }{
		{`retry: {backoff: linear}`, `retry backoff "linear" is not a backoff: use seed (the interval twice, then doubling), fixed or exponential`},
		{`retry: {backoff: exponential, factor: 1}`, `retry factor 1 is out of range: use a number above 1 and at most 10`},
		{`retry: {backoff: exponential, factor: fast}`, `retry factor must be a number such as 2, not "fast"`},
		{`retry: {factor: 2}`, `retry factor 2 applies only to backoff: exponential (backoff is seed)`},
		{`retry: {backoff: fixed, max_interval: 1h}`, `retry max_interval has no effect with backoff: fixed`},
		{`retry: {interval: 5m, max_interval: 1m}`, `retry max_interval 1m0s is shorter than the interval 5m0s`},
		{`retry: {max_interval: 0s}`, `retry max_interval "0s" is too short`},
		{`retry: {jitter: 1.5}`, `retry jitter 1.5 is out of range: use a share of the wait from 0 to 1`},
		{`retry: {jiter: 0.5}`, `did you mean "jitter"`},
	} {
		src := "pipeline: r\nschedule: \"@hourly\"\ntasks:\n  - {name: a, function: f, " + tc.field + "}\n"
		p, errs := Parse("r.yaml", []byte(src), Options{Now: time.Now()})
		if errs.Err() == nil || !strings.Contains(errs.Err().Error(), tc.want) || !strings.Contains(errs.Err().Error(), "r.yaml:4:") {
			t.Errorf("%s: %v, want r.yaml:4:… %q", tc.field, errs.Err(), tc.want)
		}
		if p != nil && errs.Err() == nil {
			t.Errorf("%s: a pipeline came back with no error", tc.field)
		}
	}
}
