package engine

import (
	"errors"
	"fmt"

	"github.com/ax-sched/ax/defs"
)

// backfillParams refuses the params of a backfill of tasks sel of
// pipeline p, as a trigger's are refused.
func backfillParams(p *defs.Pipeline, sel []*defs.Task, params map[string]string) error {
	if err := CheckParams(params); err != nil {
		return fmt.Errorf("--param: %v", err)
	}
	return defs.CheckGiven(p, sel, params)
}

// refuseTrigger says why a trigger of tasks of pipeline p (t: the task
// named, nil for the whole pipeline) is refused, or nil: p or t is
// disabled (a refusal of the state), or a param given is one no task of
// the run declares or is not of its type (ErrBadOp). Nothing is created
// when it refuses.
func refuseTrigger(p *defs.Pipeline, t *defs.Task, tasks []*defs.Task, params map[string]string) error {
	if err := defs.CheckGiven(p, tasks, params); err != nil {
		return fmt.Errorf("%w: %v", ErrBadOp, err)
	}
	if why := defs.DisabledReason(p, t); why != "" {
		return errors.New(why)
	}
	return nil
}
