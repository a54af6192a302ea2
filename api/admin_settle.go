package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// The operator verbs that settle any run: trigger with a logical time
// and params, mark an instance's outcome, cancel a run. Bad input is a 4xx
// with the reason, and changes nothing.

// triggerBody is the body of a trigger.
type triggerBody struct {
	Reason     string      `json:"reason"`
	Downstream bool        `json:"downstream"`
	At         string      `json:"at"`     // logical time, in the pipeline's zone unless it has an offset
	Params     ParamValues `json:"params"` // merged over the tasks' params; numbers and booleans as written
	Hold       bool        `json:"hold"`   // under a pause: create it held PAUSED until the resume (else refused, 409)
	In         string      `json:"in"`     // a delay ("10m"): the run's logical time, when it fires, is that long after now
}

// markBody is the body of a mark.
type markBody struct {
	State  string `json:"state"` // success or failed
	Run    int64  `json:"run"`   // the task's instance in this run
	At     string `json:"at"`    // or at this logical time
	Reason string `json:"reason"`
}

// triggerOp triggers target, of pipeline p, whose runs sched makes (nil:
// none): a date alone as at is sched's fire on that date (FireAt).
func (a *admin) triggerOp(r *http.Request, target string, p *defs.Pipeline, sched *defs.Schedule, isTask bool) (any, error) {
	var b triggerBody
	if err := decodeBody(r, &b); err != nil {
		return nil, err
	}
	op := engine.Trigger{Target: target, Downstream: b.Downstream, Params: b.Params, Hold: b.Hold}
	if b.Downstream && !isTask {
		return nil, errf(http.StatusBadRequest, "downstream applies to a task: a pipeline trigger runs every task of %s", p.Name)
	}
	if b.At != "" {
		at, err := FireAt(b.At, sched, p.Location)
		if err != nil {
			return nil, errf(http.StatusBadRequest, "at: %v", err)
		}
		op.At = at
	}
	if err := engine.CheckParams(b.Params); err != nil {
		return nil, errf(http.StatusBadRequest, "params: %v", err)
	}
	if b.In != "" {
		in, err := engine.ParseDelay(b.In, b.At != "")
		if err != nil {
			return nil, errf(http.StatusBadRequest, "%v", err)
		}
		op.In = in
	}
	return a.do(r, op, engine.By{Reason: b.Reason})
}

func (a *admin) taskTrigger(r *http.Request) (any, error) {
	t, err := a.taskOf(r)
	if err != nil {
		return nil, err
	}
	return a.triggerOp(r, t.ID(), a.graph().Pipeline(t.Pipeline), ScheduleOf(a.graph(), t.ID()), true)
}

func (a *admin) pipelineTrigger(r *http.Request) (any, error) {
	p, err := a.pipelineOf(r)
	if err != nil {
		return nil, err
	}
	return a.triggerOp(r, p.Name, p, p.Schedule, false)
}

// MarkState reads success or failed.
func MarkState(s string) (axtype.State, error) {
	switch strings.ToLower(s) {
	case "success":
		return axtype.Success, nil
	case "failed":
		return axtype.Failed, nil
	}
	return "", fmt.Errorf("state %q: give success or failed", s)
}

func (a *admin) markOp(r *http.Request, op engine.Mark, sched *defs.Schedule, loc *time.Location) (any, error) {
	var b markBody
	if err := decodeBody(r, &b); err != nil {
		return nil, err
	}
	st, err := MarkState(b.State)
	if err != nil {
		return nil, errf(http.StatusBadRequest, "%v", err)
	}
	op.State = st
	switch {
	case op.Instance != 0 && (b.Run != 0 || b.At != ""):
		return nil, errf(http.StatusBadRequest, "run and at select a task's instance: an instance id needs neither")
	case op.Instance == 0 && b.Run != 0 && b.At != "":
		return nil, errf(http.StatusBadRequest, "give run or at, not both")
	case op.Instance == 0 && b.Run == 0 && b.At == "":
		return nil, errf(http.StatusBadRequest, "say which instance of %s: give run (a run id) or at (its logical time)", op.Target)
	case b.Run < 0:
		return nil, errf(http.StatusBadRequest, "run %d: give a positive number", b.Run)
	}
	if b.Run != 0 {
		if _, err := a.st.Run(r.Context(), b.Run); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil, errf(http.StatusNotFound, "no run %d", b.Run)
			}
			return nil, err
		}
		op.Run = b.Run
	}
	if b.At != "" {
		at, err := FireAt(b.At, sched, loc)
		if err != nil {
			return nil, errf(http.StatusBadRequest, "at: %v", err)
		}
		op.At = at
	}
	return a.do(r, op, engine.By{Reason: b.Reason})
}

func (a *admin) taskMark(r *http.Request) (any, error) {
	t, err := a.taskOf(r)
	if err != nil {
		return nil, err
	}
	return a.markOp(r, engine.Mark{Target: t.ID()}, ScheduleOf(a.graph(), t.ID()), a.graph().Pipeline(t.Pipeline).Location)
}

func (a *admin) instanceMark(r *http.Request) (any, error) {
	id, err := a.pathInstance(r)
	if err != nil {
		return nil, err
	}
	return a.markOp(r, engine.Mark{Instance: id}, nil, time.UTC)
}

func (a *admin) runCancel(r *http.Request) (any, error) {
	id, b, err := a.runOpBody(r)
	if err != nil {
		return nil, err
	}
	if b.Downstream {
		return nil, errf(http.StatusBadRequest, "downstream applies to trigger only")
	}
	return a.do(r, engine.Cancel{Run: id}, engine.By{Reason: b.Reason})
}
