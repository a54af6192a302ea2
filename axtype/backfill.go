package axtype

import "time"

// Backfill is a stored backfill: its parameters and progress, so that an
// interrupted backfill resumes where it stopped.
type Backfill struct {
	ID         int64     `json:"id"`
	Pipeline   string    `json:"pipeline"`
	Spec       string    `json:"spec"` // JSON parameters
	State      string    `json:"state"`
	TotalRuns  int       `json:"total_runs"`
	DoneRuns   int       `json:"done_runs"`
	FailedRuns int       `json:"failed_runs"`
	Actor      string    `json:"actor"`
	Error      string    `json:"error,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Progress counts a backfill's instances.
type Progress struct {
	Ended    int `json:"ended"`    // SUCCESS, FAILED or KILLED
	Awaiting int `json:"awaiting"` // WAITING manual gates nobody approved: not done
	Total    int `json:"total"`    // all it created
}

// Backfill rerun policies: what happens to (task, logical time) pairs that
// have instances already.
const (
	RerunNone   = "none"   // existing instances are left alone: only gaps run (default)
	RerunFailed = "failed" // succeeded ones are kept; failed, killed and missing ones run
	RerunAll    = "all"    // every selected task runs
)

// BackfillSpec is what a backfill runs; it is stored as the record's spec.
type BackfillSpec struct {
	Pipeline      string      `json:"pipeline"`
	From          time.Time   `json:"from"`
	To            time.Time   `json:"to"`
	Select        string      `json:"select,omitempty"`
	Tasks         []string    `json:"tasks"` // the selection, in dependency order
	Times         []time.Time `json:"times"` // logical times, in the order to run them
	MaxActiveRuns int         `json:"max_active_runs"`
	Rerun         string      `json:"rerun"`
	StopOnFailure bool        `json:"stop_on_failure,omitempty"`
	// ApproveManual approves the manual gates of its runs up front
	// (--approve-manual); without it a run stops at its gates until an
	// operator approves them (ax trigger), and is not done meanwhile.
	ApproveManual bool `json:"approve_manual,omitempty"`
	// WaitCross makes its runs wait for their upstreams in other pipelines
	// (--wait-cross), matched as a scheduled run's are (defs.CrossWindow);
	// without it they count as done.
	WaitCross bool `json:"wait_cross,omitempty"`
	// Waits are, with WaitCross, the runs of other pipelines its runs wait
	// for, per logical time: what a dry run shows.
	Waits []CrossWait `json:"waits,omitempty"`
	// Hold starts it even though a pause covers some of its tasks (--hold):
	// their instances wait PAUSED until the resume. Without it such a
	// backfill is refused (PausedError).
	Hold bool `json:"hold,omitempty"`
	// Params are every run's params (--param), over the tasks'.
	Params map[string]string `json:"params,omitempty"`
	// Gates are the manual tasks of the selection: each run waits at them
	// until they are approved (up front with ApproveManual, or for every
	// run at once with ApproveBackfill).
	Gates []string `json:"gates,omitempty"`
	// ApprovedBy names who approved the gates of every run after the
	// backfill started (ApproveBackfill); empty with --approve-manual.
	ApprovedBy string `json:"approved_by,omitempty"`
}

// CrossWait is one upstream in another pipeline that a backfill run waits
// for: Task's instance at logical time At waits for Upstream's run in Window.
type CrossWait struct {
	At       time.Time `json:"at"`
	Task     string    `json:"task"`
	Upstream string    `json:"upstream"`
	Window   string    `json:"window"`
}

// Backfill record states.
const (
	BackfillPending   = "pending"
	BackfillRunning   = "running"
	BackfillDone      = "done"
	BackfillFailed    = "failed" // stopped on a failure (--stop-on-failure)
	BackfillCancelled = "cancelled"
)
