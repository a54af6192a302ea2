package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// The operator verbs that settle any run: mark an instance's outcome,
// cancel a run.

// ErrBadOp is wrapped by the refusals of mark and cancel that name a wrong
// request (an unknown instance, task or state) rather than a state that
// refuses it.
var ErrBadOp = errors.New("engine: bad request")

// markable says, for an instance in state from, whether an operator may
// mark it to, or why not.
func markable(in axtype.Instance, to axtype.State) error {
	switch {
	case to != axtype.Success && to != axtype.Failed:
		return fmt.Errorf("%w: mark %q: give success or failed", ErrBadOp, strings.ToLower(string(to)))
	case in.State == to:
		return fmt.Errorf("instance %d of %s is %s already", in.ID, in.TaskID, in.State)
	case in.State == axtype.Running:
		return fmt.Errorf("instance %d of %s is %s: it may still run; kill it first (ax kill %d) or let it end", in.ID, in.TaskID, in.State, in.ID)
	case in.State == axtype.Retrying || in.State == axtype.Scheduled:
		return fmt.Errorf("instance %d of %s is %s: it may still run; let it end, or cancel its run (ax cancel %d)", in.ID, in.TaskID, in.State, in.RunID)
	case in.State == axtype.Paused:
		return fmt.Errorf("instance %d of %s is PAUSED: resume it, or cancel its run (ax cancel %d)", in.ID, in.TaskID, in.RunID)
	case in.State == axtype.Success:
		return fmt.Errorf("instance %d of %s succeeded: its downstream may have run on it; rerun it instead (ax rerun %d --instance)", in.ID, in.TaskID, in.ID)
	case !axtype.CanTransition(in.State, to):
		return fmt.Errorf("instance %d of %s is %s: it cannot be marked %s", in.ID, in.TaskID, in.State, to)
	}
	return nil
}

// markTarget finds the instance a mark names: by id, or a task in a run, or
// a task at a logical time.
func (op *operator) markTarget(ctx context.Context, r Mark) (axtype.Instance, error) {
	if r.Instance != 0 {
		in, err := op.st.Instance(ctx, r.Instance)
		if errors.Is(err, store.ErrNotFound) {
			return in, fmt.Errorf("%w: no instance %d", ErrBadOp, r.Instance)
		}
		return in, err
	}
	t, err := op.resolveTask(r.Target)
	if err != nil {
		return axtype.Instance{}, fmt.Errorf("%w: %v", ErrBadOp, err)
	}
	f := store.InstanceFilter{TaskID: t.id, Limit: 2}
	switch {
	case r.Run != 0:
		if _, err := op.st.Run(ctx, r.Run); err != nil {
			return axtype.Instance{}, fmt.Errorf("%w: no run %d", ErrBadOp, r.Run)
		}
		f.RunID = r.Run
	case !r.At.IsZero():
		f.LogicalFrom, f.LogicalTo = r.At, r.At
	default:
		return axtype.Instance{}, fmt.Errorf("%w: say which instance of %s: --run RUN, --at TIME, or an instance id", ErrBadOp, t.id)
	}
	ins, err := op.st.Instances(ctx, f)
	if err != nil {
		return axtype.Instance{}, err
	}
	switch {
	case len(ins) == 0 && r.Run != 0:
		return axtype.Instance{}, fmt.Errorf("%w: run %d has no instance of %s", ErrBadOp, r.Run, t.id)
	case len(ins) == 0:
		return axtype.Instance{}, fmt.Errorf("%w: %s has no instance at %s", ErrBadOp, t.id, r.At.Format(time.RFC3339))
	case len(ins) > 1:
		return axtype.Instance{}, fmt.Errorf("%w: %s has %d instances at %s (runs %d and %d): give --run", ErrBadOp, t.id, len(ins), r.At.Format(time.RFC3339), ins[0].RunID, ins[1].RunID)
	}
	return ins[0], nil
}

// mark sets the outcome of a waiting, failed or killed instance: success
// releases its downstream (and brings back what failed without running
// behind it), failed fails its waiting downstream.
func (op *operator) mark(ctx context.Context, r Mark, by By, now time.Time) (string, error) {
	in, err := op.markTarget(ctx, r)
	if err != nil {
		return "", err
	}
	to := axtype.State(strings.ToUpper(string(r.State)))
	if err := markable(in, to); err != nil {
		return "", err
	}
	if op.sched.tasks[in.TaskID] == nil {
		return "", fmt.Errorf("task %s of instance %d is no longer defined", in.TaskID, in.ID)
	}
	why := fmt.Sprintf("marked %s by %s", strings.ToLower(string(to)), by.Actor)
	if by.Reason != "" {
		why += ": " + by.Reason
	}
	errText := ""
	if to == axtype.Failed {
		errText = why
	}
	op.res.runs.dropRunOf(in.ID)
	params := []store.TransitionParams{{InstanceID: in.ID, Version: in.Version, From: in.State, To: to,
		Set:   store.Changes{Error: &errText, EndedAt: &now, NextFireAt: &time.Time{}, Reason: ptr("")},
		Epoch: op.host.termEpoch(), Now: now, Actor: by.Actor, Reason: why}}
	if _, err := op.recordSettled(ctx, params, now); err != nil {
		return "", err
	}
	msg := fmt.Sprintf("instance %d of %s (run %d) %s", in.ID, in.TaskID, in.RunID, why)
	if to == axtype.Success {
		in.State = axtype.Success
		n, err := op.bringBack(ctx, []axtype.Instance{in}, by.Actor, now)
		if err != nil {
			return "", err
		}
		if n > 0 {
			msg += fmt.Sprintf("; %d downstream instance(s) that never ran wait for their upstreams again", n)
		}
	}
	return msg, nil
}

// recordSettled records params with the downstream they settle in the same
// transaction (and other pipelines' right after), keeping the cache in step.
func (op *operator) recordSettled(ctx context.Context, params []store.TransitionParams, now time.Time) ([]store.BatchResult, error) {
	var settled []release
	res, relRes, err := op.host.w().TransitionBatchThen(ctx, params, op.res.settleAfter(ctx, params, now, &settled))
	if err != nil {
		op.res.runs.invalidate()
		return nil, err
	}
	var ended []*taskInfo
	for i, r := range res {
		if r.Err != nil {
			if len(params) == 1 {
				return nil, r.Err
			}
			continue
		}
		op.disp.forget(params[i].InstanceID)
		op.res.runs.dropRunOf(params[i].InstanceID)
		if in, err := op.st.Instance(ctx, params[i].InstanceID); err == nil && op.sched.tasks[in.TaskID] != nil {
			ended = append(ended, op.sched.tasks[in.TaskID])
		}
	}
	if len(settled) > 0 {
		op.done.released(ctx, settled, relRes)
	}
	return res, op.done.crossAfter(ctx, ended, now)
}

// cancel ends every unfinished instance of a run: running ones are killed
// (they end KILLED when their executor has stopped them), the others fail
// as cancelled; the run is then over.
func (op *operator) cancel(ctx context.Context, r Cancel, by By, now time.Time) (string, error) {
	if r.Run == 0 {
		return "", fmt.Errorf("%w: cancel needs a run id", ErrBadOp)
	}
	if _, err := op.st.Run(ctx, r.Run); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return "", fmt.Errorf("%w: no run %d", ErrBadOp, r.Run)
		}
		return "", err
	}
	ins, err := op.st.Instances(ctx, store.InstanceFilter{RunID: r.Run, Limit: 1 << 20, Ascending: true})
	if err != nil {
		return "", err
	}
	why := "cancelled by " + by.Actor
	if by.Reason != "" {
		why += ": " + by.Reason
	}
	var (
		params []store.TransitionParams
		kill   []int64
	)
	for _, in := range ins {
		switch in.State {
		case axtype.Waiting, axtype.Scheduled, axtype.Retrying, axtype.Paused:
			params = append(params, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: in.State, To: axtype.Failed,
				Set:   store.Changes{Error: ptr(why), EndedAt: &now, NextFireAt: &time.Time{}, Reason: ptr("")},
				Epoch: op.host.termEpoch(), Now: now, Actor: by.Actor, Reason: why})
		case axtype.Running:
			kill = append(kill, in.ID)
		}
	}
	if len(params)+len(kill) == 0 {
		return "", fmt.Errorf("run %d is over already (%s): nothing to cancel", r.Run, StatusOf(ins, op.res.isManual).State)
	}
	for _, id := range kill {
		if !op.disp.inFlight(id) {
			return "", fmt.Errorf("instance %d of run %d is RUNNING but not known to this scheduler: wait for its timeout, then cancel again", id, r.Run)
		}
	}
	op.res.runs.drop(r.Run)
	res, err := op.recordSettled(ctx, params, now)
	if err != nil {
		return "", err
	}
	failed := 0
	for _, r := range res {
		if r.Err == nil {
			failed++
		}
	}
	for _, id := range kill {
		op.killAttempt(id, "cancelled by "+by.Actor)
	}
	msg := fmt.Sprintf("run %d cancelled: %d instance(s) failed as cancelled", r.Run, failed)
	if len(kill) > 0 {
		ids := make([]string, len(kill))
		for i, id := range kill {
			ids[i] = strconv.FormatInt(id, 10)
		}
		msg += fmt.Sprintf(", kill sent to %d running instance(s): %s", len(kill), strings.Join(ids, ", "))
	}
	if failed < len(params) {
		msg += fmt.Sprintf(" (%d changed meanwhile: cancel again if the run is not over)", len(params)-failed)
	}
	return msg, nil
}

// killAttempt stops one running attempt as kill does.
func (op *operator) killAttempt(id int64, by string) {
	a := op.disp.running.get(id)
	switch {
	case a == nil:
	case a.held:
		op.disp.unhold(id)
		a.held = false
		a.cancel(runner.ErrKilled)
		op.done.gather(outcome{instance: id, res: runner.Result{Ticket: a.ticket, Status: runner.StatusKilled,
			Error: cmp.Or(by, "killed") + " before its fire time: it never started"}})
	case a.cancel != nil:
		a.cancel(runner.ErrKilled)
	default:
		op.done.gather(outcome{instance: id, res: runner.Result{Ticket: a.ticket, Status: runner.StatusKilled,
			Error: by + "; its executor ran in a previous scheduler process and may still be running"}})
	}
}

// bringBackOne moves one instance that never ran (FAILED, KILLED, or
// marked SUCCESS) back to WAITING.
func (op *operator) bringBackOne(ctx context.Context, in axtype.Instance, actor string, now time.Time) error {
	_, err := op.host.w().Transition(ctx, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: in.State, To: axtype.Waiting,
		Set:   store.Changes{Error: ptr(""), EndedAt: &time.Time{}, Reason: ptr("waiting for its upstreams again (rerun)")},
		Epoch: op.host.termEpoch(), Now: now, Actor: actor, Reason: "rerun: it never ran (" + cmpOr(in.Error, string(in.State)) + ")"})
	if err != nil {
		return err
	}
	op.res.runs.dropRunOf(in.ID)
	return nil
}

// bringBack returns to WAITING the instances that failed without running
// because of those in from: downstream of them in the same run,
// transitively, and in other pipelines' runs whose failure names them. Then
// it settles them: those whose upstreams are done already are released. It
// returns how many came back.
func (op *operator) bringBack(ctx context.Context, from []axtype.Instance, actor string, now time.Time) (int, error) {
	var back []axtype.Instance
	seen := map[int64]bool{}
	for _, in := range from {
		seen[in.ID] = true
	}
	runs := map[int64]map[string]axtype.Instance{}
	runOf := func(id int64) (map[string]axtype.Instance, error) {
		if r, ok := runs[id]; ok {
			return r, nil
		}
		ins, err := op.st.Instances(ctx, store.InstanceFilter{RunID: id, Limit: 1 << 20})
		if err != nil {
			return nil, err
		}
		r := make(map[string]axtype.Instance, len(ins))
		for _, x := range ins {
			r[x.TaskID] = x
		}
		runs[id] = r
		return r, nil
	}
	work := slices.Clone(from)
	for len(work) > 0 {
		in := work[0]
		work = work[1:]
		ti := op.sched.tasks[in.TaskID]
		if ti == nil {
			continue
		}
		run, err := runOf(in.RunID)
		if err != nil {
			return 0, err
		}
		var next []axtype.Instance
		for _, d := range ti.down {
			if x, ok := run[d.id]; ok && !seen[x.ID] && neverRan(x) {
				next = append(next, x)
			}
		}
		for _, d := range ti.crossDown {
			failed, err := op.st.Instances(ctx, store.InstanceFilter{TaskID: d.id, States: []axtype.State{axtype.Failed}, LogicalFrom: in.LogicalTime, Limit: 1000})
			if err != nil {
				return 0, err
			}
			for _, x := range failed {
				if !seen[x.ID] && neverRan(x) && strings.Contains(x.Error, "upstream "+in.TaskID+" ") {
					next = append(next, x)
				}
			}
		}
		for _, x := range next {
			seen[x.ID] = true
			if err := op.bringBackOne(ctx, x, actor, now); err != nil {
				return 0, err
			}
			back = append(back, x)
			work = append(work, x)
		}
	}
	return len(back), op.settleBack(ctx, append(slices.Clone(from), back...), now)
}

// settleBack settles instances that came back to WAITING (and those a
// rerun brought back directly): those whose upstreams are done already are
// released.
func (op *operator) settleBack(ctx context.Context, ins []axtype.Instance, now time.Time) error {
	byRun := map[int64][]*taskInfo{}
	for _, x := range ins {
		if ti := op.sched.tasks[x.TaskID]; ti != nil {
			byRun[x.RunID] = append(byRun[x.RunID], ti)
		}
	}
	rel, err := op.res.releasableByRun(ctx, byRun, true, now)
	if err != nil {
		return err
	}
	return op.done.applyReleases(ctx, rel, now)
}
