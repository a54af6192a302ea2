package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// Operator requests are a sealed set: one type per verb,
// each applying itself in the engine's loop through the unexported apply
// method, so that only this package can add a verb and the compiler checks
// that every verb has its handler. Who asks and why travels beside the
// request (By), not in it.
//
// The queued form (the CLI's --store path, the ops table) is the verb and a
// JSON object of the request's fields, with "kind", "actor" and "reason":
// the format older builds wrote for their single Op struct, so rows queued
// by an older build decode into the typed request (EncodeRequest,
// DecodeRequest).

// Request is an operator request: Pause, Resume, Trigger, Kill, Rerun, Mark,
// Cancel, SetLimits, CancelBackfill, ResumeBackfill or ApproveBackfill. Engine.Do applies it.
type Request interface {
	// Verb is the request's name in the action log and the queue.
	Verb() string
	// subject is the task and instance the action log files it under.
	subject() (task string, instance int64)
	apply(ctx context.Context, op *operator, by By, now time.Time) (string, error)
}

// By says who made a request and why: the action log's actor and reason.
// An empty Actor is "operator".
type By struct {
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Request is the id Engine.Do gives the request, which its action log
	// row names (0: a request queued in the store, known by its row's id).
	Request int64 `json:"-"`
}

// The verbs, as Request.Verb returns them and the queue stores them.
const (
	OpPause           = "pause"
	OpResume          = "resume"
	OpTrigger         = "trigger"
	OpKill            = "kill"
	OpRerun           = "rerun"
	OpLimits          = "limits"
	OpCancelBackfill  = "cancel_backfill"
	OpResumeBackfill  = "resume_backfill"
	OpApproveBackfill = "approve_backfill"
	OpMark            = "mark"
	OpCancel          = "cancel"
)

// verbs lists the verbs for the error about an unknown one.
const verbs = "pause, resume, trigger, kill, rerun, mark, cancel, limits, cancel_backfill, resume_backfill or approve_backfill"

// Pause holds a task, group or pipeline (Scope, Target): its due instances
// wait PAUSED, running ones finish.
type Pause struct {
	Scope  store.PauseScope `json:"scope,omitempty"`
	Target string           `json:"target,omitempty"`
}

// Resume lifts a pause (Scope, Target).
type Resume struct {
	Scope  store.PauseScope `json:"scope,omitempty"`
	Target string           `json:"target,omitempty"`
}

// Trigger starts a run of a task (`pipeline.task`; with Downstream,
// everything downstream too) or of a whole pipeline, at logical time At
// (zero: now) with Params over the tasks' params. For a manual task it is
// the approval of its gate.
type Trigger struct {
	Target     string            `json:"target,omitempty"`
	Downstream bool              `json:"downstream,omitempty"`
	At         time.Time         `json:"at,omitzero"`
	Params     map[string]string `json:"params,omitempty"`
	// In delays the run: its logical time is In after the trigger is
	// applied, and it fires then (stored, so a restart or a failover keeps
	// it). It excludes At.
	In time.Duration `json:"in,omitempty"`
	// Hold creates what a pause covers held PAUSED until its resume,
	// where without it the trigger is refused (PausedError).
	Hold bool `json:"hold,omitempty"`
}

// Kill stops a running instance (Instance), or every running instance of
// a task (Target).
type Kill struct {
	Instance int64  `json:"instance,omitempty"`
	Target   string `json:"target,omitempty"`
}

// Rerun runs again one instance (Instance), every FAILED and KILLED
// instance of a run (Run), or a task's latest failed one (Target).
type Rerun struct {
	Instance int64  `json:"instance,omitempty"`
	Run      int64  `json:"run,omitempty"`
	Target   string `json:"target,omitempty"`
	// Hold reruns what a pause covers held PAUSED until its resume, where
	// without it the rerun is refused (PausedError).
	Hold bool `json:"hold,omitempty"`
}

// Mark sets the outcome (State: SUCCESS or FAILED) of a waiting, failed or
// killed instance: Instance, or task Target in Run or at logical time At.
type Mark struct {
	Instance int64        `json:"instance,omitempty"`
	Target   string       `json:"target,omitempty"`
	Run      int64        `json:"run,omitempty"`
	At       time.Time    `json:"at,omitzero"`
	State    axtype.State `json:"state,omitempty"`
}

// Cancel ends every unfinished instance of a run.
type Cancel struct {
	Run int64 `json:"run,omitempty"`
}

// SetLimits changes the dispatch rates (a nil Global keeps the global rate;
// a group at 0 lifts its limit) and the concurrency caps (a nil MaxRunning
// keeps the global cap; 0 lifts a cap).
type SetLimits struct {
	Global          *float64           `json:"global,omitempty"`
	Groups          map[string]float64 `json:"groups,omitempty"`
	MaxRunning      *int               `json:"max_running,omitempty"`
	GroupMaxRunning map[string]int     `json:"group_max_running,omitempty"`
}

// CancelBackfill stops a backfill from starting more runs.
type CancelBackfill struct {
	Backfill int64 `json:"backfill,omitempty"`
}

// ResumeBackfill continues a cancelled, failed or interrupted backfill
// without rerunning what it ran.
type ResumeBackfill struct {
	Backfill int64 `json:"backfill,omitempty"`
}

// ApproveBackfill approves the manual gates of every run of a backfill:
// those its runs wait at and those of the runs it has yet to start. Hold
// approves them under a pause, held PAUSED until the resume, where without
// it the approval is refused (PausedError).
type ApproveBackfill struct {
	Backfill int64 `json:"backfill,omitempty"`
	Hold     bool  `json:"hold,omitempty"`
}

var (
	_ Request = ApproveBackfill{}
	_ Request = Pause{}
	_ Request = Resume{}
	_ Request = Trigger{}
	_ Request = Kill{}
	_ Request = Rerun{}
	_ Request = Mark{}
	_ Request = Cancel{}
	_ Request = SetLimits{}
	_ Request = CancelBackfill{}
	_ Request = ResumeBackfill{}
)

func (Pause) Verb() string           { return OpPause }
func (Resume) Verb() string          { return OpResume }
func (Trigger) Verb() string         { return OpTrigger }
func (Kill) Verb() string            { return OpKill }
func (Rerun) Verb() string           { return OpRerun }
func (Mark) Verb() string            { return OpMark }
func (Cancel) Verb() string          { return OpCancel }
func (SetLimits) Verb() string       { return OpLimits }
func (CancelBackfill) Verb() string  { return OpCancelBackfill }
func (ResumeBackfill) Verb() string  { return OpResumeBackfill }
func (ApproveBackfill) Verb() string { return OpApproveBackfill }

func (r Pause) subject() (string, int64)         { return scopedTask(r.Scope, r.Target), 0 }
func (r Resume) subject() (string, int64)        { return scopedTask(r.Scope, r.Target), 0 }
func (r Trigger) subject() (string, int64)       { return scopedTask("", r.Target), 0 }
func (r Kill) subject() (string, int64)          { return scopedTask("", r.Target), r.Instance }
func (r Rerun) subject() (string, int64)         { return scopedTask("", r.Target), r.Instance }
func (r Mark) subject() (string, int64)          { return scopedTask("", r.Target), r.Instance }
func (Cancel) subject() (string, int64)          { return "", 0 }
func (SetLimits) subject() (string, int64)       { return "", 0 }
func (CancelBackfill) subject() (string, int64)  { return "", 0 }
func (ResumeBackfill) subject() (string, int64)  { return "", 0 }
func (ApproveBackfill) subject() (string, int64) { return "", 0 }

// scopedTask returns target when it names a task: the task scope, or no
// scope and a `pipeline.task` name.
func scopedTask(scope store.PauseScope, target string) string {
	if scope == store.ScopeTask || (scope == "" && strings.Contains(target, ".")) {
		return target
	}
	return ""
}

func (r Pause) apply(ctx context.Context, op *operator, by By, now time.Time) (string, error) {
	return op.pause(ctx, r, by, now)
}

func (r Resume) apply(ctx context.Context, op *operator, by By, now time.Time) (string, error) {
	return op.resume(ctx, r, by, now)
}

func (r Trigger) apply(ctx context.Context, op *operator, by By, now time.Time) (string, error) {
	return op.trigger(ctx, r, by, now)
}

func (r Kill) apply(ctx context.Context, op *operator, by By, now time.Time) (string, error) {
	return op.kill(ctx, r, by, now)
}

func (r Rerun) apply(ctx context.Context, op *operator, by By, now time.Time) (string, error) {
	return op.rerun(ctx, r, by, now)
}

func (r Mark) apply(ctx context.Context, op *operator, by By, now time.Time) (string, error) {
	return op.mark(ctx, r, by, now)
}

func (r Cancel) apply(ctx context.Context, op *operator, by By, now time.Time) (string, error) {
	return op.cancel(ctx, r, by, now)
}

func (r SetLimits) apply(ctx context.Context, op *operator, _ By, now time.Time) (string, error) {
	return op.disp.setLimits(ctx, r, now)
}

func (r CancelBackfill) apply(ctx context.Context, op *operator, by By, now time.Time) (string, error) {
	return op.bf.cancel(ctx, r, by, now)
}

func (r ResumeBackfill) apply(ctx context.Context, op *operator, _ By, now time.Time) (string, error) {
	return op.bf.resumeCancelled(ctx, r, now)
}

func (r ApproveBackfill) apply(ctx context.Context, op *operator, by By, now time.Time) (string, error) {
	return op.approveBackfill(ctx, r, by, now)
}

// CheckRequest refuses (ErrBadOp) a request whose text from outside is
// over its limit (axtype): the reason, the actor, the name it targets, a
// trigger's params. The operator checks every request it applies, and the
// CLI checks one before it sends or queues it, so that no such text
// reaches the store.
func CheckRequest(req Request, by By) error {
	errs := []error{axtype.CheckLen("reason", by.Reason, axtype.MaxReasonLen), axtype.CheckLen("actor", by.Actor, axtype.MaxActorLen)}
	target := ""
	switch r := req.(type) {
	case Pause:
		target = r.Target
	case Resume:
		target = r.Target
	case Trigger:
		target = r.Target
		errs = append(errs, CheckParams(r.Params), checkDelay(r))
	case Kill:
		target = r.Target
	case Rerun:
		target = r.Target
	case Mark:
		target = r.Target
	}
	errs = append(errs, axtype.CheckLen("target", target, axtype.MaxTaskIDLen))
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadOp, err)
		}
	}
	return nil
}

// CheckParams refuses a trigger's params that templates and executors
// cannot use (a name with a space, '=', '.', '{' or '}') or that are over
// their limits: count, name, value, the whole as JSON.
func CheckParams(p map[string]string) error {
	if len(p) > axtype.MaxParams {
		return fmt.Errorf("%d params; give at most %d", len(p), axtype.MaxParams)
	}
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if !paramName(k) {
			return fmt.Errorf("param name %q: use letters, digits, _ and -", k)
		}
		if strings.ContainsRune(p[k], 0) {
			return fmt.Errorf("param %q: its value has a NUL byte, which no command's argument or environment can carry", k)
		}
		if err := axtype.CheckLen("param name", k, axtype.MaxNameLen); err != nil {
			return err
		}
		if n := len(p[k]); n > axtype.MaxParamLen {
			return fmt.Errorf("param %q is %d bytes long; give at most %d bytes (a character beyond ASCII takes 2 to 4)", k, n, axtype.MaxParamLen)
		}
	}
	if b, _ := json.Marshal(p); len(b) > axtype.MaxParamsBytes {
		return fmt.Errorf("params are %d bytes as JSON; give at most %d", len(b), axtype.MaxParamsBytes)
	}
	return nil
}

// paramName reports whether k is a param's name: ASCII letters, digits, _
// and -, at least one.
func paramName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// EncodeRequest returns the queued form of req made by by: its verb and a
// JSON object of its fields with "kind", "actor" and "reason" (the format
// of the ops table, which older builds also wrote).
func EncodeRequest(req Request, by By) (verb string, args []byte, err error) {
	fields, err := json.Marshal(req)
	if err != nil {
		return "", nil, fmt.Errorf("engine: encode %s request: %w", req.Verb(), err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(fields, &m); err != nil {
		return "", nil, fmt.Errorf("engine: encode %s request: %w", req.Verb(), err)
	}
	m["kind"], _ = json.Marshal(req.Verb())
	if by.Actor != "" {
		m["actor"], _ = json.Marshal(by.Actor)
	}
	if by.Reason != "" {
		m["reason"], _ = json.Marshal(by.Reason)
	}
	args, err = json.Marshal(m)
	return req.Verb(), args, err
}

// DecodeRequest reads a queued request: verb names its type, args holds its
// fields (other keys, such as those of other verbs in rows an older build
// queued, are ignored). An unknown verb or malformed args are an error
// that names them; empty args are a request with no fields.
func DecodeRequest(verb string, args []byte) (Request, error) {
	var req Request
	switch verb {
	case OpPause:
		req = decodeAs[Pause](args)
	case OpResume:
		req = decodeAs[Resume](args)
	case OpTrigger:
		req = decodeAs[Trigger](args)
	case OpKill:
		req = decodeAs[Kill](args)
	case OpRerun:
		req = decodeAs[Rerun](args)
	case OpMark:
		req = decodeAs[Mark](args)
	case OpCancel:
		req = decodeAs[Cancel](args)
	case OpLimits:
		req = decodeAs[SetLimits](args)
	case OpCancelBackfill:
		req = decodeAs[CancelBackfill](args)
	case OpResumeBackfill:
		req = decodeAs[ResumeBackfill](args)
	case OpApproveBackfill:
		req = decodeAs[ApproveBackfill](args)
	default:
		return nil, fmt.Errorf("unknown operation %q: use %s", verb, verbs)
	}
	if bad, ok := req.(badArgs); ok {
		return nil, fmt.Errorf("malformed %s request: %v", verb, bad.err)
	}
	return req, nil
}

// badArgs is what decodeAs returns for args that are not the verb's JSON.
type badArgs struct {
	Request
	err error
}

func decodeAs[R Request](args []byte) Request {
	var r R
	if len(args) == 0 {
		return r
	}
	if err := json.Unmarshal(args, &r); err != nil {
		return badArgs{r, err}
	}
	return r
}
