package runner

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"
)

// Attempt is one dispatch of a task instance.
type Attempt struct {
	Pipeline    string
	Task        string // name within the pipeline
	InstanceID  int64
	Ticket      string // unique per dispatch: the idempotency key
	LogicalTime time.Time
	Deadline    time.Time
	Params      map[string]any
	// Env is the task's environment, rendered and with its secrets'
	// values: a command's variables, an HTTP dispatch's env, a function's
	// to read. It is never stored nor logged.
	Env map[string]string
	// SecretEnv names the variables of Env that hold a secret, sorted:
	// whoever reports the attempt's output and error masks their values.
	SecretEnv []string
	// TicketTTL is how long an executor should remember the ticket's result:
	// the task's longest retry span plus five minutes.
	TicketTTL time.Duration
}

// Status is the outcome of an attempt.
type Status string

// Outcomes.
const (
	StatusSuccess Status = "success"
	StatusFailed  Status = "failed"
	StatusKilled  Status = "killed"  // cancelled by a kill
	StatusTimeout Status = "timeout" // the deadline passed
)

// Result is what an executor reports for an attempt.
type Result struct {
	Ticket    string
	Status    Status
	Duration  time.Duration
	Error     string
	Permanent bool   // the failure is not worth a retry
	Refused   bool   // no executor took it (busy, re-entrant): try later, not a failure
	Output    []byte // plain output, bounded (an HTTP executor of protocol v1 without log records)
	// Log is the attempt's output as records (see [Output]) when it did not
	// go to an Output on the attempt's context (an HTTP executor's report);
	// LogDropped counts the bytes its executor dropped over its limit.
	Log        []byte
	LogDropped int64
	// ExitCode is a command's exit status; nil when no process exited by
	// itself (a function, a signal, a start failure).
	ExitCode *int
	// Executor names what ran the attempt: "local:HOST" for in-process and
	// command tasks, the executor's URL for HTTP tasks.
	Executor string
	// Argv is the command a command task ran, its templates rendered for
	// this attempt; nil for other executors and when rendering failed.
	Argv []string
}

// Local returns the executor name of attempts that run inside the
// scheduler's process: "local:" and the host name.
var Local = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return "local:" + host
})

// Executor runs attempts. Execute blocks until the attempt ends or ctx is
// done; it returns an error only when it could not start the attempt at all.
type Executor interface {
	Execute(ctx context.Context, a Attempt) (Result, error)
}

// ErrPermanent marks a task error as not worth retrying: wrap it
// (fmt.Errorf("bad input: %w", runner.ErrPermanent)) and the attempt fails
// without retries.
var ErrPermanent = errors.New("permanent failure")

// ErrKilled is the cause of a context cancelled by a kill.
var ErrKilled = errors.New("runner: killed by an operator")

// ErrInterrupted is the cause (or wraps the cause) of a context cancelled
// because the scheduler stops and gives the attempt back to run again: work
// that runs elsewhere (an HTTP executor) must stop as for a kill, or the
// attempt would run twice at once.
var ErrInterrupted = errors.New("runner: interrupted by the scheduler's shutdown")

// finish classifies err from work that ran under ctx since start.
func finish(ctx context.Context, a Attempt, start time.Time, err error) Result {
	r := Result{Ticket: a.Ticket, Duration: time.Since(start), Status: StatusSuccess}
	switch {
	case errors.Is(context.Cause(ctx), ErrKilled):
		r.Status, r.Error = StatusKilled, ErrKilled.Error()
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		r.Status, r.Error = StatusTimeout, "deadline exceeded at "+a.Deadline.UTC().Format(time.RFC3339)
	case err != nil:
		r.Status, r.Error, r.Permanent = StatusFailed, err.Error(), errors.Is(err, ErrPermanent)
	}
	return r
}
