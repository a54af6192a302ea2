package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// run runs attempt at of task t in run runID on its executor, first giving
// it the outputs of the upstream tasks its templates read: those of each
// one's attempt that succeeded last in the run (a rerun's replace the
// first's). A task that reads none costs no read.
func (d *dispatcher) run(ctx context.Context, at runner.Attempt, t *defs.Task, runID int64) (runner.Result, error) {
	if len(t.Reads) > 0 {
		up, err := d.upstreamOutputs(ctx, t, runID)
		if err != nil {
			return runner.Result{Ticket: at.Ticket, Status: runner.StatusFailed, Error: err.Error()}, nil
		}
		at.Upstream = up
	}
	return d.execs[t.Executor.Kind].Execute(ctx, at)
}

// upstreamOutputs reads the outputs of the tasks t reads, by task name;
// each of them has an entry, empty when it gave none, so that a template
// reading a key it did not give names the key.
func (d *dispatcher) upstreamOutputs(ctx context.Context, t *defs.Task, runID int64) (map[string]map[string]string, error) {
	ids := make([]string, len(t.Reads))
	for i, name := range t.Reads {
		ids[i] = t.Pipeline + "." + name
	}
	got, err := d.settings.RunOutputs(ctx, runID, ids)
	if err != nil {
		return nil, fmt.Errorf("cannot read the outputs of its upstream tasks %v (run %d): %v; it is retried per its policy", t.Reads, runID, err)
	}
	up := make(map[string]map[string]string, len(t.Reads))
	for i, name := range t.Reads {
		up[name] = got[ids[i]]
		if up[name] == nil {
			up[name] = map[string]string{}
		}
	}
	return up, nil
}

// inheritedRecord is the record of the attempt of instance id whose result
// came while no goroutine here waited for it (an attempt inherited from a
// previous primary: posted to the inbox, or the answer of its executor's
// /status), when the result gives outputs: they are stored with it, in the
// results' transaction, or its downstream could never read them. Nil for
// any other result.
func (c *completer) inheritedRecord(id int64, res runner.Result, now time.Time) *store.LogWrite {
	a := c.disp.running.get(id)
	if a == nil || len(res.Outputs) == 0 || res.Ticket != a.ticket {
		return nil
	}
	return &store.LogWrite{Attempts: []store.AttemptRecord{{InstanceID: id, Attempt: a.attempt, RunID: a.runID, TaskID: a.task.def.ID(),
		Ticket: a.ticket, Executor: executorOf(a.task.def), Status: string(res.Status), Error: res.Error, EndedAt: now, Outputs: res.Outputs}}}
}
