package store_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// TestAttemptNumbersMigrated: a store written before attempts were
// numbered apart from the retry count (schema 11: attempt was the count,
// lowered again by a give-back) gets counted from attempt, and attempt
// raised past every attempt that has a record or output, so that the next
// dispatch takes a number no earlier attempt used. An instance without
// either keeps its attempt.
func TestAttemptNumbersMigrated(t *testing.T) {
	t.Parallel()
	for name, open := range storetest.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			ctx := context.Background()
			seeded := storetest.Seed(t, s)
			given, plain := seeded["a.x"], seeded["a.y"]
			// a.x: attempt 1 recorded, attempt 2 given back (attempt lowered
			// to 1 again) with output stored under 2; a.y: counted 1, nothing stored.
			for _, q := range []string{
				"UPDATE instances SET attempt = 1 WHERE id = " + strconv.FormatInt(given.ID, 10),
				"UPDATE instances SET attempt = 1 WHERE id = " + strconv.FormatInt(plain.ID, 10),
			} {
				if _, err := s.DB().Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.WriteLogs(ctx, store.LogWrite{
				Attempts: []store.AttemptRecord{{InstanceID: given.ID, Attempt: 1, RunID: given.RunID, TaskID: given.TaskID, Ticket: "t1", Status: "failed", EndedAt: storetest.T0}},
				Chunks:   []store.LogChunk{{InstanceID: given.ID, Attempt: 2, Seq: 1, Text: 2, Data: []byte{}, At: storetest.T0}},
			}); err != nil {
				t.Fatal(err)
			}
			drop := "DROP INDEX ix_instances_task_id_started_at"
			if name == "mysql" {
				drop += " ON instances"
			}
			for _, q := range []string{drop, "ALTER TABLE instances DROP COLUMN counted", "DELETE FROM ax_schema WHERE version > 11"} {
				if _, err := s.DB().Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			target := storetest.Target(t, s)
			if name == "sqlite" {
				s.Close()
			}
			s2, err := store.Open(ctx, target, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			for _, c := range []struct {
				id               int64
				attempt, counted int
			}{{given.ID, 2, 1}, {plain.ID, 1, 1}, {seeded["a.z"].ID, 0, 0}} {
				in, err := s2.Instance(ctx, c.id)
				if err != nil || in.Attempt != c.attempt || in.Counted != c.counted {
					t.Errorf("instance %d after the migration: attempt %d counted %d (%v), want attempt %d counted %d", c.id, in.Attempt, in.Counted, err, c.attempt, c.counted)
				}
			}
		})
	}
}
