package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/ax-sched/ax/axtype"
)

// ApproveParams approves a manual gate: a WAITING instance not approved yet.
type ApproveParams struct {
	InstanceID int64
	Version    int64 // the version the caller read
	Actor      string
	Reason     string
	Epoch      int64 // the caller's lease epoch; 0 writes unfenced
	Now        time.Time
}

// Approve records who released a manual gate. The instance stays WAITING
// (a released gate still waits for its upstreams): only its approval
// and version change, with an "approve" action in the same transaction. It
// returns the new version, or a *TransitionError wrapping ErrConflict (it is
// no longer WAITING at that version, or was approved already), ErrNotFound
// or ErrNotLeader.
func (s *Store) Approve(ctx context.Context, p ApproveParams) (int64, error) {
	var v int64
	err := s.inTx(ctx, "approve", func(tx *sql.Tx) error {
		if err := s.checkEpoch(ctx, tx, p.Epoch); err != nil {
			return err
		}
		up := s.sb.Update("instances").
			Set("approved_by", p.Actor).
			Set("version", sq.Expr("version + 1")).
			Set("updated_at", p.Now.UnixMilli()).
			Where(sq.Eq{"id": p.InstanceID, "version": p.Version, "state": string(axtype.Waiting), "approved_by": nil})
		n, err := s.exec(ctx, tx, "approve", up)
		if err != nil {
			return err
		}
		if n == 0 {
			te := &TransitionError{InstanceID: p.InstanceID, From: axtype.Waiting, To: axtype.Waiting}
			var state string
			var approved sql.NullString
			err := tx.QueryRowContext(ctx, "SELECT state, version, approved_by FROM instances WHERE id = ?", p.InstanceID).Scan(&state, &te.ActualVersion, &approved)
			switch {
			case err == sql.ErrNoRows:
				te.Err = ErrNotFound
			case err != nil:
				return fmt.Errorf("store: approve: %w", s.d.translate(err))
			case approved.Valid:
				te.ActualState = axtype.State(state)
				te.Err = fmt.Errorf("%w (approved already by %s)", ErrConflict, approved.String)
			default:
				te.ActualState, te.Err = axtype.State(state), ErrConflict
			}
			return te
		}
		var pipeline, task string
		if err := tx.QueryRowContext(ctx, "SELECT pipeline, task_id FROM instances WHERE id = ?", p.InstanceID).Scan(&pipeline, &task); err != nil {
			return fmt.Errorf("store: approve: %w", s.d.translate(err))
		}
		v = p.Version + 1
		return s.appendAction(ctx, tx, Action{At: p.Now, Actor: p.Actor, Action: "approve", Pipeline: pipeline, TaskID: task,
			InstanceID: p.InstanceID, Reason: p.Reason, Detail: "manual gate approved; it runs when its upstreams have succeeded"})
	})
	return v, err
}
