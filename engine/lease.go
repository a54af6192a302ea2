package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/store"
)

// keeper holds the scheduler lease of one term as primary: it renews it on a
// timer of its own, in a goroutine of its own, so that no amount of work in
// the scheduling loop (a 10,000-instance burst, a slow window load, a
// definition sync) can make a renewal late. The loop only reads whether the
// lease is safely held, which is an atomic load, and hears of a lost or
// retaken lease through events. Safe for concurrent use.
type keeper struct {
	st     *store.Store
	holder string
	ttl    time.Duration
	every  time.Duration
	now    func() time.Time
	log    *slog.Logger

	epoch    atomic.Int64
	until    atomic.Int64 // UnixNano of the expiry of the last renewal
	released atomic.Bool
	// resigned: the primary is giving the lease up (a primary that cannot
	// write): nothing more is written under it, and what this process
	// still learns is left to the next primary, as after a lost lease.
	resigned atomic.Bool
	gone     atomic.Bool            // the store's file was deleted or replaced: nothing is safe to write
	alert    func(Alert)            // raises an alert (the store file gone), once per loss
	fault    func(error, time.Time) // notes the outcome of each write on the lease (nil: a success)

	lateMax  atomic.Int64 // the renewal done the latest past its due time so far, ns
	lateHist prometheus.Histogram

	events chan leaseEvent
	ahead  chan struct{} // renewed ahead of a long write (renewAhead): the timer counts from then
	mu     sync.Mutex    // serialises store calls on the lease (renew, retake, release)
}

// leaseEvent tells the loop that the lease was lost for good (err set) or
// taken again under a new epoch after a loss (retaken).
type leaseEvent struct {
	err     error
	retaken store.Lease
}

func newKeeper(st *store.Store, cfg Config, l store.Lease, lateHist prometheus.Histogram) *keeper {
	k := &keeper{st: st, holder: cfg.Holder, ttl: cfg.LeaseTTL, every: cfg.LeaseRenew, now: cfg.Now, log: cfg.Logger,
		lateHist: lateHist, events: make(chan leaseEvent, 4), ahead: make(chan struct{}, 1)}
	k.set(l)
	return k
}

func (k *keeper) set(l store.Lease) {
	k.epoch.Store(l.Epoch)
	k.until.Store(l.ExpiresAt.UnixNano())
}

// held reports whether the lease is safely held at now for writes of epoch:
// a renewal must have succeeded within TTL − renewal period, so that work
// stops before the lease could expire, and the epoch must be the current one.
func (k *keeper) held(now time.Time, epoch int64) bool {
	if k == nil || k.released.Load() || k.resigned.Load() || k.gone.Load() || epoch != k.epoch.Load() {
		return false
	}
	return now.Before(time.Unix(0, k.until.Load()).Add(-k.every))
}

// expiry returns the expiry of the lease as last renewed.
func (k *keeper) expiry() time.Time { return time.Unix(0, k.until.Load()) }

// run renews the lease every renewal period until ctx ends or the lease is
// lost for good. It is the keeper's only goroutine; its owner waits for it.
func (k *keeper) run(ctx context.Context) {
	next := k.now().Add(k.every)
	t := time.NewTimer(k.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.ahead:
			next = k.now().Add(k.every)
			t.Reset(k.every)
			continue
		case <-t.C:
		}
		now := k.now()
		lost := k.renew(ctx, now)
		// Late is when the renewal was done, past when it was due: a timer
		// that fired late and a database that answered slowly both count.
		if late := k.now().Sub(next); late > 0 {
			k.observeLate(late)
		}
		if lost != nil {
			k.send(ctx, leaseEvent{err: lost})
			return
		}
		next = next.Add(k.every)
		if d := k.now().Sub(next); d > 0 {
			next = k.now() // a renewal that took longer than the period: pace from now
		}
		t.Reset(max(next.Sub(k.now()), 0))
	}
}

func (k *keeper) observeLate(late time.Duration) {
	if k.lateHist != nil {
		k.lateHist.Observe(late.Seconds())
	}
	for {
		old := k.lateMax.Load()
		if int64(late) <= old || k.lateMax.CompareAndSwap(old, int64(late)) {
			return
		}
	}
}

// renew extends the lease. A database that does not answer only stops
// dispatch until a renewal succeeds; a lease taken by another process is
// lost for good (returned), and one nobody took is taken again under a new
// epoch (an event to the loop, which redoes what a takeover does).
func (k *keeper) renew(ctx context.Context, now time.Time) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.released.Load() {
		return nil
	}
	epoch := k.epoch.Load()
	if err := k.st.Check(); err != nil {
		k.noteFault(err, now)
		if !k.gone.Swap(true) {
			k.log.Error("store_file_gone", "err", err)
			if k.alert != nil {
				k.alert(Alert{Kind: AlertStoreGone, At: now, Message: err.Error() + "; dispatch stopped"})
			}
		}
		return nil // dispatch stops (held is false) until the file is back
	}
	if k.gone.Swap(false) {
		k.log.Warn("store_file_back")
	}
	l, err := k.st.RenewLease(ctx, store.LeaseParams{Holder: k.holder, Epoch: epoch, TTL: k.ttl, Now: now})
	k.noteFault(err, now)
	switch {
	case errors.Is(err, store.ErrNotLeader):
		k.log.Warn("lease_lost", "epoch", epoch, "err", err)
	case err != nil:
		k.log.Warn("lease_renew_failed", "epoch", epoch, "err", err, "dispatching", k.held(now, epoch))
		return nil
	default:
		k.until.Store(l.ExpiresAt.UnixNano())
		return nil
	}
	l, err = k.st.AcquireLease(ctx, store.LeaseParams{Holder: k.holder, TTL: k.ttl, Now: now})
	k.noteFault(err, now)
	if errors.Is(err, store.ErrLeaseHeld) {
		k.log.Error("lease_lost_for_good", "epoch", epoch, "err", err)
		k.until.Store(0)
		return fmt.Errorf("%w: %w", errLeaseLost, err)
	}
	if err != nil {
		k.log.Warn("lease_retake_failed", "epoch", epoch, "err", err)
		return nil // the database may be back soon: dispatch stays stopped until a renewal or a retake succeeds
	}
	k.log.Warn("lease_retaken", "old_epoch", epoch, "epoch", l.Epoch)
	k.set(l)
	k.send(ctx, leaseEvent{retaken: l})
	return nil
}

// noteFault passes the outcome of a write on the lease to fault, if set.
func (k *keeper) noteFault(err error, now time.Time) {
	if k.fault != nil {
		k.fault(err, now)
	}
}

// longWrite is how many rows make a write long: before one (a run of that
// many instances created, that many task definitions synced) the loop
// renews the lease ahead (renewAhead).
const longWrite = 1000

// renewAhead renews the lease now, from the loop, before a write that holds
// the store long: a run of 10,000 instances or the sync of 10,000
// definitions held SQLite's one writer for a second on a loaded machine,
// and the renewal falling due meanwhile waited for it (1.1 s late in the
// 10,000-command burst, against a third of the TTL allowed). Renewed just
// before, the next renewal falls due a whole period after the write began.
// A failure is left to the timer's renewal, which handles it.
func (k *keeper) renewAhead(ctx context.Context) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.released.Load() || k.gone.Load() {
		return
	}
	l, err := k.st.RenewLease(ctx, store.LeaseParams{Holder: k.holder, Epoch: k.epoch.Load(), TTL: k.ttl, Now: k.now()})
	if err != nil {
		return
	}
	k.until.Store(l.ExpiresAt.UnixNano())
	select {
	case k.ahead <- struct{}{}:
	default:
	}
}

// send hands ev to the loop unless the term is over.
func (k *keeper) send(ctx context.Context, ev leaseEvent) {
	select {
	case k.events <- ev:
	case <-ctx.Done():
	}
}

// release gives the lease up at once, so that a standby takes over without
// waiting for it to expire; from then on held is false.
func (k *keeper) release(ctx context.Context) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.released.Swap(true) {
		return
	}
	if err := k.st.ReleaseLease(ctx, store.LeaseParams{Holder: k.holder, Epoch: k.epoch.Load(), Now: k.now()}); err != nil {
		k.log.Warn("lease_release_failed", "err", err)
		return
	}
	k.log.Info("lease_released", "epoch", k.epoch.Load())
}

// leadership is the loop's side of the lease: the term it holds as primary
// (its epoch, the keeper that renews it, the fenced handle of every write),
// and what it learnt of the term before (who held it, when it ended). The
// keeper keeps the lease on its own timer; leadership only reads it, so
// that asking whether this process may write is an atomic load.
//
// Its rule: a write or a start happens only while the lease is safely held
// for the loop's epoch (leader); every store write goes through the fence
// of that epoch (Engine.w), which the store refuses once the epoch is
// stale. It must not renew the lease (the keeper does) nor decide what
// runs.
type leadership struct {
	epoch int64
	lease atomic.Pointer[keeper] // of the current term as primary; nil as a standby
	// fence is the one handle of every write of this process as primary,
	// conditioned on the epoch it holds. Read by Alert from other
	// goroutines, hence atomic.
	fence      atomic.Pointer[store.Fence]
	prevHolder string    // who held the lease before this term ("": nobody yet)
	termStart  time.Time // when this term as primary began: fires due before it are catch-ups
	// prevLeaseEnd is when the lease of the previous term expired (on its
	// holder's clock, as every fire time it recorded): it started no attempt
	// claimed ahead for that time or later. Zero: unknown.
	prevLeaseEnd time.Time
	// restart: the start of a term taken again (retaken) failed, and is
	// redone before anything else at the next turns (finishRetake).
	restart bool
}

// fenced is what every component that writes asks of the leadership: the
// fence of the term, through which its writes go, and the term's epoch,
// which the transitions it records carry.
type fenced interface {
	w() *store.Fence
	termEpoch() int64
}

// termEpoch is the epoch of the term: every write of the term is fenced by it.
func (s *leadership) termEpoch() int64 { return s.epoch }

// renewAhead renews the lease before a long write, so that the write does
// not outlast it.
func (s *leadership) renewAhead(ctx context.Context) { s.lease.Load().renewAhead(ctx) }

// begin starts a term under lease l, kept by k, writing through fence.
func (s *leadership) begin(l store.Lease, k *keeper, fence *store.Fence, now time.Time) {
	s.epoch, s.termStart = l.Epoch, now
	s.lease.Store(k)
	s.fence.Store(fence)
}

// took records, for lease l just taken, what is known of the lease before
// it (prev, when known): who held it, and, when l directly follows it, when
// it ended: the previous term started nothing from then on.
func (s *leadership) took(l, prev store.Lease, known bool) {
	s.prevHolder, s.prevLeaseEnd = "", time.Time{}
	if !known {
		return
	}
	s.prevHolder = prev.Holder
	if l.Epoch == prev.Epoch+1 {
		s.prevLeaseEnd = prev.ExpiresAt
	}
}

// end ends the term: this process stands by, holding no lease.
func (s *leadership) end() { s.lease.Store(nil) }

// retake moves the term to the epoch of lease l, which the keeper took
// again after losing it; who held it meanwhile is not known, so there is
// no claimed-ahead horizon.
func (s *leadership) retake(l store.Lease, fence *store.Fence) {
	s.restart = false
	s.prevLeaseEnd = time.Time{}
	s.epoch = l.Epoch
	s.fence.Store(fence)
}

// leader reports whether the lease is safely held for the loop's epoch (see
// keeper.held): a renewal must have succeeded within LeaseTTL − LeaseRenew,
// so that dispatch stops before the lease could expire.
func (s *leadership) leader(now time.Time) bool {
	return s.lease.Load().held(now, s.epoch)
}

// handover reports, for a term just begun, the holder it took over from
// when that is a change of primary: not the first scheduler on this store,
// nor a process taking back the lease it held (by the same --holder name).
func (s *leadership) handover(holder string) (from string, changed bool) {
	return s.prevHolder, s.prevHolder != "" && s.prevHolder != holder
}

// w returns the fenced write handle of the current term; before the first
// lease it holds no epoch and refuses every write.
func (e *Engine) w() *store.Fence {
	if f := e.leadership.fence.Load(); f != nil {
		return f
	}
	return e.st.Fence(0)
}

// Primary reports whether this process safely holds the scheduler lease now.
// It never waits on the loop.
func (e *Engine) Primary() bool {
	k := e.leadership.lease.Load()
	return k != nil && k.held(e.cfg.Now(), k.epoch.Load())
}
