package store

import (
	"context"
	"database/sql"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/ax-sched/ax/axtype"
)

// DropAheadParams names the runs a schedule created ahead of time that a
// new plan replaces: the schedule runs of Trigger whose logical time is
// after After.
type DropAheadParams struct {
	Trigger string
	After   time.Time
}

// DropRunsAhead deletes, with their instances and history, the runs of
// p.Trigger created ahead for logical times after p.After in which nothing
// has started: every instance still WAITING, SCHEDULED or held by a pause
// (PAUSED) with no attempt made. A run in which an attempt was made
// (claimed ahead, running, retrying or ended) is kept. It
// returns the ids of the runs dropped. A reload calls it when a schedule
// changes or goes away, so that fires of the old plan never run.
func (f *Fence) DropRunsAhead(ctx context.Context, p DropAheadParams) ([]int64, error) {
	var ids []int64
	err := f.tx(ctx, "drop runs ahead of "+p.Trigger, func(tx *sql.Tx) error {
		ids = nil
		started := sq.Select("1").From("instances i").Where("i.run_id = runs.id").
			Where(sq.Or{sq.NotEq{"i.state": []string{string(axtype.Waiting), string(axtype.Scheduled), string(axtype.Paused)}}, sq.Gt{"i.attempt": 0}})
		q := sq.Select("id").From("runs").Where(sq.Eq{"trigger_name": p.Trigger, "kind": string(axtype.RunSchedule)}).
			Where(sq.Gt{"logical_time": p.After.UnixMilli()}).Where(sq.Expr("NOT EXISTS (?)", started))
		if err := f.s.query(ctx, tx, "find runs ahead", q, func(rows *sql.Rows) error {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
			return nil
		}); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		for _, del := range []sq.DeleteBuilder{
			f.s.sb.Delete("history").Where(sq.Eq{"run_id": ids}),
			f.s.sb.Delete("instances").Where(sq.Eq{"run_id": ids}),
			f.s.sb.Delete("runs").Where(sq.Eq{"id": ids}),
		} {
			if _, err := f.s.exec(ctx, tx, "drop runs ahead", del); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}
