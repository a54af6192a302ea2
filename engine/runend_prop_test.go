package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// randomDAG writes a pipeline of n tasks with random edges (each from an
// earlier task, so it is acyclic), some of them manual gates, and returns
// the upstreams of each task and the outcome each one will have.
func randomDAG(r *rand.Rand) (src string, ups map[string][]string, fail map[string]bool, slow map[string]time.Duration, gates []string) {
	n := 3 + r.IntN(8)
	ups, fail, slow = map[string][]string{}, map[string]bool{}, map[string]time.Duration{}
	var b strings.Builder
	b.WriteString("pipeline: z\ntimezone: UTC\ndefaults: {function: record, timeout: 1m}\ntasks:\n")
	for i := range n {
		name := fmt.Sprintf("t%d", i)
		id := "z." + name
		var deps []string
		for j := range i {
			if r.IntN(3) == 0 {
				deps = append(deps, fmt.Sprintf("t%d", j))
				ups[id] = append(ups[id], fmt.Sprintf("z.t%d", j))
			}
		}
		fmt.Fprintf(&b, "  - {name: %s", name)
		if len(deps) > 0 {
			fmt.Fprintf(&b, ", depends_on: [%s]", strings.Join(deps, ", "))
		}
		if r.IntN(6) == 0 {
			b.WriteString(", manual: true")
			gates = append(gates, id)
		}
		if r.IntN(3) == 0 {
			fmt.Fprintf(&b, ", retry: {count: %d, interval: 1s}", r.IntN(2))
		}
		b.WriteString("}\n")
		fail[id] = r.IntN(4) == 0
		slow[id] = time.Duration(r.IntN(4)) * time.Second
	}
	return b.String(), ups, fail, slow, gates
}

// TestRandomRunsAlwaysEnd: for random DAGs with random outcomes (failures,
// retries, slow tasks, manual gates approved late), every run ends, no
// instance starts before all its upstreams succeeded, and no instance that
// never ran counts as a success. Any failure names its seed.
func TestRandomRunsAlwaysEnd(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(seed), 14))
				src, ups, fail, slow, gates := randomDAG(r)
				fns := map[string]func(context.Context, runner.Attempt) error{}
				for id := range fail {
					fns[id] = func(context.Context, runner.Attempt) error {
						time.Sleep(slow[id])
						if fail[id] {
							return errors.New("random failure")
						}
						return nil
					}
				}
				e := setup(t, Config{}, fns, src)
				msg, err := e.do(Trigger{Target: "z"}, By{Actor: "operator:prop"})
				if err != nil {
					t.Fatalf("%v\n%s", err, src)
				}
				sleep(time.Minute)
				runs, _ := e.st.Runs(context.Background(), "z", 10)
				if len(runs) != 1 {
					t.Fatalf("runs %+v (%s)", runs, msg)
				}
				run := runs[0]
				// Before approval, a run held by a gate says so.
				if st := e.statusOf(run.ID); !st.Over && st.State != RunAwaiting {
					t.Errorf("not over and not at a gate after a minute: %+v\n%s", st, src)
				}
				for _, g := range gates {
					_, _ = e.do(Trigger{Target: g, At: run.LogicalTime}, By{Actor: "operator:prop"})
				}
				sleep(2 * time.Minute)
				e.stop()
				st := e.statusOf(run.ID)
				if !st.Over {
					t.Errorf("run not over: %+v\n%s", st, src)
				}
				checkRunInvariants(t, e, run.ID, ups, src)
			})
		})
	}
}

// checkRunInvariants checks, from the history, that no instance of run
// started before every upstream succeeded, and that every SUCCESS ran.
func checkRunInvariants(t *testing.T, e *env, run int64, ups map[string][]string, src string) {
	t.Helper()
	byTask := e.byTask(run)
	succeededAt := map[string]time.Time{}
	startedAt := map[string]time.Time{}
	for task, in := range byTask {
		h, err := e.st.History(context.Background(), store.LogFilter{InstanceID: in.ID, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range h {
			if row.To == axtype.Success {
				succeededAt[task] = row.At
			}
			if row.To == axtype.Running {
				if _, ok := startedAt[task]; !ok {
					startedAt[task] = row.At
				}
			}
		}
	}
	ran := map[string]int{}
	for _, c := range e.rec.snapshot() {
		ran[c.task]++
	}
	for task, in := range byTask {
		if s, ok := startedAt[task]; ok {
			for _, u := range ups[task] {
				if at, ok := succeededAt[u]; !ok || at.After(s) {
					t.Errorf("%s started at %s before its upstream %s succeeded (%v)\n%s", task, s, u, at, src)
				}
			}
		}
		if in.State == axtype.Success && (in.Attempt == 0 || ran[task] == 0) {
			t.Errorf("%s is SUCCESS but never ran (attempt %d, %d executions)\n%s", task, in.Attempt, ran[task], src)
		}
		if in.State == axtype.Failed && in.Attempt == 0 && !strings.HasPrefix(in.Error, "upstream ") {
			t.Errorf("%s failed without running, for no upstream: %q\n%s", task, in.Error, src)
		}
	}
}
