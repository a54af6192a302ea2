package api

import (
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/reload"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// The answers of the admin API that are not store rows, as the server
// encodes them and the Client decodes them: one set of types for both
// sides. Fields of the answers that were JSON objects built on the fly are
// in the order of their names, so the bytes on the wire stayed the same.

// ErrorBody is the answer of every refused request.
type ErrorBody struct {
	Error   string `json:"error"`
	Primary string `json:"primary,omitempty"` // on a standby: the primary's API, where writes go
}

// Status is the answer of GET /api/v1/status.
type Status struct {
	Lease *Lease        `json:"lease,omitempty"` // nil: no scheduler ever started on this store
	Loop  *engine.Stats `json:"loop,omitempty"`  // nil: no scheduler runs in this process
	Now   time.Time     `json:"now"`
	Role  string        `json:"role"` // primary or standby
	Store string        `json:"store"`
}

// Lease is the store's leader lease as Status shows it.
type Lease struct {
	Epoch     int64     `json:"epoch"`
	ExpiresAt time.Time `json:"expires_at"`
	Held      bool      `json:"held"` // not expired
	Holder    string    `json:"holder"`
}

// Ready is the answer of GET /readyz.
type Ready struct {
	Error string `json:"error,omitempty"`
	Ready bool   `json:"ready"`
	Role  string `json:"role"`
}

// PipelineItem is one pipeline of GET /api/v1/pipelines.
type PipelineItem struct {
	Name     string `json:"name"`
	Group    string `json:"group"`
	File     string `json:"file"`
	Timezone string `json:"timezone"`
	Schedule string `json:"schedule,omitempty"`
	Tasks    int    `json:"tasks"`
	// TaskGroups are the groups of its tasks: the scope that covers it.
	TaskGroups []string     `json:"task_groups"`
	Paused     *store.Pause `json:"paused,omitempty"`
	// Disabled says what of the pipeline never fires (disabled: true):
	// "pipeline", or its tasks whose own cron is disabled.
	Disabled string   `json:"disabled,omitempty"`
	Latest   *RunView `json:"latest_run,omitempty"`
	// RecentFailure is the newest of its last few runs that ended failed
	// (RecentFailureRuns), with the failures that ended it.
	RecentFailure *RunView `json:"recent_failure,omitempty"`
}

// Pipeline is the answer of GET /api/v1/pipelines/{pipeline}: the
// pipeline with one page of its tasks (in file order), the edges into
// them and their layers; NextPage, when set, reads the next page. Its
// summary (summary=true) lists no tasks and no latest run.
type Pipeline struct {
	Edges    []Edge       `json:"edges"`
	File     string       `json:"file"`
	Group    string       `json:"group"`
	Latest   *RunView     `json:"latest_run"`
	Layers   [][]string   `json:"layers"` // the page's task names, each layer after the ones it depends on
	Misfire  defs.Misfire `json:"misfire"`
	Name     string       `json:"name"`
	NextPage string       `json:"next_page,omitempty"`
	Overlap  defs.Overlap `json:"overlap"`
	Paused   *store.Pause `json:"paused"`
	Schedule string       `json:"schedule"`
	// Disabled says what of the pipeline never fires, as PipelineItem's.
	Disabled string `json:"disabled,omitempty"`
	// Params are the pipeline's typed params, for a run form.
	Params []defs.ParamSpec `json:"params,omitempty"`
	// TaskCount is how many tasks the pipeline has, all pages together.
	TaskCount int `json:"task_count"`
	// TaskGroups are the groups of all its tasks: the scope that covers it.
	TaskGroups []string   `json:"task_groups"`
	Tasks      []TaskView `json:"tasks"`
	Timezone   string     `json:"timezone"`
}

// Edge is a dependency of a pipeline's graph: To depends on From.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// RunDetail is the answer of GET /api/v1/runs/{run}: the run and one
// page of its instances, by task; NextPage, when set, reads the next.
type RunDetail struct {
	Instances []axtype.Instance `json:"instances"`
	NextPage  string            `json:"next_page,omitempty"`
	Run       RunView           `json:"run"`
}

// TaskDetail is the answer of GET /api/v1/pipelines/{pipeline}/tasks/{task}.
type TaskDetail struct {
	LastFires []engine.Fire `json:"last_fires"`
	NextFires []time.Time   `json:"next_fires"`
	Summary   store.Summary `json:"summary"`
	Task      TaskView      `json:"task"`
	// Runs is what the task's executor runs, as its file says it, templates
	// unrendered.
	Runs defs.Executor `json:"runs"`
	// LastAttempt is the record of the task's attempt that ended last: its
	// executor, its command with the templates rendered, how it ended. Nil
	// before any has ended.
	LastAttempt *store.AttemptRecord `json:"last_attempt,omitempty"`
}

// ExecutorView is a registered executor, and why it gets no work when it
// gets none.
type ExecutorView struct {
	store.Executor
	Live     bool   `json:"live"`
	Excluded string `json:"excluded,omitempty"`
	// Pool is the worker pool of the executor's last heartbeat to this
	// server (absent when it sent none here).
	Pool *runner.PoolStats `json:"pool,omitempty"`
}

// LimitsView is the answer of GET /api/v1/limits.
type LimitsView struct {
	Limits engine.Limits `json:"limits"`
	Source string        `json:"source"` // primary, or the store (on a standby)
}

// LimitsChange is the body of PUT /api/v1/limits: the limits it changes
// (nil, empty: not changed; 0 lifts one).
type LimitsChange struct {
	Global          *float64           `json:"global,omitempty"`
	Groups          map[string]float64 `json:"groups,omitempty"`
	MaxRunning      *int               `json:"max_running,omitempty"`
	GroupMaxRunning map[string]int     `json:"group_max_running,omitempty"`
	Reason          string             `json:"reason"`
}

// Result is the answer of an operator's write: what the scheduler did.
type Result struct {
	Result string `json:"result"`
	// Request, in a 202 answer, is the id of the request still being
	// applied, which its action log row names.
	Request int64 `json:"request,omitempty"`
}

// BackfillPlan is the answer of POST /api/v1/backfills: the plan, and the
// id of the backfill unless it was a dry run.
type BackfillPlan struct {
	ID   int64               `json:"id,omitempty"`
	Plan engine.BackfillSpec `json:"plan"`
}

// ReloadView is the answer of GET /api/v1/reload.
type ReloadView struct {
	Last    *reload.Status      `json:"last"` // nil: no reload yet
	Running engine.Fingerprints `json:"running"`
	// Schedules are the schedules in force, by trigger name.
	Schedules map[string]engine.ScheduleDef `json:"schedules,omitempty"`
	// Definitions are the definitions in force of the tasks the request
	// named (`task`), for ax diff's field-level changes.
	Definitions map[string]*defs.Task `json:"definitions,omitempty"`
	// UsersRefused says that the users file changed but was not loaded
	// (its errors are in the server's log, not here: they may quote it).
	UsersRefused string `json:"users_refused,omitempty"`
}

// Registered is the answer of POST /api/v1/executors/register.
type Registered struct {
	Registered []string `json:"registered"`
}

// Receipt is the answer of POST /api/v1/results.
type Receipt struct {
	Duplicate bool   `json:"duplicate"`
	Received  string `json:"received"`
	Ticket    string `json:"ticket"`
}
