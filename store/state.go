package store

import (
	"errors"
	"fmt"

	"github.com/ax-sched/ax/axtype"
)

// Errors of the store. Callers test them with errors.Is.
var (
	// ErrNotFound: no row with that id (or ticket, or name).
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: the row exists but its version or state is no longer the
	// one the caller read: another caller won the race. Drop the trigger.
	ErrConflict = errors.New("store: lost the race: version or state changed")
	// ErrIllegalTransition: the state table does not allow the move.
	ErrIllegalTransition = errors.New("store: illegal transition")
	// ErrNotLeader: the caller's lease epoch is no longer current.
	ErrNotLeader = errors.New("store: no longer the leader: lease epoch is not current")
	// ErrLeaseHeld: another holder has an unexpired lease.
	ErrLeaseHeld = errors.New("store: lease held by another process")
	// ErrDuplicate: a row with that unique key exists already.
	ErrDuplicate = errors.New("store: already exists")
	// ErrUnavailable: the database could not be reached or the connection
	// broke; the operation may or may not have been applied only when the
	// error says so, and never half-applied.
	ErrUnavailable = errors.New("store: database unavailable")
	// ErrSchema: the database's schema is not one this ax can use.
	ErrSchema = errors.New("store: schema mismatch")
)

// TransitionError describes a refused transition; it wraps one of
// ErrNotFound, ErrConflict, ErrIllegalTransition or ErrNotLeader.
type TransitionError struct {
	InstanceID int64
	From, To   axtype.State
	// Actual state and version, when the instance exists.
	ActualState   axtype.State
	ActualVersion int64
	Err           error
}

func (e *TransitionError) Error() string {
	switch {
	case errors.Is(e.Err, ErrIllegalTransition):
		allowed := axtype.Next(e.From)
		return fmt.Sprintf("instance %d: %s → %s: %v (from %s it may move to %v)", e.InstanceID, e.From, e.To, e.Err, e.From, allowed)
	case errors.Is(e.Err, ErrConflict):
		return fmt.Sprintf("instance %d: %s → %s: %v (it is %s at version %d)", e.InstanceID, e.From, e.To, e.Err, e.ActualState, e.ActualVersion)
	default:
		return fmt.Sprintf("instance %d: %s → %s: %v", e.InstanceID, e.From, e.To, e.Err)
	}
}

func (e *TransitionError) Unwrap() error { return e.Err }
