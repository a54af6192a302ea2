package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// compile builds a graph from pipeline sources, as setup does.
func compile(t *testing.T, srcs ...string) *dag.Graph {
	t.Helper()
	var pls []*defs.Pipeline
	for i, src := range srcs {
		p, errs := defs.Parse(fmt.Sprintf("p%d.yaml", i), []byte(src), defs.Options{Now: time.Now()})
		if errs.Err() != nil {
			t.Fatalf("parse: %v", errs)
		}
		pls = append(pls, p)
	}
	g, errs := dag.Compile(pls, dag.Options{Now: time.Now(), DispatchRate: -1})
	if errs.Err() != nil {
		t.Fatalf("compile: %v", errs)
	}
	return g
}

// fires lists the executions of task as offsets of their logical times from start.
func fires(calls []call, task string, start time.Time) []string {
	var out []string
	for _, c := range calls {
		if c.task == task {
			out = append(out, c.logical.Sub(start).String())
		}
	}
	return out
}

const reloadP = `pipeline: p
timezone: UTC
schedule: "@every 10s"
defaults: {function: record}
tasks:
  - {name: a}
`

// TestReloadAddsAndReplans: a reload adds a pipeline, which fires from the
// moment of the reload, and changes another's schedule, which is planned
// again from then on: no fire of the old plan runs after the reload, even
// those whose runs were created ahead in the window.
func TestReloadAddsAndReplans(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, reloadP)
		sleep(15 * time.Second) // p.a fired at +10s; runs exist ahead to +5m
		slow := strings.Replace(reloadP, "@every 10s", "@every 20s", 1)
		added := "pipeline: q\ntimezone: UTC\nschedule: \"@every 10s\"\ndefaults: {function: record}\ntasks:\n  - {name: x}\n"
		d, err := e.eng.Reload(compile(t, slow, added))
		if err != nil {
			t.Fatal(err)
		}
		if got := d.String(); got != "added q.x; schedules re-planned p, q" {
			t.Errorf("diff = %q", got)
		}
		sleep(45 * time.Second) // to +60s
		e.stop()
		calls := e.rec.snapshot()
		// p: +10s under the old plan; then every 20 s from the reload at +15s.
		if got, want := fires(calls, "p.a", start), []string{"10s", "35s", "55s"}; !slices.Equal(got, want) {
			t.Errorf("p.a fired at %v, want %v", got, want)
		}
		if got, want := fires(calls, "q.x", start), []string{"25s", "35s", "45s", "55s"}; !slices.Equal(got, want) {
			t.Errorf("q.x fired at %v, want %v", got, want)
		}
		// Nothing of the old plan is left waiting in the store.
		for _, in := range e.instances(store.InstanceFilter{TaskID: "p.a"}) {
			off := in.LogicalTime.Sub(start)
			if off%(20*time.Second) != 15*time.Second && off != 10*time.Second {
				t.Errorf("p.a has an instance for +%s (%s), a fire of the old plan", off, in.State)
			}
		}
		acts := e.actions("reload")
		if len(acts) != 1 || acts[0].Reason != "added q.x; schedules re-planned p, q" || !strings.Contains(acts[0].Detail, `"added":["q.x"]`) {
			t.Errorf("reload actions = %+v", acts)
		}
		if e.eng.Graph().Pipeline("q") == nil {
			t.Error("Graph() does not have the reloaded pipeline q")
		}
	})
}

// TestReloadRemovesWhileRunning: a pipeline removed while its task runs
// stops firing at once; the running attempt is still tracked and its result
// recorded; the runs it had planned ahead are gone.
func TestReloadRemovesWhileRunning(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fns := map[string]func(context.Context, runner.Attempt) error{
			"p.a": func(ctx context.Context, a runner.Attempt) error {
				select {
				case <-time.After(8 * time.Second):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			},
		}
		other := "pipeline: q\ntimezone: UTC\nschedule: \"@every 10s\"\ndefaults: {function: record}\ntasks:\n  - {name: x}\n"
		e := setup(t, Config{}, fns, reloadP, other)
		sleep(12 * time.Second) // p.a@10s runs until +18s
		d, err := e.eng.Reload(compile(t, other))
		if err != nil {
			t.Fatal(err)
		}
		if got := d.String(); got != "removed p.a; schedules re-planned p" {
			t.Errorf("diff = %q", got)
		}
		sleep(40 * time.Second) // to +52s
		e.stop()
		calls := e.rec.snapshot()
		if got := fires(calls, "p.a", start); !slices.Equal(got, []string{"10s"}) {
			t.Errorf("p.a fired at %v after its removal at +12s, want only 10s", got)
		}
		if got, want := fires(calls, "q.x", start), []string{"10s", "20s", "30s", "40s", "50s"}; !slices.Equal(got, want) {
			t.Errorf("q.x fired at %v, want %v (untouched by the reload)", got, want)
		}
		ins := e.instances(store.InstanceFilter{TaskID: "p.a"})
		if len(ins) != 1 || ins[0].State != axtype.Success || ins[0].LogicalTime.Sub(start) != 10*time.Second {
			var got []string
			for _, in := range ins {
				got = append(got, fmt.Sprintf("+%s %s", in.LogicalTime.Sub(start), in.State))
			}
			t.Errorf("p.a instances = %v, want only +10s SUCCESS (the running one recorded, the planned ones dropped)", got)
		}
	})
}

// TestReloadRefusedChangesNothing: a set with a task that cannot run here is
// refused as a whole, and the running set goes on as before.
func TestReloadRefusedChangesNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, reloadP)
		before := e.eng.Graph()
		sleep(5 * time.Second)
		broken := "pipeline: q\ntimezone: UTC\nschedule: \"@every 10s\"\ntasks:\n  - {name: x, function: no_such_function}\n"
		_, err := e.eng.Reload(compile(t, reloadP, broken))
		if err == nil || !strings.Contains(err.Error(), `task q.x: function "no_such_function" is not registered`) || !strings.Contains(err.Error(), "the running pipelines stay") {
			t.Fatalf("Reload = %v, want a refusal naming q.x", err)
		}
		sleep(20 * time.Second)
		e.stop()
		if e.eng.Graph() != before {
			t.Error("a refused reload replaced the graph")
		}
		if got, want := fires(e.rec.snapshot(), "p.a", start), []string{"10s", "20s"}; !slices.Equal(got, want) {
			t.Errorf("p.a fired at %v, want %v", got, want)
		}
		if acts := e.actions("reload"); len(acts) != 0 {
			t.Errorf("a refused reload wrote actions: %+v", acts)
		}
	})
}

// TestReloadRemovesClaimedAhead: an attempt claimed ahead for a fire time
// still to come never starts once its task is removed; it fails with the
// reason instead of waiting for ever.
func TestReloadRemovesClaimedAhead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		other := "pipeline: q\ntimezone: UTC\nschedule: \"@every 10s\"\ndefaults: {function: record}\ntasks:\n  - {name: x}\n"
		e := setup(t, Config{}, nil, reloadP, other)
		sleep(19*time.Second + 500*time.Millisecond) // p.a@20s is claimed ahead (RUNNING, not started)
		held := e.instances(store.InstanceFilter{TaskID: "p.a", States: []axtype.State{axtype.Running}})
		if len(held) != 1 || held[0].LogicalTime.Sub(start) != 20*time.Second {
			t.Fatalf("claimed ahead before the reload: %+v", held)
		}
		if _, err := e.eng.Reload(compile(t, other)); err != nil {
			t.Fatal(err)
		}
		sleep(10 * time.Second)
		e.stop()
		if got := fires(e.rec.snapshot(), "p.a", start); !slices.Equal(got, []string{"10s"}) {
			t.Errorf("p.a ran at %v, want only 10s", got)
		}
		in, err := e.st.Instance(context.Background(), held[0].ID)
		if err != nil || in.State != axtype.Failed || !strings.Contains(in.Error, "removed from the pipeline files by a reload") {
			t.Errorf("the claimed-ahead instance: %s %q %v, want FAILED naming the reload", in.State, in.Error, err)
		}
	})
}

// TestReloadRemovedPipelineRunsEnd: a pipeline removed while a manual run
// of it is under way leaves no instance behind that nothing will ever move:
// its running attempt finishes and is recorded but, failing, is not retried
// (its task is gone, as after a restart); what had not started (waiting on
// that upstream, retrying after a failure) fails with the reason, so the
// run ends. Before, the failed attempt was retried under the old
// definition, the waiting and retrying instances stayed as they were for
// ever (the run never ended and was never pruned), and a task of the same
// name added back later ran those stale retries.
func TestReloadRemovedPipelineRunsEnd(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fns := map[string]func(context.Context, runner.Attempt) error{
			"k.a": func(ctx context.Context, a runner.Attempt) error {
				select {
				case <-time.After(5 * time.Second):
					return errors.New("a failed")
				case <-ctx.Done():
					return ctx.Err()
				}
			},
			"k.r": func(context.Context, runner.Attempt) error { return errors.New("r failed") },
		}
		k := `pipeline: k
timezone: UTC
defaults: {function: record}
tasks:
  - {name: a, retry: {count: 2, interval: 1s}}
  - {name: b, depends_on: [a]}
  - {name: r, retry: {count: 3, interval: 30s}}
`
		other := "pipeline: q\ntimezone: UTC\nschedule: \"@every 10s\"\ndefaults: {function: record}\ntasks:\n  - {name: x}\n"
		e := setup(t, Config{}, fns, k, other)
		if _, err := e.do(Trigger{Target: "k"}, By{Actor: "operator:ann"}); err != nil {
			t.Fatal(err)
		}
		sleep(2 * time.Second) // a runs, b waits on it, r failed once and retries at +30s
		if _, err := e.eng.Reload(compile(t, other)); err != nil {
			t.Fatal(err)
		}
		sleep(60 * time.Second) // a's result came at +5s; r's retry would have come at +30s
		ins := e.instances(store.InstanceFilter{Pipeline: "k"})
		got := map[string]string{}
		for _, in := range ins {
			got[in.TaskID] = fmt.Sprintf("%s after %d attempt(s): %s", in.State, in.Attempt, in.Error)
		}
		want := map[string]string{
			"k.a": "FAILED after 1 attempt(s): a failed",
			"k.b": "FAILED after 0 attempt(s): not run: its task was removed from the pipeline files by a reload",
			"k.r": "FAILED after 1 attempt(s): not run: its task was removed from the pipeline files by a reload",
		}
		if !maps.Equal(got, want) {
			t.Errorf("instances of the removed pipeline k:\n got %v\nwant %v", got, want)
		}
		// Added back, k does not pick up anything of the run before.
		back := time.Now()
		if _, err := e.eng.Reload(compile(t, k, other)); err != nil {
			t.Fatal(err)
		}
		sleep(60 * time.Second)
		e.stop()
		for _, c := range e.rec.snapshot() {
			if strings.HasPrefix(c.task, "k.") && !c.at.Before(back) {
				t.Errorf("%s ran after its pipeline was removed and added back", c.task)
			}
		}
	})
}
