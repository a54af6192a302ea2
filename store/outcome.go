package store

import (
	"context"
	"database/sql"

	sq "github.com/Masterminds/squirrel"
	"github.com/ax-sched/ax/axtype"
)

// The outcome counts of task_outcomes are the number of a task's instances
// in SUCCESS and in FAILED now (those retention pruned are in task_pruned).
// Every change of an instance's state goes through Transition or a batch of
// them, which keep the counts in the same transaction; an instance is
// created WAITING or SCHEDULED, and retention moves the counts of what it
// deletes to task_pruned.

// outcomeDelta is what a transition from → to adds to the counts.
func outcomeDelta(from, to axtype.State) (success, failed int64) {
	for st, d := range map[axtype.State]int64{from: -1, to: 1} {
		switch st {
		case axtype.Success:
			success += d
		case axtype.Failed:
			failed += d
		}
	}
	return success, failed
}

// addOutcomes adds deltas (success, failed by task) to the counts, one
// multi-row upsert per batchRows tasks.
func (s *Store) addOutcomes(ctx context.Context, tx *sql.Tx, deltas map[string][2]int64) error {
	var rows [][]any
	for task, d := range deltas {
		if d != [2]int64{} {
			rows = append(rows, []any{task, d[0], d[1]})
		}
	}
	for start := 0; start < len(rows); start += batchRows {
		b := s.sb.Insert("task_outcomes").Columns("task_id", "success", "failed")
		for _, r := range rows[start:min(start+batchRows, len(rows))] {
			b = b.Values(r...)
		}
		if _, err := s.exec(ctx, tx, "count outcomes", b.Suffix(s.d.upsertAdd("task_outcomes", []string{"task_id"}, []string{"success", "failed"}, nil))); err != nil {
			return err
		}
	}
	return nil
}

// addOutcomeOf adds one transition's delta to the counts of its instance's
// task, read from the instance in the same statement.
func (s *Store) addOutcomeOf(ctx context.Context, tx *sql.Tx, instance int64, from, to axtype.State) error {
	ds, df := outcomeDelta(from, to)
	if ds == 0 && df == 0 {
		return nil
	}
	q := sq.Expr("INSERT INTO task_outcomes (task_id, success, failed) SELECT task_id, ?, ? FROM instances WHERE id = ? "+
		s.d.upsertAdd("task_outcomes", []string{"task_id"}, []string{"success", "failed"}, nil), ds, df, instance)
	_, err := s.exec(ctx, tx, "count outcome", q)
	return err
}

// Outcomes returns a task's counts of instances in SUCCESS and FAILED now.
func (s *Store) Outcomes(ctx context.Context, task string) (success, failed int64, err error) {
	b := s.sb.Select("success", "failed").From("task_outcomes").Where(sq.Eq{"task_id": task})
	err = s.query(ctx, s.read, "read outcome counts of "+task, b, func(rows *sql.Rows) error {
		return rows.Scan(&success, &failed)
	})
	return success, failed, err
}
