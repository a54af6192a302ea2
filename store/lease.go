package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"
)

// Lease is the leader lease row. Epoch grows by one each time the
// lease changes hands or is taken again after expiry: it is the fencing token
// every state-changing write of the primary carries.
type Lease struct {
	Name      string    `json:"name"`
	Holder    string    `json:"holder"`
	Epoch     int64     `json:"epoch"`
	ExpiresAt time.Time `json:"expires_at"`
	RenewedAt time.Time `json:"renewed_at"`
	// Broke, after AcquireLease on MySQL, says which connections of a
	// stalled holder it ended to take the lease (see breakStalledHolder).
	Broke string `json:"-"`
}

// LeaseParams asks for, renews or releases a lease.
type LeaseParams struct {
	Name   string // zero means LeaseName
	Holder string // a unique id of the process, such as host:pid:random
	// From, for AcquireLease: a holder whose unexpired lease Holder takes
	// as its own (a process handing its lease on to a name it learnt only
	// after taking it).
	From  string
	Epoch int64         // for renew and release: the epoch held
	TTL   time.Duration // for acquire and renew
	Now   time.Time
}

// AcquireLease grants the lease to p.Holder with a new epoch when nobody
// holds it, or its holder let it expire. It fails with ErrLeaseHeld while
// another holder's lease is unexpired.
func (s *Store) AcquireLease(ctx context.Context, p LeaseParams) (Lease, error) {
	s = s.acquireView()
	name := leaseName(p.Name)
	if p.Holder == "" || p.TTL <= 0 {
		return Lease{}, fmt.Errorf("store: acquire lease: holder and a positive TTL are required")
	}
	l, err := s.acquireLease(ctx, name, p)
	if errors.Is(err, ErrConflict) && s.d == dialectMySQL {
		// The lease row or its fence row stayed locked past acquireLockWait:
		// if the lease has expired, its holder is stalled inside a fenced
		// write.
		broke, berr := s.breakStalledHolder(ctx, name, p.Now)
		if berr != nil {
			return Lease{}, fmt.Errorf("%w; and its holder's connections could not be ended: %w", err, berr)
		}
		if broke != "" {
			l, err = s.acquireLease(ctx, name, p)
			l.Broke = broke
		}
	}
	return l, err
}

func (s *Store) acquireLease(ctx context.Context, name string, p LeaseParams) (Lease, error) {
	var l Lease
	err := s.inTxLease(ctx, "acquire lease", func(tx *sql.Tx) error {
		cur, err := s.lease(ctx, tx, name, true)
		now, exp := p.Now.UnixMilli(), p.Now.Add(p.TTL).UnixMilli()
		switch {
		case errors.Is(err, ErrNotFound):
			b := s.sb.Insert("leases").Columns("name", "holder", "epoch", "expires_at", "renewed_at").Values(name, p.Holder, 1, exp, now)
			if _, err := s.exec(ctx, tx, "create lease", b); err != nil {
				if errors.Is(err, ErrDuplicate) {
					return fmt.Errorf("%w: another process created it at the same moment", ErrLeaseHeld)
				}
				return err
			}
			l = Lease{Name: name, Holder: p.Holder, Epoch: 1, ExpiresAt: time.UnixMilli(exp).UTC(), RenewedAt: time.UnixMilli(now).UTC()}
			return s.setFence(ctx, tx, name, l)
		case err != nil:
			return err
		case cur.Holder != p.Holder && (p.From == "" || cur.Holder != p.From) && cur.ExpiresAt.After(p.Now):
			return fmt.Errorf("%w: %s holds epoch %d until %s", ErrLeaseHeld, cur.Holder, cur.Epoch, cur.ExpiresAt.Format(time.RFC3339Nano))
		}
		b := s.sb.Update("leases").Set("holder", p.Holder).Set("epoch", cur.Epoch+1).Set("expires_at", exp).Set("renewed_at", now).
			Where(sq.Eq{"name": name, "epoch": cur.Epoch})
		n, err := s.exec(ctx, tx, "take lease", b)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: it changed hands while being taken", ErrLeaseHeld)
		}
		l = Lease{Name: name, Holder: p.Holder, Epoch: cur.Epoch + 1, ExpiresAt: time.UnixMilli(exp).UTC(), RenewedAt: time.UnixMilli(now).UTC()}
		return s.setFence(ctx, tx, name, l)
	})
	return l, err
}

// setFence writes the epoch of lease l to its fence row (see FenceName),
// creating the row if it is missing, inside the transaction that takes the
// lease. On MySQL its UPDATE waits for the fenced writes in progress of the
// previous epoch (they hold the fence row's shared lock) and, past
// acquireLockWait, fails with ErrConflict; AcquireLease then ends the
// connections of a holder stalled inside one (breakStalledHolder).
func (s *Store) setFence(ctx context.Context, tx *sql.Tx, name string, l Lease) error {
	fence := fenceName(name)
	up := s.sb.Update("leases").Set("holder", l.Holder).Set("epoch", l.Epoch).Set("expires_at", l.ExpiresAt.UnixMilli()).
		Set("renewed_at", l.RenewedAt.UnixMilli()).Where(sq.Eq{"name": fence})
	n, err := s.exec(ctx, tx, "fence writes of the new epoch", up)
	if err != nil || n > 0 {
		return err
	}
	in := s.sb.Insert("leases").Columns("name", "holder", "epoch", "expires_at", "renewed_at").
		Values(fence, l.Holder, l.Epoch, l.ExpiresAt.UnixMilli(), l.RenewedAt.UnixMilli())
	if _, err := s.exec(ctx, tx, "create the fence row", in); err != nil {
		if errors.Is(err, ErrDuplicate) {
			return fmt.Errorf("%w: another process took it at the same moment", ErrLeaseHeld)
		}
		return err
	}
	return nil
}

// RenewLease extends the lease held by p.Holder at p.Epoch. It fails with
// ErrNotLeader when the lease changed hands or expired: the caller must stop
// dispatching at once.
func (s *Store) RenewLease(ctx context.Context, p LeaseParams) (Lease, error) {
	s = s.leaseView()
	name := leaseName(p.Name)
	var l Lease
	err := s.inTxLease(ctx, "renew lease", func(tx *sql.Tx) error {
		now, exp := p.Now.UnixMilli(), p.Now.Add(p.TTL).UnixMilli()
		b := s.sb.Update("leases").Set("expires_at", exp).Set("renewed_at", now).
			Where(sq.Eq{"name": name, "holder": p.Holder, "epoch": p.Epoch}).Where(sq.GtOrEq{"expires_at": now})
		n, err := s.exec(ctx, tx, "renew lease", b)
		if err != nil {
			return err
		}
		if n == 0 {
			cur, err := s.lease(ctx, tx, name, false)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			if cur.Holder == p.Holder && cur.Epoch == p.Epoch {
				return fmt.Errorf("%w: the lease of %s at epoch %d expired at %s", ErrNotLeader, p.Holder, p.Epoch, cur.ExpiresAt.Format(time.RFC3339Nano))
			}
			return fmt.Errorf("%w: renew epoch %d for %s, but the lease is %s at epoch %d until %s", ErrNotLeader, p.Epoch, p.Holder,
				cur.Holder, cur.Epoch, cur.ExpiresAt.Format(time.RFC3339Nano))
		}
		l = Lease{Name: name, Holder: p.Holder, Epoch: p.Epoch, ExpiresAt: time.UnixMilli(exp).UTC(), RenewedAt: time.UnixMilli(now).UTC()}
		return nil
	})
	return l, err
}

// ReleaseLease gives the lease up at once (it expires now) if p.Holder still
// holds p.Epoch, so that a standby can take over without waiting for the TTL.
func (s *Store) ReleaseLease(ctx context.Context, p LeaseParams) error {
	s = s.leaseView()
	return s.inTxLease(ctx, "release lease", func(tx *sql.Tx) error {
		b := s.sb.Update("leases").Set("expires_at", p.Now.UnixMilli()).
			Where(sq.Eq{"name": leaseName(p.Name), "holder": p.Holder, "epoch": p.Epoch})
		n, err := s.exec(ctx, tx, "release lease", b)
		if err == nil && n == 0 {
			return fmt.Errorf("%w: release epoch %d for %s", ErrNotLeader, p.Epoch, p.Holder)
		}
		return err
	})
}

// GetLease reads the lease row, or ErrNotFound. It is one statement on the
// read pool (its own consistent read), which the writes never hold.
func (s *Store) GetLease(ctx context.Context, name string) (Lease, error) {
	return s.lease(ctx, s.read, leaseName(name), false)
}

// rowQuerier is what a one-row read needs: a *sql.DB or a *sql.Tx.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) lease(ctx context.Context, tx rowQuerier, name string, lock bool) (Lease, error) {
	q := "SELECT name, holder, epoch, expires_at, renewed_at FROM leases WHERE name = ?"
	if lock {
		q += s.d.forUpdate()
	}
	var (
		l        Lease
		exp, ren int64
	)
	err := tx.QueryRowContext(ctx, q, name).Scan(&l.Name, &l.Holder, &l.Epoch, &exp, &ren)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, notFound("lease", name)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("store: read lease: %w", s.d.translate(err))
	}
	l.ExpiresAt, l.RenewedAt = time.UnixMilli(exp).UTC(), time.UnixMilli(ren).UTC()
	return l, nil
}

func leaseName(n string) string {
	if n == "" {
		return LeaseName
	}
	return n
}

// breakStalledHolder ends the connections that keep the lease row or its
// fence row (FenceName) locked when the lease has expired (MySQL): a holder
// stalled (SIGSTOP, a frozen VM) inside a fenced write holds the fence
// row's shared lock until it wakes, and
// would keep every standby from taking over for as long. Nothing is lost:
// the stalled transaction is rolled back, and its process, once awake,
// finds its connection gone and the lease taken. The connections are found
// by waiting for the row's lock on one connection and asking the server,
// on another, who blocks it (sys.innodb_lock_waits, else
// information_schema.INNODB_LOCK_WAITS); ending them needs the PROCESS
// privilege to see them and, for another user's, CONNECTION ADMIN. It
// returns what it ended ("" when the lease is still live or nothing blocks).
func (s *Store) breakStalledHolder(ctx context.Context, name string, now time.Time) (string, error) {
	cur, err := s.lease(ctx, s.read, name, false) // a consistent read: it takes no lock
	if err != nil || cur.ExpiresAt.After(now) {
		return "", nil // a live holder keeps its lease, and its locks
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return "", s.d.translate(err)
	}
	defer conn.Close()
	var self int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&self); err != nil {
		return "", s.d.translate(err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return "", s.d.translate(err)
	}
	defer tx.Rollback() //nolint:errcheck // it only waited for the lock
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		var epoch int64
		// The lease row and its fence row: a holder stalled inside a
		// fenced write holds the fence row's shared lock.
		_ = tx.QueryRowContext(ctx, "SELECT MAX(epoch) FROM leases WHERE name IN (?, ?)"+s.d.forUpdate(), name, fenceName(name)).Scan(&epoch)
	}()
	var blockers []int64
	var qerr error
	for deadline := time.Now().Add(time.Duration(acquireLockWait) * time.Second); len(blockers) == 0 && time.Now().Before(deadline); {
		select {
		case <-waited:
			return "", nil // the lock came: nothing to end
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		blockers, qerr = s.lockBlockers(ctx, self)
		if qerr != nil {
			break
		}
	}
	if len(blockers) == 0 {
		<-waited
		return "", qerr
	}
	var ended []string
	for _, id := range blockers {
		if id == self {
			continue
		}
		// KILL takes no placeholder; id is an integer read from the server.
		if _, err := s.db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
			<-waited
			return strings.Join(ended, ", "), fmt.Errorf("end connection %d: %w", id, s.d.translate(err))
		}
		ended = append(ended, strconv.FormatInt(id, 10))
	}
	<-waited
	return fmt.Sprintf("ended connection(s) %s of %s (epoch %d, expired at %s), which held the lease row or its fence row locked",
		strings.Join(ended, ", "), cur.Holder, cur.Epoch, cur.ExpiresAt.Format(time.RFC3339Nano)), nil
}

// lockBlockers returns the ids of the connections whose transactions block
// connection waiter's lock request.
func (s *Store) lockBlockers(ctx context.Context, waiter int64) ([]int64, error) {
	var firstErr error
	for _, q := range []string{
		"SELECT blocking_pid FROM sys.innodb_lock_waits WHERE waiting_pid = ?",
		`SELECT b.trx_mysql_thread_id FROM information_schema.INNODB_LOCK_WAITS w
		   JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id
		   JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id
		  WHERE r.trx_mysql_thread_id = ?`,
	} {
		rows, err := s.db.QueryContext(ctx, q, waiter)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err == nil && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		err = errors.Join(rows.Err(), rows.Close())
		if err == nil {
			return ids, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, fmt.Errorf("find who locks the lease row: %w", s.d.translate(firstErr))
}
