package store

import (
	"fmt"
	"sync/atomic"
)

// FaultFunc decides whether a write transaction fails on purpose. It is asked
// with what the transaction does ("transition batch", "renew lease", "create
// run" …) after every statement of the transaction ran and before it commits.
type FaultFunc func(what string) error

// faultHook holds the FaultFunc installed by SetFault, if any.
type faultHook struct{ p atomic.Pointer[FaultFunc] }

// SetFault installs f on s, the seam of the deterministic simulator
// (sim): when f returns an error, the transaction is rolled back and
// the write fails as when the database breaks between the last statement
// and the commit: a driver error f returns (a *mysql.MySQLError, say) is
// classified as the store classifies real ones (see Classify), and any
// other error fails the write with ErrUnavailable. Nothing is half-written.
// nil removes the hook. Production code never sets it.
func SetFault(s *Store, f FaultFunc) {
	if f == nil {
		s.faults.p.Store(nil)
		return
	}
	s.faults.p.Store(&f)
}

// fault returns the injected failure of a write transaction, if any.
func (s *Store) fault(what string) error {
	f := s.faults.p.Load()
	if f == nil {
		return nil
	}
	if err := (*f)(what); err != nil {
		if isDriverError(err) {
			return fmt.Errorf("store: %s: commit: %w", what, translate(err))
		}
		return fmt.Errorf("store: %s: commit: %w: %w", what, ErrUnavailable, err)
	}
	return nil
}
