package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// TestRetryBackoffRules: the retries of a task wait per its backoff: an
// exponential one of factor 3 waits 10 s, 30 s, 90 s (seed's would be 10,
// 10, 20), a fixed one 10 s each time; ax explain names the next try's
// time while the instance waits for it.
func TestRetryBackoffRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := func(context.Context, runner.Attempt) error { return errors.New("warehouse busy") }
		e := setup(t, Config{}, map[string]func(context.Context, runner.Attempt) error{"b.exp": fail, "b.fixed": fail}, `pipeline: b
timezone: UTC
schedule: "0 0 1 1 *"
defaults: {function: record}
tasks:
  - {name: exp, retry: {count: 3, interval: 10s, backoff: exponential, factor: 3}}
  - {name: fixed, retry: {count: 3, interval: 10s, backoff: fixed}}
`)
		if _, err := e.do(Trigger{Target: "b"}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Second)
		x, err := e.eng.Explain(context.Background(), "b.exp")
		ins := e.instances(store.InstanceFilter{TaskID: "b.exp"})
		if err != nil || len(ins) != 1 || ins[0].State != axtype.Retrying {
			t.Fatalf("b.exp after its first failure: %v %v", ins, err)
		}
		if want := "retrying (attempt 1 of 4 failed) for " + ins[0].NextFireAt.UTC().Format(time.RFC3339); !strings.Contains(x.Verdict, want) {
			t.Errorf("explain b.exp: %q, want %q", x.Verdict, want)
		}
		sleep(3 * time.Minute)
		for task, want := range map[string][]time.Duration{"b.exp": {10, 30, 90}, "b.fixed": {10, 10, 10}} {
			var at []time.Time
			for _, c := range e.rec.snapshot() {
				if c.task == task {
					at = append(at, c.at)
				}
			}
			if len(at) != 4 {
				t.Fatalf("%s ran %d times, want 4", task, len(at))
			}
			for i, w := range want {
				if gap := at[i+1].Sub(at[i]).Round(time.Second); gap != w*time.Second {
					t.Errorf("%s: retry %d came %s after the attempt before, want %s", task, i+1, gap, w*time.Second)
				}
			}
		}
		e.stop()
	})
}
