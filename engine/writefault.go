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
	turns int // writes of this kind that failed in a row
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
		f := &writeFault{err: err, since: now, turns: 1}
		if old := p.Load(); old != nil {
			f.since, f.turns = old.since, old.turns+1
		}
		p.Store(f)
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

// stepDownTurns is how many turns in a row must fail to write, over at
// least a lease TTL, before a primary gives up its lease (stepDownDue).
const stepDownTurns = 3

// stepDownDue is the rule by which a primary that still renews its lease
// but whose turns cannot write (f, the turns' fault) gives the lease up, so
// that a standby whose writes succeed takes over: the store is unavailable
// to it (a full disk, a read-only file, connections refused to this
// process), stepDownTurns turns in a row failed to write, and the first of
// them at least ttl ago. A brief failure does not hand the lease over; an
// error the store reads as permanent, or a conflict, does not count, since
// another primary would meet it too.
func stepDownDue(f *writeFault, now time.Time, ttl time.Duration) bool {
	return store.Classify(f.err) == store.Unavailable && f.turns >= stepDownTurns && now.Sub(f.since) >= ttl
}

// errGaveUpLease ends a term whose primary gave its lease up (giveUpLease).
var errGaveUpLease = errors.New("engine: gave the lease up")

// giveUpLease ends a term whose turns could not write (stepDownDue):
// attempts still running here are cancelled and, like the results of those
// that ended, left to the next primary through the inbox (leaveTerm); the
// lease is released, and the process stands by and asks for it again only
// after a lease TTL (errGaveUpLease), so that a standby takes it first.
// WriteFault keeps the turns' error, so /readyz answers 503 with it until
// a turn of a later term writes; that term counts its own failed turns.
func (e *Engine) giveUpLease(k *keeper, cancelExec context.CancelCauseFunc) error {
	cause, f := e.stepDown, e.faults.turn.Load()
	e.log.Error("lease_given_up", "epoch", e.leadership.epoch, "failed_turns", f.turns,
		"since", f.since.UTC().Format(time.RFC3339), "err", cause)
	e.stepDown, e.failures, e.retryAt = nil, 0, time.Time{}
	e.faults.turn.Store(&writeFault{err: f.err, since: f.since})
	// As after a lost lease: the term is over before its attempts are
	// cancelled, so that none of them is judged here as given back (an HTTP
	// executor may still be running it); the next primary judges them.
	k.resigned.Store(true)
	e.leaveTerm(cancelExec, fmt.Errorf("engine: the primary gave up its lease: its writes fail: %w", cause))
	k.release(context.Background())
	return fmt.Errorf("%w: %w: %w: %d turns in a row could not write since %s: %w", errLeaseLost, errStartUnavailable, errGaveUpLease,
		f.turns, f.since.UTC().Format(time.RFC3339), cause)
}
