package defs

import (
	"text/template"
	"time"
)

// Defaults of a task field that neither the task nor the pipeline's defaults set.
const (
	DefaultPriority      = 3
	DefaultTimeout       = 300 * time.Second
	DefaultRetryCount    = 0
	DefaultRetryInterval = 30 * time.Second
	DefaultGroup         = "default"
	// MaxRunningLimit bounds a task's max_running.
	MaxRunningLimit = 1_000_000
	// DefaultCrossWait is how long after its logical time an instance waits
	// for an upstream in another pipeline before it fails, when the task sets
	// no wait_timeout. Same-pipeline upstreams have no default limit.
	DefaultCrossWait = 24 * time.Hour
)

// ScheduleNone is the pipeline `schedule:` that says the pipeline has none
// on purpose: it runs when an operator triggers it (and from the crons of
// its tasks, if any), and no task of it is warned about for lacking one.
// Leaving `schedule:` out means the same, except that a task no cron of the
// pipeline reaches is warned about.
const ScheduleNone = "none"

// Misfire says what happens to fire times that passed while nothing ran them.
type Misfire string

// Misfire policies.
const (
	MisfireFireOnce Misfire = "fire_once" // run once for all missed times (default)
	MisfireSkip     Misfire = "skip"      // run none of them; log each as skipped
	MisfireFireAll  Misfire = "fire_all"  // run every missed time, up to the engine's bound
)

// Overlap says what a fire does when the task's previous instance still runs.
type Overlap string

// Overlap policies.
const (
	OverlapSkip  Overlap = "skip"  // the new fire is skipped and logged (default)
	OverlapWait  Overlap = "wait"  // the new fire waits until the previous one ends
	OverlapAllow Overlap = "allow" // both run
)

// ExecutorKind names how a task runs.
type ExecutorKind string

// Executor kinds; a task has exactly one.
const (
	ExecFunction ExecutorKind = "function"
	ExecHTTP     ExecutorKind = "http"
	ExecCommand  ExecutorKind = "command"
)

// Executor says how a task runs: a registered Go function, an HTTP executor, or a command.
type Executor struct {
	Kind     ExecutorKind `json:"kind"`
	Function string       `json:"function,omitempty"`
	URL      string       `json:"url,omitempty"`
	Command  []string     `json:"command,omitempty"`
	// Templates holds the parsed form of each Command argument that contains
	// template actions, indexed like Command; nil entries are literal.
	Templates []*template.Template `json:"-"`
}

// Retry is a task's retry policy: Count retries after the first attempt,
// Interval between the first two, doubling from the third on.
type Retry struct {
	Count    int           `json:"count"`
	Interval time.Duration `json:"interval"`
}

// Breaker tunes a task's circuit breaker; a zero field takes the
// server's setting (--breaker-window, --breaker-min-outcomes, --breaker-ratio).
type Breaker struct {
	// Window is the sliding window of outcomes judged (default 5m).
	Window time.Duration `json:"window,omitempty"`
	// MinOutcomes is how many outcomes are judged at least: fewer in the
	// window and the last MinOutcomes are judged instead (default 10).
	MinOutcomes int `json:"min_outcomes,omitempty"`
	// Ratio is the failure ratio above which the breaker opens (default 0.5).
	Ratio float64 `json:"ratio,omitempty"`
}

// Dep is one entry of depends_on: a task of the same pipeline (Pipeline == "")
// or of another one, written `other_pipeline.task`, or as a mapping
// {task: other_pipeline.task, match: exact, offset: -1d} (CrossWindow).
type Dep struct {
	Pipeline string `json:"pipeline,omitempty"`
	Task     string `json:"task"`
	// Match and Offset say which run of the other pipeline meets it
	// (CrossWindow); zero: MatchInterval, no offset.
	Match  Match  `json:"match,omitempty"`
	Offset Offset `json:"offset,omitzero"`
	Pos    Pos    `json:"-"`
}

// String renders d as it is written in a file.
func (d Dep) String() string {
	if d.Pipeline == "" {
		return d.Task
	}
	return d.Pipeline + "." + d.Task
}

// Task is one task of a pipeline with every default applied.
type Task struct {
	Name      string        `json:"name"`
	Pipeline  string        `json:"pipeline"`
	Group     string        `json:"group"`
	DependsOn []Dep         `json:"depends_on,omitempty"`
	Cron      string        `json:"cron,omitempty"`
	Schedule  *Schedule     `json:"-"`
	Delay     time.Duration `json:"delay,omitempty"`
	Manual    bool          `json:"manual,omitempty"`
	Priority  int           `json:"priority"`
	// MaxRunning caps the task's attempts running at once; 0 is no cap.
	MaxRunning int           `json:"max_running,omitempty"`
	Timeout    time.Duration `json:"timeout"`
	// WaitTimeout is how long after its logical time an instance may wait
	// for its upstreams before it fails ("upstream P.T not done after D");
	// zero means unset: no limit for same-pipeline upstreams and
	// DefaultCrossWait while a cross-pipeline one is pending.
	WaitTimeout time.Duration `json:"wait_timeout,omitempty"`
	// SLA: how long after its logical time an instance should have
	// succeeded; past it an sla_missed alert is raised once. Zero: none.
	SLA      time.Duration  `json:"sla,omitempty"`
	Retry    Retry          `json:"retry"`
	Breaker  Breaker        `json:"breaker,omitzero"`
	Misfire  Misfire        `json:"misfire"`
	Overlap  Overlap        `json:"overlap"`
	Executor Executor       `json:"executor"`
	Params   map[string]any `json:"params,omitempty"`
	// Env is the task's environment as written (the pipeline's, the
	// defaults' and its own, the task's winning), sorted by name: rendered
	// and its secrets resolved at dispatch.
	Env []EnvVar `json:"env,omitempty"`
	// WorkingDir is where a command task runs, as written (it may hold
	// templates); "" runs it in the directory of its pipeline's file.
	WorkingDir string `json:"working_dir,omitempty"`
	// WorkingDirTemplate is the parsed WorkingDir when it holds templates.
	WorkingDirTemplate *template.Template `json:"-"`
	Pos                Pos                `json:"-"`
}

// ID returns the task's global name, `pipeline.task`.
func (t *Task) ID() string { return t.Pipeline + "." + t.Name }

// Pipeline is one parsed and validated pipeline file.
type Pipeline struct {
	Name         string         `json:"pipeline"`
	File         string         `json:"file"`
	Group        string         `json:"group"`
	Timezone     string         `json:"timezone"`
	Location     *time.Location `json:"-"`
	ScheduleSpec string         `json:"schedule,omitempty"`
	Schedule     *Schedule      `json:"-"`
	Misfire      Misfire        `json:"misfire"`
	Overlap      Overlap        `json:"overlap"`
	Tasks        []*Task        `json:"tasks"`
	Pos          Pos            `json:"-"`
	// SchedulePos is where `schedule:` is written, for errors about it.
	SchedulePos Pos `json:"-"`
	// ZoneDefault says the file names no timezone: Timezone is
	// DefaultTimezone.
	ZoneDefault bool `json:"-"`
	// ScheduleBroken says a `schedule:` or `cron:` of the file did not
	// parse (an error says so): which tasks its schedules reach is unknown.
	ScheduleBroken bool `json:"-"`

	byName map[string]*Task
	env    map[string]EnvVar // the pipeline-level env, merged into each task's
}

// Task returns the task called name, or nil.
func (p *Pipeline) Task(name string) *Task { return p.byName[name] }

// TaskNames returns the names of the tasks in file order.
func (p *Pipeline) TaskNames() []string {
	names := make([]string, len(p.Tasks))
	for i, t := range p.Tasks {
		names[i] = t.Name
	}
	return names
}
