package defs

import (
	"fmt"
	"strings"
)

// taskDisabled sets t.Disabled from `disabled:`, which applies to a task
// with its own cron: a task that runs in its pipeline's runs is disabled
// with the pipeline.
func (p *parser) taskDisabled(t *Task, rt *rawTask) {
	if rt.disabled == nil {
		return
	}
	if rt.cron == nil {
		p.errorf(rt.disabled, t.Name, "disabled applies to a task with its own cron, and this one has none: disable the pipeline (disabled: true at its top level), or remove it")
		return
	}
	t.Disabled = rt.disabled.Value == "true"
}

// DisabledSummary says what of pl never fires: "pipeline" when it is
// disabled, else its tasks whose own cron is ("load, sync"), else "".
func DisabledSummary(pl *Pipeline) string {
	if pl.Disabled {
		return "pipeline"
	}
	var names []string
	for _, t := range pl.Tasks {
		if t.Disabled {
			names = append(names, t.Name)
		}
	}
	return strings.Join(names, ", ")
}

// DisabledReason says why a trigger of task t (nil: the whole pipeline)
// of pipeline pl is refused, or "" when it is not disabled.
func DisabledReason(pl *Pipeline, t *Task) string {
	switch {
	case pl.Disabled:
		return fmt.Sprintf("pipeline %s is disabled (disabled: true in %s): set it to false, or remove it, and reload", pl.Name, pl.File)
	case t != nil && t.Disabled:
		return fmt.Sprintf("task %s is disabled (disabled: true in %s, line %d): set it to false, or remove it, and reload", t.ID(), pl.File, t.Pos.Line)
	}
	return ""
}
