package engine

import (
	"context"
	"encoding/json"
	"fmt"

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
