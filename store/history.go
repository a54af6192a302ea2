package store

import (
	"context"
	"database/sql"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/ax-sched/ax/axtype"
)

// HistoryRow is one recorded transition. From is "" for the row written
// when the instance was created.
type HistoryRow struct {
	ID         int64        `json:"id"`
	InstanceID int64        `json:"instance_id"`
	RunID      int64        `json:"run_id"`
	TaskID     string       `json:"task"`
	Ticket     string       `json:"ticket,omitempty"`
	From       axtype.State `json:"from"`
	To         axtype.State `json:"to"`
	Reason     string       `json:"reason"`
	Actor      string       `json:"actor"`
	Epoch      int64        `json:"epoch"`
	At         time.Time    `json:"at"`
}

// Action is one entry of the action log: an operator action or an automatic
// decision (dispatch, result, retry, timeout, breaker, misfire, pause …).
type Action struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Actor      string    `json:"actor"`
	Action     string    `json:"action"`
	Pipeline   string    `json:"pipeline,omitempty"`
	TaskID     string    `json:"task,omitempty"`
	InstanceID int64     `json:"instance_id,omitempty"`
	Ticket     string    `json:"ticket,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Detail     string    `json:"detail,omitempty"` // free text or JSON
}

// LogFilter selects history rows or actions; zero fields do not filter.
type LogFilter struct {
	TaskID     string
	InstanceID int64
	Pipeline   string // actions only
	Action     string // actions only
	Actor      string // actions only: this actor's
	NotActor   string // actions only: every actor's but this one's
	AfterID    int64  // paging: only ids above this
	BeforeID   int64  // paging newest first: only ids below this
	Newest     bool   // newest first (the latest Limit rows); default oldest first
	Limit      int    // zero means 100
}

// page applies f's id bounds, order and limit.
func (f LogFilter) page(b sq.SelectBuilder) sq.SelectBuilder {
	if f.AfterID > 0 {
		b = b.Where(sq.Gt{"id": f.AfterID})
	}
	if f.BeforeID > 0 {
		b = b.Where(sq.Lt{"id": f.BeforeID})
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.Newest {
		return b.OrderBy("id DESC").Limit(uint64(f.Limit))
	}
	return b.OrderBy("id").Limit(uint64(f.Limit))
}

// History returns recorded transitions, oldest first.
func (s *Store) History(ctx context.Context, f LogFilter) ([]HistoryRow, error) {
	b := s.sb.Select("id", "instance_id", "run_id", "task_id", "ticket", "from_state", "to_state", "reason", "actor", "epoch", "at").
		From("history")
	if f.TaskID != "" {
		b = b.Where(sq.Eq{"task_id": f.TaskID})
	}
	if f.InstanceID != 0 {
		b = b.Where(sq.Eq{"instance_id": f.InstanceID})
	}
	var out []HistoryRow
	err := s.query(ctx, s.read, "read history", f.page(b), func(rows *sql.Rows) error {
		var (
			h        HistoryRow
			ticket   sql.NullString
			from, to string
			at       int64
		)
		if err := rows.Scan(&h.ID, &h.InstanceID, &h.RunID, &h.TaskID, &ticket, &from, &to, &h.Reason, &h.Actor, &h.Epoch, &at); err != nil {
			return err
		}
		h.Ticket, h.From, h.To, h.At = ticket.String, axtype.State(from), axtype.State(to), time.UnixMilli(at).UTC()
		out = append(out, h)
		return nil
	})
	return out, err
}

// AppendAction writes one entry to the action log.
func (s *Store) AppendAction(ctx context.Context, a Action) error {
	return s.inTx(ctx, "append action", func(tx *sql.Tx) error { return s.appendAction(ctx, tx, a) })
}

func (s *Store) appendAction(ctx context.Context, tx *sql.Tx, a Action) error {
	b := s.sb.Insert("actions").Columns("at", "actor", "action", "pipeline", "task_id", "instance_id", "ticket", "reason", "detail").
		Values(a.At.UnixMilli(), a.Actor, a.Action, a.Pipeline, a.TaskID, a.InstanceID, a.Ticket, a.Reason, a.Detail)
	_, err := s.exec(ctx, tx, "append action "+a.Action, b)
	return err
}

// Actions returns action log entries, oldest first.
func (s *Store) Actions(ctx context.Context, f LogFilter) ([]Action, error) {
	b := s.sb.Select("id", "at", "actor", "action", "pipeline", "task_id", "instance_id", "ticket", "reason", "detail").
		From("actions")
	if f.TaskID != "" {
		b = b.Where(sq.Eq{"task_id": f.TaskID})
	}
	if f.InstanceID != 0 {
		b = b.Where(sq.Eq{"instance_id": f.InstanceID})
	}
	if f.Pipeline != "" {
		b = b.Where(sq.Eq{"pipeline": f.Pipeline})
	}
	if f.Action != "" {
		b = b.Where(sq.Eq{"action": f.Action})
	}
	if f.Actor != "" {
		b = b.Where(sq.Eq{"actor": f.Actor})
	}
	if f.NotActor != "" {
		b = b.Where(sq.NotEq{"actor": f.NotActor})
	}
	var out []Action
	err := s.query(ctx, s.read, "read actions", f.page(b), func(rows *sql.Rows) error {
		var (
			a  Action
			at int64
		)
		if err := rows.Scan(&a.ID, &at, &a.Actor, &a.Action, &a.Pipeline, &a.TaskID, &a.InstanceID, &a.Ticket, &a.Reason, &a.Detail); err != nil {
			return err
		}
		a.At = time.UnixMilli(at).UTC()
		out = append(out, a)
		return nil
	})
	return out, err
}

// Redispatched returns, by ticket, when a primary that inherited it last
// dispatched it again (the action "redispatch"), for the instances ids; a
// ticket never dispatched again is absent. The executor runs such a ticket
// from then, under a deadline counted from then.
func (s *Store) Redispatched(ctx context.Context, ids []int64) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for start := 0; start < len(ids); start += 500 {
		q := s.sb.Select("ticket", "MAX(at)").From("actions").
			Where(sq.Eq{"action": "redispatch", "instance_id": ids[start:min(start+500, len(ids))]}).GroupBy("ticket")
		err := s.query(ctx, s.read, "read redispatched tickets", q, func(rows *sql.Rows) error {
			var (
				ticket string
				at     int64
			)
			if err := rows.Scan(&ticket, &at); err != nil {
				return err
			}
			out[ticket] = time.UnixMilli(at).UTC()
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
