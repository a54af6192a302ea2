package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	sq "github.com/Masterminds/squirrel"
	"github.com/ax-sched/ax/axtype"
)

// batchRows is how many instances one multi-row read or insert handles;
// updateRows how many one UPDATE … CASE handles (its cost grows with the square).
const (
	batchRows  = 400
	updateRows = 64
)

// transitionMany applies the transitions of one batch with a handful of
// statements instead of two or three per instance: one locking read of the
// instances, then per shape of change one UPDATE … CASE, one multi-row
// history INSERT and one multi-row action INSERT. Each transition is still
// checked (state and version, under the read's lock) and fails alone.
// The epoch was checked by the caller in this transaction.
func (s *Store) transitionMany(ctx context.Context, tx *sql.Tx, ps []TransitionParams, out []BatchResult) error {
	rows, err := s.readBatch(ctx, tx, ps, out)
	if err != nil {
		return err
	}
	order, groups := checkBatch(ps, out, rows)
	for _, k := range order {
		idx := groups[k]
		// CASE id WHEN … is evaluated linearly per row: keep its chunks short.
		for start := 0; start < len(idx); start += updateRows {
			if err := s.updateGroup(ctx, tx, ps, idx[start:min(start+updateRows, len(idx))]); err != nil {
				return err
			}
		}
	}
	return s.recordBatch(ctx, tx, ps, out, rows)
}

// batchRow is an instance as a batch of transitions reads it, and then
// sees it after each of its moves in the batch.
type batchRow struct {
	state          axtype.State
	version, runID int64
	task, ticket   string
}

// readBatch reads, locked for update, the instances the transitions of ps
// that have not failed yet move.
func (s *Store) readBatch(ctx context.Context, tx *sql.Tx, ps []TransitionParams, out []BatchResult) (map[int64]batchRow, error) {
	ids := make([]int64, 0, len(ps))
	for i, p := range ps {
		if out[i].Err == nil {
			ids = append(ids, p.InstanceID)
		}
	}
	rows := map[int64]batchRow{}
	for start := 0; start < len(ids); start += batchRows {
		chunk := ids[start:min(start+batchRows, len(ids))]
		q := s.sb.Select("id", "state", "version", "run_id", "task_id", "ticket").From("instances").Where(sq.Eq{"id": chunk}).Suffix(strings.TrimSpace(s.d.forUpdate()))
		err := s.query(ctx, tx, "read batch", q, func(r *sql.Rows) error {
			var (
				id     int64
				c      batchRow
				state  string
				ticket sql.NullString
			)
			if err := r.Scan(&id, &state, &c.version, &c.runID, &c.task, &ticket); err != nil {
				return err
			}
			c.state, c.ticket = axtype.State(state), ticket.String
			rows[id] = c
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// checkBatch checks each transition against rows, failing those that no
// longer apply in out, and groups the eligible ones by the shape of their
// change and by how many transitions of the same instance come before
// them in the batch (its nth): every group of the nth goes before any of
// the (n+1)th, so that an instance moved twice is written in batch order,
// each move by its own statement. It returns the groups' keys in the
// order to write them.
func checkBatch(ps []TransitionParams, out []BatchResult, rows map[int64]batchRow) ([]string, map[string][]int) {
	groups := map[string][]int{}
	var order []string
	nth := map[int64]int{}
	for i, p := range ps {
		if out[i].Err != nil {
			continue
		}
		c, ok := rows[p.InstanceID]
		te := &TransitionError{InstanceID: p.InstanceID, From: p.From, To: p.To}
		switch {
		case !ok:
			te.Err = ErrNotFound
			out[i].Err = te
			continue
		case c.state != p.From || c.version != p.Version:
			te.ActualState, te.ActualVersion, te.Err = c.state, c.version, ErrConflict
			out[i].Err = te
			continue
		}
		out[i].Version = p.Version + 1
		c.state, c.version = p.To, p.Version+1 // a later transition of the same instance in this batch sees this one
		if p.Set.Ticket != nil {
			c.ticket = *p.Set.Ticket
		}
		rows[p.InstanceID] = c
		k := fmt.Sprintf("%08d %s", nth[p.InstanceID], shape(p))
		nth[p.InstanceID]++
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	slices.SortStableFunc(order, func(a, b string) int { return strings.Compare(a[:8], b[:8]) })
	return order, groups
}

// recordBatch writes the history and action rows of the transitions that
// applied, many rows per statement, in the order of the batch, and the
// outcome counts by task.
func (s *Store) recordBatch(ctx context.Context, tx *sql.Tx, ps []TransitionParams, out []BatchResult, rows map[int64]batchRow) error {
	var hist, acts [][]any
	deltas := map[string][2]int64{}
	for i, p := range ps {
		if out[i].Err != nil {
			continue
		}
		c := rows[p.InstanceID]
		if ds, df := outcomeDelta(p.From, p.To); ds != 0 || df != 0 {
			d := deltas[c.task]
			deltas[c.task] = [2]int64{d[0] + ds, d[1] + df}
		}
		hist = append(hist, []any{p.InstanceID, c.runID, c.task, nullStr(c.ticket), string(p.From), string(p.To), p.Reason, p.Actor, p.Epoch, p.Now.UnixMilli()})
		if a := p.Action; a != nil {
			at := a.At
			if at.IsZero() {
				at = p.Now
			}
			acts = append(acts, []any{at.UnixMilli(), a.Actor, a.Action, a.Pipeline, a.TaskID, p.InstanceID, a.Ticket, a.Reason, a.Detail})
		}
	}
	if err := s.insertMany(ctx, tx, "history", []string{"instance_id", "run_id", "task_id", "ticket", "from_state", "to_state", "reason", "actor", "epoch", "at"}, hist); err != nil {
		return err
	}
	if err := s.addOutcomes(ctx, tx, deltas); err != nil {
		return err
	}
	return s.insertMany(ctx, tx, "actions", []string{"at", "actor", "action", "pipeline", "task_id", "instance_id", "ticket", "reason", "detail"}, acts)
}

// shape names the columns a transition writes, so that transitions of one
// shape share an UPDATE.
func shape(p TransitionParams) string {
	c := p.Set
	return fmt.Sprintf("%v%v%v%v%v%v%v%v%v", c.Ticket != nil, c.Attempt != nil, c.Counted != nil, c.NextFireAt != nil, c.Executor != nil,
		c.StartedAt != nil, c.EndedAt != nil, c.Error != nil, c.Reason != nil)
}

// updateGroup writes the transitions at idx (one shape) with one UPDATE.
func (s *Store) updateGroup(ctx context.Context, tx *sql.Tx, ps []TransitionParams, idx []int) error {
	first := ps[idx[0]]
	up := s.sb.Update("instances").Set("version", sq.Expr("version + 1"))
	caseOf := func(col string, val func(p TransitionParams) any) {
		same := true // one value for the whole group: a plain assignment
		v0 := val(ps[idx[0]])
		for _, i := range idx[1:] {
			if val(ps[i]) != v0 {
				same = false
				break
			}
		}
		if same {
			up = up.Set(col, v0)
			return
		}
		var b strings.Builder
		args := make([]any, 0, 2*len(idx))
		b.WriteString("CASE id")
		for _, i := range idx {
			b.WriteString(" WHEN ? THEN ?")
			args = append(args, ps[i].InstanceID, val(ps[i]))
		}
		b.WriteString(" END")
		up = up.Set(col, sq.Expr(b.String(), args...))
	}
	caseOf("state", func(p TransitionParams) any { return string(p.To) })
	caseOf("updated_at", func(p TransitionParams) any { return p.Now.UnixMilli() })
	c := first.Set
	if c.Ticket != nil {
		caseOf("ticket", func(p TransitionParams) any { return nullStr(*p.Set.Ticket) })
	}
	if c.Attempt != nil {
		caseOf("attempt", func(p TransitionParams) any { return *p.Set.Attempt })
	}
	if c.Counted != nil {
		caseOf("counted", func(p TransitionParams) any { return *p.Set.Counted })
	}
	if c.NextFireAt != nil {
		caseOf("next_fire_at", func(p TransitionParams) any { return ms(*p.Set.NextFireAt) })
	}
	if c.Executor != nil {
		caseOf("executor", func(p TransitionParams) any { return nullStr(*p.Set.Executor) })
	}
	if c.StartedAt != nil {
		caseOf("started_at", func(p TransitionParams) any { return ms(*p.Set.StartedAt) })
	}
	if c.EndedAt != nil {
		caseOf("ended_at", func(p TransitionParams) any { return ms(*p.Set.EndedAt) })
	}
	if c.Error != nil {
		caseOf("error", func(p TransitionParams) any { return nullStr(*p.Set.Error) })
	}
	if c.Reason != nil {
		caseOf("reason", func(p TransitionParams) any { return nullStr(*p.Set.Reason) })
	}
	ids := make([]int64, len(idx))
	for k, i := range idx {
		ids[k] = ps[i].InstanceID
	}
	n, err := s.exec(ctx, tx, "transition batch", up.Where(sq.Eq{"id": ids}))
	if err != nil {
		return err
	}
	if n != int64(len(distinct(ids))) {
		return fmt.Errorf("store: transition batch: %d of %d rows updated under lock", n, len(ids))
	}
	return nil
}

func distinct(ids []int64) map[int64]bool {
	m := make(map[int64]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// insertMany inserts rows into table, batchRows at a time.
func (s *Store) insertMany(ctx context.Context, tx *sql.Tx, table string, cols []string, rows [][]any) error {
	for start := 0; start < len(rows); start += batchRows {
		b := s.sb.Insert(table).Columns(cols...)
		for _, r := range rows[start:min(start+batchRows, len(rows))] {
			b = b.Values(r...)
		}
		if _, err := s.exec(ctx, tx, "insert "+table, b); err != nil {
			return err
		}
	}
	return nil
}
