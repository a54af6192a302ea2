// Package cli holds the ax client commands, one place per command: its
// flags (NewXCmd) and what it does, reaching the scheduler through a
// Scheduler (the typed API client, or with --store a store read directly:
// package direct) and writing what it found to an io.Writer. cmd/ax is the
// binary: it builds the root command from these and runs ax server. Errors
// carry the command's exit status (ExitError).
package cli

import "fmt"

// Exit statuses of ax.
const (
	ExitOK     = 0
	ExitFailed = 1 // the command ran and found a problem (invalid files, a failed task)
	ExitUsage  = 2 // the command was called wrongly
	ExitGated  = 3 // ax run: it stopped at manual gates nobody approved (--approve-manual approves them)
)

// ExitError carries an exit status out of a command.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Usage marks an error as a usage error (exit status 2).
func Usage(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Fail is err as a failure of the command (exit status 1).
func Fail(err error) error { return &ExitError{Code: ExitFailed, Err: err} }

// Failed reports a finished command that found problems, already printed.
func Failed() error { return &ExitError{Code: ExitFailed} }
