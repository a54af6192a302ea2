package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ax-sched/ax/axtype"

	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/store"
)

// removedTask returns a stand-in for task id, which is no longer in the
// pipeline files but has an instance left RUNNING: built from the task's
// stored definition (its timeout, group, executor kind), never retried,
// with no neighbours (nothing downstream is released by it). Stand-ins are
// cached for the term.
func (e *Engine) removedTask(ctx context.Context, id string) (*taskInfo, error) {
	if ti := e.gone[id]; ti != nil {
		return ti, nil
	}
	rows, err := e.st.Tasks(ctx, store.TaskFilter{ID: id, IncludeRemoved: true})
	if err != nil {
		return nil, fmt.Errorf("engine: read the stored definition of removed task %s: %w", id, err)
	}
	def := &defs.Task{Timeout: defs.DefaultTimeout, Group: defs.DefaultGroup}
	if len(rows) == 1 {
		if err := json.Unmarshal(rows[0].Definition, def); err != nil {
			e.log.Warn("removed_task_definition_unreadable", "task", id, "err", err)
		}
		def.Group = rows[0].Group
	}
	ti := standIn(id, *def)
	if e.gone == nil {
		e.gone = map[string]*taskInfo{}
	}
	e.gone[id] = ti
	e.log.Warn("removed_task_still_running", "task", id, "timeout", def.Timeout.String())
	return ti, nil
}

// splitID splits `pipeline.task` at its first dot.
func splitID(id string) (pipeline, task string) {
	for i := range len(id) {
		if id[i] == '.' {
			return id[:i], id[i+1:]
		}
	}
	return "", id
}

// standIn is the task a removed task's running attempt ends under, from
// its definition def: never retried (the task is gone: an attempt that
// fails ends it), with no neighbours (nothing downstream is released by
// it). A restart that finds the attempt running (removedTask) and a reload
// that removes its task while it runs both use it.
func standIn(id string, def defs.Task) *taskInfo {
	def.Pipeline, def.Name = splitID(id)
	def.Retry = defs.Retry{}
	if def.Timeout <= 0 {
		def.Timeout = defs.DefaultTimeout
	}
	return &taskInfo{def: &def, id: id, removed: true}
}

// endUnstartedOfRemoved fails the instances of the removed tasks that had
// not started (waiting, scheduled, retrying, paused) in the runs that stay,
// the manual ones and those in which something started: nothing would ever
// move them again, so their runs would never end, and a task of the same
// name added back later would pick up their stale retries. Their running
// ones end under a stand-in (see standIn). It is the one rule for a task
// gone from the files, whether a live reload removed it (how: "by a
// reload") or the files changed while no server ran (found at the start of
// a term, whose definitions sync names it removed).
func (e *Engine) endUnstartedOfRemoved(ctx context.Context, removed []string, how string, now time.Time) {
	msg := "not run: its task was removed from the pipeline files " + how
	var params []store.TransitionParams
	for _, id := range removed {
		ins, err := e.st.Instances(ctx, store.InstanceFilter{TaskID: id, Limit: 1 << 20,
			States: []axtype.State{axtype.Waiting, axtype.Scheduled, axtype.Retrying, axtype.Paused}})
		if err != nil {
			e.log.Warn("reload_end_unstarted_failed", "task", id, "err", err)
			continue
		}
		for _, in := range ins {
			m := msg
			params = append(params, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: in.State, To: axtype.Failed,
				Set: store.Changes{EndedAt: &now, Error: &m}, Epoch: e.leadership.epoch, Now: now, Actor: Actor, Reason: msg})
		}
	}
	if len(params) == 0 {
		return
	}
	res, err := e.w().TransitionBatch(ctx, params)
	if err != nil {
		e.log.Warn("reload_end_unstarted_failed", "instances", len(params), "err", err)
		return
	}
	for i, r := range res {
		if r.Err == nil {
			e.resolver.runs.dropRunOf(params[i].InstanceID)
		}
	}
}
