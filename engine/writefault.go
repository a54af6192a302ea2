package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/store"
)

// writeFaults remembers why this process cannot write to its store. The
// lease's writes (renewals, retakes, a standby's requests for the lease)
// and the loop's turns each set and clear their own: a fault is set by a
// failed write and cleared only by the next write of the same kind that
// succeeds, so that /readyz says "cannot write" from the first failure
// until the store takes writes again.
type writeFaults struct {
	lease, turn atomic.Pointer[writeFault]
}

type writeFault struct {
	err   error
	since time.Time
}

// note records the outcome of a write of one kind (p): err nil clears it.
// The answers of a store that works (the lease is held by another, or no
// longer ours) and a cancelled call are no fault, and change nothing.
func (f *writeFaults) note(p *atomic.Pointer[writeFault], err error, now time.Time) {
	switch {
	case err == nil:
		p.Store(nil)
	case errors.Is(err, store.ErrLeaseHeld), errors.Is(err, store.ErrNotLeader),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
	default:
		since := now
		if old := p.Load(); old != nil {
			since = old.since
		}
		p.Store(&writeFault{err: err, since: since})
	}
}

func (f *writeFaults) noteLease(err error, now time.Time) { f.note(&f.lease, err, now) }
func (f *writeFaults) noteTurn(err error, now time.Time)  { f.note(&f.turn, err, now) }

// WriteFault reports why this process cannot write to its store now, or
// nil: its last renewal or request of the lease failed, or its last turn
// as primary stopped on a store error (a full disk, a read-only file, a
// database that refuses the connection or the value). It is cleared by the
// next one that succeeds. Safe for concurrent use.
func (e *Engine) WriteFault() error {
	for _, p := range []*atomic.Pointer[writeFault]{&e.faults.lease, &e.faults.turn} {
		if f := p.Load(); f != nil {
			return fmt.Errorf("cannot write to the store since %s: %w", f.since.UTC().Format(time.RFC3339), f.err)
		}
	}
	return nil
}
