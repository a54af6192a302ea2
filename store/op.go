package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"
)

// Op is an operator request queued for the primary scheduler: the CLI writes
// it, the engine applies it in its loop and writes the outcome back.
type Op struct {
	ID        int64     `json:"id"`
	Kind      string    `json:"kind"`   // pause, resume, trigger, kill, rerun
	Target    string    `json:"target"` // what it acts on, as the CLI was given it
	Args      string    `json:"args"`   // JSON options
	Actor     string    `json:"actor"`
	Reason    string    `json:"reason"`
	State     string    `json:"state"` // pending, applying, done, failed
	Result    string    `json:"result,omitempty"`
	Error     string    `json:"error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	DoneAt    time.Time `json:"done_at,omitzero"`
}

// Op states.
const (
	OpPending  = "pending"
	OpApplying = "applying" // claimed by the primary: it is applied once, whatever becomes of its outcome
	OpDone     = "done"
	OpFailed   = "failed"
)

// EnqueueOp queues an operator request and returns its id.
func (s *Store) EnqueueOp(ctx context.Context, op Op, now time.Time) (int64, error) {
	var id int64
	err := s.inTx(ctx, "queue op", func(tx *sql.Tx) error {
		var err error
		id, err = s.insertID(ctx, tx, s.sb.Insert("ops").Columns("kind", "target", "args", "actor", "reason", "state", "result", "error", "created_at").
			Values(op.Kind, op.Target, op.Args, op.Actor, op.Reason, OpPending, "", "", now.UnixMilli()))
		if err != nil {
			return fmt.Errorf("store: queue op: %w", err)
		}
		return nil
	})
	return id, err
}

// PendingOps returns the queued requests, oldest first.
func (s *Store) PendingOps(ctx context.Context, limit int) ([]Op, error) {
	return s.ops(ctx, s.sb.Select(opCols...).From("ops").Where(sq.Eq{"state": OpPending}).OrderBy("id").Limit(uint64(max(limit, 1))))
}

// GetOp returns one request, or ErrNotFound.
func (s *Store) GetOp(ctx context.Context, id int64) (Op, error) {
	ops, err := s.ops(ctx, s.sb.Select(opCols...).From("ops").Where(sq.Eq{"id": id}))
	if err != nil {
		return Op{}, err
	}
	if len(ops) == 0 {
		return Op{}, notFound("op", strconv.FormatInt(id, 10))
	}
	return ops[0], nil
}

// ClaimOp marks a pending request as being applied, fenced by epoch,
// before the primary applies it: a request claimed is never applied again
// (not when its outcome fails to be recorded), and one its author withdrew
// first is not applied at all (ErrConflict).
func (s *Store) ClaimOp(ctx context.Context, id, epoch int64) error {
	return s.setOpState(ctx, "claim op", id, epoch, []string{OpPending}, s.sb.Update("ops").Set("state", OpApplying))
}

// FinishOp records the outcome of a pending or claimed request, fenced by
// epoch; a request finished already is left as it is (ErrConflict).
func (s *Store) FinishOp(ctx context.Context, id int64, result string, opErr error, epoch int64, now time.Time) error {
	state, msg := OpDone, ""
	if opErr != nil {
		state, msg = OpFailed, opErr.Error()
	}
	return s.setOpState(ctx, "finish op", id, epoch, []string{OpPending, OpApplying},
		s.sb.Update("ops").Set("state", state).Set("result", result).Set("error", msg).Set("done_at", now.UnixMilli()))
}

// WithdrawOp fails a request still pending, for its author that waited
// for it in vain; one the primary claimed meanwhile is left to it
// (ErrConflict), so that what was applied is never reported withdrawn.
func (s *Store) WithdrawOp(ctx context.Context, id int64, why string, now time.Time) error {
	return s.setOpState(ctx, "withdraw op", id, 0, []string{OpPending},
		s.sb.Update("ops").Set("state", OpFailed).Set("result", "").Set("error", why).Set("done_at", now.UnixMilli()))
}

// setOpState applies upd to request id when it is in one of the states
// from, fenced by epoch (0: unfenced).
func (s *Store) setOpState(ctx context.Context, what string, id, epoch int64, from []string, upd sq.UpdateBuilder) error {
	return s.inTx(ctx, what, func(tx *sql.Tx) error {
		if err := s.checkEpoch(ctx, tx, epoch); err != nil {
			return err
		}
		n, err := s.exec(ctx, tx, what, upd.Where(sq.Eq{"id": id, "state": from}))
		if err == nil && n == 0 {
			return fmt.Errorf("op %d: %w (not %s)", id, ErrConflict, strings.Join(from, " or "))
		}
		return err
	})
}

var opCols = []string{"id", "kind", "target", "args", "actor", "reason", "state", "result", "error", "created_at", "done_at"}

func (s *Store) ops(ctx context.Context, b sq.SelectBuilder) ([]Op, error) {
	var out []Op
	err := s.query(ctx, s.read, "read ops", b, func(rows *sql.Rows) error {
		var (
			o       Op
			created int64
			done    sql.NullInt64
		)
		if err := rows.Scan(&o.ID, &o.Kind, &o.Target, &o.Args, &o.Actor, &o.Reason, &o.State, &o.Result, &o.Error, &created, &done); err != nil {
			return err
		}
		o.CreatedAt, o.DoneAt = time.UnixMilli(created).UTC(), fromMS(done)
		out = append(out, o)
		return nil
	})
	return out, err
}
