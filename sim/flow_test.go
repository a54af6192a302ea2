package sim

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// The env through which drawFlow's readers see their upstream's output.
const (
	envUpTask = "SIM_UP_TASK" // the upstream's name
	envUp     = "SIM_UP"      // {{ .Upstream.NAME.tk }}
)

// setEnvs keeps each task's env of g for envOf.
func (w *world) setEnvs(g *dag.Graph) {
	envs := map[string][]defs.EnvVar{}
	for _, t := range g.Order() {
		envs[t.ID()] = t.Env
	}
	w.envs.Store(&envs)
}

// envOf is the env of an attempt's task, for the executors' env wrapper.
func (w *world) envOf(a runner.Attempt) (runner.EnvSpec, error) {
	var vars []defs.EnvVar
	if m := w.envs.Load(); m != nil {
		vars = (*m)[a.Pipeline+"."+a.Task]
	}
	return runner.EnvSpec{Vars: vars}, nil
}

// checkOutputs is I16: every attempt that read its upstream's output tk
// through its env saw the ticket of an attempt of the upstream's instance
// in its run that the scheduler recorded as succeeded: not one that
// failed, timed out or whose result was lost, not another run's, not none.
func (c *checker) checkOutputs() {
	c.w.ex.mu.Lock()
	list := slices.Clone(c.w.ex.list)
	c.w.ex.mu.Unlock()
	c.judgeOutputs(list, func(e *execution) ([]string, error) { return c.upstreamSuccesses(context.Background(), e) })
	c.checkNoneRead()
}

// checkNoneRead is I16 for the attempts that never reached an executor:
// none of a reader failed because its upstream's output was missing (the
// env's template found no tk) while its upstream had succeeded.
func (c *checker) checkNoneRead() {
	ctx := context.Background()
	envs := c.w.envs.Load()
	for _, id := range slices.Sorted(maps.Keys(c.insts)) {
		in := c.insts[id]
		up := upTaskOf(envs, in.task)
		if up == "" {
			continue
		}
		recs, err := c.w.st.Attempts(ctx, id)
		if err != nil {
			c.w.violate("store", "I16: read the attempts of instance %d: %v", id, err)
			return
		}
		for _, r := range recs {
			if !strings.Contains(r.Error, "has no entry for key") {
				continue
			}
			e := &execution{task: in.task, instance: id, ticket: r.Ticket, upTask: up}
			if wants, err := c.upstreamSuccesses(ctx, e); err == nil && len(wants) > 0 {
				c.w.violate(invOutputs, "instance %d %s attempt %d found no output of its upstream %s, which succeeded (%.8q): %s",
					id, in.task, r.Attempt, up, wants, r.Error)
			}
		}
	}
}

// upTaskOf is the upstream whose output task id reads, or "".
func upTaskOf(envs *map[string][]defs.EnvVar, id string) string {
	if envs == nil {
		return ""
	}
	for _, v := range (*envs)[id] {
		if v.Name == envUpTask {
			return v.Value
		}
	}
	return ""
}

// judgeOutputs judges what each execution of list read against the
// recorded successes of its upstream, as successes reads them.
func (c *checker) judgeOutputs(list []*execution, successes func(*execution) ([]string, error)) {
	for _, e := range list {
		if e.upTask == "" {
			continue
		}
		c.w.tally[invOutputs]++
		wants, err := successes(e)
		if err != nil {
			c.w.violate("store", "I16: read what %s read: %v", e, err)
			return
		}
		if !slices.Contains(wants, e.up) {
			c.w.violate(invOutputs, "%s read its upstream %s's output tk=%.8s, not that of an attempt of it that succeeded in its run (recorded successes: %.8q)",
				e, e.upTask, e.up, wants)
		}
	}
}

// upstreamSuccesses returns the tickets of the recorded successful
// attempts of e's upstream in e's run.
func (c *checker) upstreamSuccesses(ctx context.Context, e *execution) ([]string, error) {
	in, err := c.w.st.Instance(ctx, e.instance)
	if err != nil {
		return nil, err
	}
	pipeline := in.TaskID[:len(in.TaskID)-len(taskName(in.TaskID))]
	ups, err := c.w.st.Instances(ctx, store.InstanceFilter{RunID: in.RunID, TaskID: pipeline + e.upTask})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, u := range ups {
		recs, err := c.w.st.Attempts(ctx, u.ID)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Status == string(runner.StatusSuccess) {
				out = append(out, r.Ticket)
			}
		}
	}
	return out, nil
}

// taskName is the task part of a task id (pipeline.task).
func taskName(id string) string {
	for i := len(id) - 1; i >= 0; i-- {
		if id[i] == '.' {
			return id[i+1:]
		}
	}
	return id
}

// I16 can fail: an attempt that read a ticket no successful attempt of its
// upstream had (as an engine reading a failed attempt's outputs would
// give it) is reported, and one that read the right ticket is not.
func TestOutputsInvariantCanFail(t *testing.T) {
	w := &world{t: t, tally: map[string]int{}}
	c := &checker{w: w}
	recorded := func(*execution) ([]string, error) { return []string{"good-ticket"}, nil }
	c.judgeOutputs([]*execution{{task: "p.b", instance: 2, ticket: "b1", upTask: "a", up: "good-ticket"}}, recorded)
	if len(w.viol) != 0 || w.tally[invOutputs] != 1 {
		t.Fatalf("the right ticket: violations %v, tally %d; want none and one check", w.viol, w.tally[invOutputs])
	}
	for _, seen := range []string{"failed-ticket", ""} {
		w.viol = nil
		c.judgeOutputs([]*execution{{task: "p.b", instance: 3, ticket: "b2", upTask: "a", up: seen}}, recorded)
		if len(w.viol) != 1 || w.viol[0].Invariant != invOutputs {
			t.Errorf("read %q: violations %v, want one of %s", seen, w.viol, invOutputs)
		}
	}
}
