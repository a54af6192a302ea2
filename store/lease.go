package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"
)

// Lease is the leader lease row (R25, R26). Epoch grows by one each time the
// lease changes hands or is taken again after expiry: it is the fencing token
// every state-changing write of the primary carries.
type Lease struct {
	Name      string    `json:"name"`
	Holder    string    `json:"holder"`
	Epoch     int64     `json:"epoch"`
	ExpiresAt time.Time `json:"expires_at"`
	RenewedAt time.Time `json:"renewed_at"`
}

// LeaseParams asks for, renews or releases a lease.
type LeaseParams struct {
	Name   string        // zero means LeaseName
	Holder string        // a unique id of the process, such as host:pid:random
	Epoch  int64         // for renew and release: the epoch held
	TTL    time.Duration // for acquire and renew
	Now    time.Time
}

// AcquireLease grants the lease to p.Holder with a new epoch when nobody
// holds it, or its holder let it expire. It fails with ErrLeaseHeld while
// another holder's lease is unexpired.
func (s *Store) AcquireLease(ctx context.Context, p LeaseParams) (Lease, error) {
	s = s.leaseView()
	name := leaseName(p.Name)
	if p.Holder == "" || p.TTL <= 0 {
		return Lease{}, fmt.Errorf("store: acquire lease: holder and a positive TTL are required")
	}
	var l Lease
	err := s.inTx(ctx, "acquire lease", func(tx *sql.Tx) error {
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
			return nil
		case err != nil:
			return err
		case cur.Holder != p.Holder && cur.ExpiresAt.After(p.Now):
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
		return nil
	})
	return l, err
}

// RenewLease extends the lease held by p.Holder at p.Epoch. It fails with
// ErrNotLeader when the lease changed hands or expired: the caller must stop
// dispatching at once.
func (s *Store) RenewLease(ctx context.Context, p LeaseParams) (Lease, error) {
	s = s.leaseView()
	name := leaseName(p.Name)
	var l Lease
	err := s.inTx(ctx, "renew lease", func(tx *sql.Tx) error {
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
	return s.inTx(ctx, "release lease", func(tx *sql.Tx) error {
		b := s.sb.Update("leases").Set("expires_at", p.Now.UnixMilli()).
			Where(sq.Eq{"name": leaseName(p.Name), "holder": p.Holder, "epoch": p.Epoch})
		n, err := s.exec(ctx, tx, "release lease", b)
		if err == nil && n == 0 {
			return fmt.Errorf("%w: release epoch %d for %s", ErrNotLeader, p.Epoch, p.Holder)
		}
		return err
	})
}

// GetLease reads the lease row, or ErrNotFound.
func (s *Store) GetLease(ctx context.Context, name string) (Lease, error) {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Lease{}, fmt.Errorf("store: read lease: %w", s.d.translate(err))
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	return s.lease(ctx, tx, leaseName(name), false)
}

func (s *Store) lease(ctx context.Context, tx *sql.Tx, name string, lock bool) (Lease, error) {
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
