package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"
)

// Pause is a stored pause: it survives restarts.
type Pause struct {
	Scope  PauseScope `json:"scope"`
	Name   string     `json:"name"`
	Actor  string     `json:"actor"`
	Reason string     `json:"reason"`
	At     time.Time  `json:"at"`
}

// SetPause records a pause; pausing what is paused already fails with ErrDuplicate.
func (s *Store) SetPause(ctx context.Context, p Pause) error {
	return s.inTx(ctx, "pause", func(tx *sql.Tx) error { return s.setPause(ctx, tx, p) })
}

func (s *Store) setPause(ctx context.Context, tx *sql.Tx, p Pause) error {
	b := s.sb.Insert("pauses").Columns("scope", "name", "actor", "reason", "at").Values(string(p.Scope), p.Name, p.Actor, p.Reason, p.At.UnixMilli())
	_, err := s.exec(ctx, tx, fmt.Sprintf("pause %s %s", p.Scope, p.Name), b)
	return err
}

// ClearPause removes a pause; ErrNotFound when it was not paused.
func (s *Store) ClearPause(ctx context.Context, scope PauseScope, name string) error {
	return s.inTx(ctx, "resume", func(tx *sql.Tx) error { return s.clearPause(ctx, tx, scope, name) })
}

func (s *Store) clearPause(ctx context.Context, tx *sql.Tx, scope PauseScope, name string) error {
	n, err := s.exec(ctx, tx, "resume", s.sb.Delete("pauses").Where(sq.Eq{"scope": string(scope), "name": name}))
	if err == nil && n == 0 {
		return notFound(string(scope)+" pause", name)
	}
	return err
}

// Pauses lists every pause in force.
func (s *Store) Pauses(ctx context.Context) ([]Pause, error) {
	var out []Pause
	b := s.sb.Select("scope", "name", "actor", "reason", "at").From("pauses").OrderBy("scope", "name")
	err := s.query(ctx, s.read, "read pauses", b, func(rows *sql.Rows) error {
		var (
			p     Pause
			scope string
			at    int64
		)
		if err := rows.Scan(&scope, &p.Name, &p.Actor, &p.Reason, &at); err != nil {
			return err
		}
		p.Scope, p.At = PauseScope(scope), time.UnixMilli(at).UTC()
		out = append(out, p)
		return nil
	})
	return out, err
}

// SetSetting stores a run-time setting (such as a rate limit).
func (s *Store) SetSetting(ctx context.Context, name, value string, now time.Time) error {
	return s.inTx(ctx, "set setting", func(tx *sql.Tx) error { return s.setSetting(ctx, tx, name, value, now) })
}

func (s *Store) setSetting(ctx context.Context, tx *sql.Tx, name, value string, now time.Time) error {
	b := s.sb.Insert("settings").Columns("name", "value", "updated_at").Values(name, value, now.UnixMilli()).
		Suffix(s.d.upsert([]string{"name"}, []string{"value", "updated_at"}))
	_, err := s.exec(ctx, tx, "set setting "+name, b)
	return err
}

// Settings returns every stored setting.
func (s *Store) Settings(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	err := s.query(ctx, s.read, "read settings", s.sb.Select("name", "value").From("settings"), func(rows *sql.Rows) error {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		out[k] = v
		return nil
	})
	return out, err
}

// CreateBackfill stores a new backfill and returns its id.
func (s *Store) CreateBackfill(ctx context.Context, b Backfill, now time.Time) (int64, error) {
	var id int64
	err := s.inTx(ctx, "create backfill", func(tx *sql.Tx) (err error) {
		id, err = s.createBackfill(ctx, tx, b, now)
		return err
	})
	return id, err
}

// CreateBackfill stores a new backfill, in the transaction that checks the
// fence's epoch: a process that does not hold the lease writes nothing.
func (f *Fence) CreateBackfill(ctx context.Context, b Backfill, now time.Time) (int64, error) {
	var id int64
	err := f.tx(ctx, "create backfill", func(tx *sql.Tx) (err error) {
		id, err = f.s.createBackfill(ctx, tx, b, now)
		return err
	})
	return id, err
}

func (s *Store) createBackfill(ctx context.Context, tx *sql.Tx, b Backfill, now time.Time) (int64, error) {
	id, err := s.insertID(ctx, tx, s.sb.Insert("backfills").Columns("pipeline", "spec", "state", "total_runs", "done_runs", "failed_runs", "actor", "error", "created_at", "updated_at").
		Values(b.Pipeline, b.Spec, b.State, b.TotalRuns, b.DoneRuns, b.FailedRuns, b.Actor, b.Error, now.UnixMilli(), now.UnixMilli()))
	if err != nil {
		return 0, fmt.Errorf("store: create backfill: %w", err)
	}
	return id, nil
}

// UpdateBackfill writes a backfill's state and progress, and its spec
// when b carries one; ErrNotFound for an unknown id.
func (s *Store) UpdateBackfill(ctx context.Context, b Backfill, now time.Time) error {
	return s.inTx(ctx, "update backfill", func(tx *sql.Tx) error { return s.updateBackfill(ctx, tx, b, now) })
}

func (s *Store) updateBackfill(ctx context.Context, tx *sql.Tx, b Backfill, now time.Time) error {
	u := s.sb.Update("backfills").Set("state", b.State).Set("total_runs", b.TotalRuns).Set("done_runs", b.DoneRuns).
		Set("failed_runs", b.FailedRuns).Set("error", b.Error).Set("updated_at", now.UnixMilli()).Where(sq.Eq{"id": b.ID})
	if b.Spec != "" { // a backfill's parameters change only by ApproveBackfill
		u = u.Set("spec", b.Spec)
	}
	n, err := s.exec(ctx, tx, "update backfill", u)
	if err == nil && n == 0 {
		return notFound("backfill", fmt.Sprint(b.ID))
	}
	return err
}

// Backfills lists backfills, newest first; id, when not zero, selects one.
func (s *Store) Backfills(ctx context.Context, id int64) ([]Backfill, error) {
	b := s.sb.Select(backfillCols...).From("backfills").OrderBy("id DESC")
	if id != 0 {
		b = b.Where(sq.Eq{"id": id})
	}
	return s.backfills(ctx, b)
}

// BackfillsPage lists up to limit backfills, newest first, with ids below
// before when it is not zero (keyset paging by the primary key).
func (s *Store) BackfillsPage(ctx context.Context, before int64, limit int) ([]Backfill, error) {
	b := s.sb.Select(backfillCols...).From("backfills").OrderBy("id DESC").Limit(uint64(max(limit, 1)))
	if before != 0 {
		b = b.Where(sq.Lt{"id": before})
	}
	return s.backfills(ctx, b)
}

var backfillCols = []string{"id", "pipeline", "spec", "state", "total_runs", "done_runs", "failed_runs", "actor", "error", "created_at", "updated_at"}

func (s *Store) backfills(ctx context.Context, b sq.SelectBuilder) ([]Backfill, error) {
	var out []Backfill
	err := s.query(ctx, s.read, "read backfills", b, func(rows *sql.Rows) error {
		var (
			bf      Backfill
			cr, upd int64
		)
		if err := rows.Scan(&bf.ID, &bf.Pipeline, &bf.Spec, &bf.State, &bf.TotalRuns, &bf.DoneRuns, &bf.FailedRuns, &bf.Actor, &bf.Error, &cr, &upd); err != nil {
			return err
		}
		bf.CreatedAt, bf.UpdatedAt = time.UnixMilli(cr).UTC(), time.UnixMilli(upd).UTC()
		out = append(out, bf)
		return nil
	})
	return out, err
}

// PauseSet is the pauses in force, by what they cover, and the one home of
// the rule of which pause covers a task: its own, its group's or its
// pipeline's, in that order. The zero value is empty and ready to use; it
// is not safe for concurrent use.
type PauseSet struct {
	by map[pauseKey]Pause
}

type pauseKey struct {
	scope PauseScope
	name  string
}

// NewPauseSet returns the set of pauses ps.
func NewPauseSet(ps []Pause) PauseSet {
	s := PauseSet{by: make(map[pauseKey]Pause, len(ps))}
	for _, p := range ps {
		s.by[pauseKey{p.Scope, p.Name}] = p
	}
	return s
}

// Get returns the pause of scope and name, if there is one.
func (s *PauseSet) Get(scope PauseScope, name string) (Pause, bool) {
	p, ok := s.by[pauseKey{scope, name}]
	return p, ok
}

// Add puts p in force, in place of a pause of the same scope and name.
func (s *PauseSet) Add(p Pause) {
	if s.by == nil {
		s.by = map[pauseKey]Pause{}
	}
	s.by[pauseKey{p.Scope, p.Name}] = p
}

// Remove lifts the pause of scope and name, if there is one.
func (s *PauseSet) Remove(scope PauseScope, name string) {
	delete(s.by, pauseKey{scope, name})
}

// Len returns how many pauses are in force.
func (s *PauseSet) Len() int { return len(s.by) }

// Covering returns the pause that covers a task (`pipeline.task`) of group
// in pipeline: the task's own, else its group's, else its pipeline's.
func (s *PauseSet) Covering(task, group, pipeline string) (Pause, bool) {
	if len(s.by) == 0 {
		return Pause{}, false
	}
	for _, k := range [...]pauseKey{{ScopeTask, task}, {ScopeGroup, group}, {ScopePipeline, pipeline}} {
		if p, ok := s.by[k]; ok {
			return p, true
		}
	}
	return Pause{}, false
}

// SettingOnce returns the setting name, storing value first when there is
// none: every process that asks gets the value stored by the first.
func (s *Store) SettingOnce(ctx context.Context, name, value string, now time.Time) (string, error) {
	err := s.inTx(ctx, "set setting "+name+" once", func(tx *sql.Tx) error {
		b := s.d.insertIgnoreInto(s.sb, "settings").Columns("name", "value", "updated_at").Values(name, value, now.UnixMilli())
		_, err := s.exec(ctx, tx, "set setting "+name+" once", b)
		return err
	})
	if err != nil {
		return "", err
	}
	v, ok, err := s.Setting(ctx, name)
	if err == nil && !ok {
		err = notFound("setting", name)
	}
	return v, err
}

// Setting returns one stored setting; ok is false when there is none.
func (s *Store) Setting(ctx context.Context, name string) (value string, ok bool, err error) {
	err = s.query(ctx, s.read, "read setting "+name, s.sb.Select("value").From("settings").Where(sq.Eq{"name": name}), func(rows *sql.Rows) error {
		ok = true
		return rows.Scan(&value)
	})
	return value, ok, err
}

// DeleteSettingsBefore deletes the settings whose names start with prefix
// written before before; it returns how many. The prefix is a LIKE
// pattern: an _ in it matches any one character.
func (s *Store) DeleteSettingsBefore(ctx context.Context, prefix string, before time.Time) (int64, error) {
	var n int64
	err := s.inTx(ctx, "delete settings "+prefix, func(tx *sql.Tx) (err error) {
		n, err = s.exec(ctx, tx, "delete settings "+prefix, s.sb.Delete("settings").Where(sq.And{sq.Like{"name": prefix + "%"}, sq.Lt{"updated_at": before.UnixMilli()}}))
		return err
	})
	return n, err
}

// InstallationSetting holds the store's installation id: random, created
// by the first server that asks, the same for every server of the store.
const InstallationSetting = "installation_id"

// InstallationID returns the store's installation id, creating it when
// the store has none yet (of servers creating it at once, the first one
// stored wins and the others read it).
func (s *Store) InstallationID(ctx context.Context, now time.Time) (string, error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return s.SettingOnce(ctx, InstallationSetting, hex.EncodeToString(b), now)
}
