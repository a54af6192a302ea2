package store

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/ax-sched/ax/axtype"
)

// PipelineDef is a pipeline definition as synced from its file.
type PipelineDef struct {
	Name       string
	File       string
	Hash       string // of the definition; a change bumps the version
	Definition []byte // JSON
	Tasks      []TaskDef
}

// TaskDef is a task definition as synced from its file.
type TaskDef struct {
	ID         string // `pipeline.task`
	Pipeline   string
	Name       string
	Group      string
	Priority   int
	Hash       string
	Definition []byte // JSON
}

// SyncParams replaces the stored definitions with the given set.
type SyncParams struct {
	Pipelines []PipelineDef
	Epoch     int64
	Now       time.Time
}

// SyncResult names what a sync changed, by pipeline name and task id.
type SyncResult struct {
	Added, Changed, Removed []string
}

// SyncDefinitions makes the stored definitions match p.Pipelines in one
// transaction: new ones are added at version 1, changed ones (by hash) get
// the next version, and ones no longer given are marked removed — kept for
// history, never scheduled. A removed definition that comes back is changed.
func (s *Store) SyncDefinitions(ctx context.Context, p SyncParams) (SyncResult, error) {
	var res SyncResult
	err := s.inTxFenced(ctx, "sync definitions", p.Epoch, func(tx *sql.Tx) error {
		type known struct {
			hash    string
			removed bool
		}
		load := func(table, key string) (map[string]known, error) {
			out := map[string]known{}
			err := s.query(ctx, tx, "read "+table, s.sb.Select(key, "hash", "removed").From(table), func(rows *sql.Rows) error {
				var (
					k, h string
					r    int
				)
				if err := rows.Scan(&k, &h, &r); err != nil {
					return err
				}
				out[k] = known{h, r != 0}
				return nil
			})
			return out, err
		}
		pipes, err := load("pipelines", "name")
		if err != nil {
			return err
		}
		tasks, err := load("tasks", "id")
		if err != nil {
			return err
		}
		now := p.Now.UnixMilli()
		seenP, seenT := map[string]bool{}, map[string]bool{}
		var added [][]any // rows of the tasks to add
		for _, pd := range p.Pipelines {
			seenP[pd.Name] = true
			k, ok := pipes[pd.Name]
			switch {
			case !ok:
				res.Added = append(res.Added, pd.Name)
				b := s.sb.Insert("pipelines").Columns("name", "file", "hash", "definition", "version", "removed", "created_at", "updated_at").
					Values(pd.Name, pd.File, pd.Hash, string(pd.Definition), 1, 0, now, now)
				if _, err := s.exec(ctx, tx, "add pipeline "+pd.Name, b); err != nil {
					return err
				}
			case k.hash != pd.Hash || k.removed:
				res.Changed = append(res.Changed, pd.Name)
				b := s.sb.Update("pipelines").Set("file", pd.File).Set("hash", pd.Hash).Set("definition", string(pd.Definition)).
					Set("version", sq.Expr("version + 1")).Set("removed", 0).Set("updated_at", now).Where(sq.Eq{"name": pd.Name})
				if _, err := s.exec(ctx, tx, "change pipeline "+pd.Name, b); err != nil {
					return err
				}
			}
			for _, td := range pd.Tasks {
				seenT[td.ID] = true
				k, ok := tasks[td.ID]
				switch {
				case !ok:
					res.Added = append(res.Added, td.ID)
					added = append(added, []any{td.ID, td.Pipeline, td.Name, td.Group, td.Priority, td.Hash, string(td.Definition), 1, 0, now, now})
				case k.hash != td.Hash || k.removed:
					res.Changed = append(res.Changed, td.ID)
					b := s.sb.Update("tasks").Set("group_name", td.Group).Set("priority", td.Priority).Set("hash", td.Hash).
						Set("definition", string(td.Definition)).Set("version", sq.Expr("version + 1")).Set("removed", 0).
						Set("updated_at", now).Where(sq.Eq{"id": td.ID})
					if _, err := s.exec(ctx, tx, "change task "+td.ID, b); err != nil {
						return err
					}
				}
			}
		}
		// New tasks many rows a statement: one statement each made the sync
		// of 10,000 new tasks hold SQLite's one writer for over a second on a
		// loaded machine, and a lease renewal waited for it.
		if err := s.insertMany(ctx, tx, "tasks", []string{"id", "pipeline", "name", "group_name", "priority", "hash", "definition", "version",
			"removed", "created_at", "updated_at"}, added); err != nil {
			return err
		}
		for name, k := range pipes {
			if !seenP[name] && !k.removed {
				res.Removed = append(res.Removed, name)
				if _, err := s.exec(ctx, tx, "remove pipeline "+name, s.sb.Update("pipelines").Set("removed", 1).Set("updated_at", now).Where(sq.Eq{"name": name})); err != nil {
					return err
				}
			}
		}
		for id, k := range tasks {
			if !seenT[id] && !k.removed {
				res.Removed = append(res.Removed, id)
				if _, err := s.exec(ctx, tx, "remove task "+id, s.sb.Update("tasks").Set("removed", 1).Set("updated_at", now).Where(sq.Eq{"id": id})); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return SyncResult{}, err
	}
	slices.Sort(res.Added)
	slices.Sort(res.Changed)
	slices.Sort(res.Removed)
	return res, nil
}

// Task is a stored task definition. Its runtime summary (the article's
// task_runtime row) comes from [Store.TaskSummary].
type Task struct {
	ID         string    `json:"id"`
	Pipeline   string    `json:"pipeline"`
	Name       string    `json:"name"`
	Group      string    `json:"group"`
	Priority   int       `json:"priority"`
	Hash       string    `json:"hash"`
	Definition []byte    `json:"-"`
	Version    int64     `json:"version"`
	Removed    bool      `json:"removed"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// TaskFilter selects tasks; zero fields do not filter.
type TaskFilter struct {
	Pipeline       string
	Group          string
	ID             string
	IncludeRemoved bool
}

// Tasks lists stored tasks, by id.
func (s *Store) Tasks(ctx context.Context, f TaskFilter) ([]Task, error) {
	b := s.sb.Select("id", "pipeline", "name", "group_name", "priority", "hash", "definition", "version", "removed",
		"updated_at").From("tasks").OrderBy("id")
	if f.Pipeline != "" {
		b = b.Where(sq.Eq{"pipeline": f.Pipeline})
	}
	if f.Group != "" {
		b = b.Where(sq.Eq{"group_name": f.Group})
	}
	if f.ID != "" {
		b = b.Where(sq.Eq{"id": f.ID})
	}
	if !f.IncludeRemoved {
		b = b.Where(sq.Eq{"removed": 0})
	}
	var out []Task
	err := s.query(ctx, s.read, "read tasks", b, func(rows *sql.Rows) error {
		var (
			t       Task
			def     string
			removed int
			updated int64
		)
		if err := rows.Scan(&t.ID, &t.Pipeline, &t.Name, &t.Group, &t.Priority, &t.Hash, &def, &t.Version, &removed, &updated); err != nil {
			return err
		}
		t.Definition, t.Removed, t.UpdatedAt = []byte(def), removed != 0, time.UnixMilli(updated).UTC()
		out = append(out, t)
		return nil
	})
	return out, err
}

// Summary is the article's task_runtime row (R7): a task with its next fire
// time, last instance, last executor, and how many of its instances
// succeeded and failed. All of it is derived from the instances (indexed
// reads), so that no transition pays for keeping a copy up to date.
type Summary struct {
	Task
	NextFireAt   time.Time        `json:"next_fire_at,omitzero"` // the earliest scheduled or retrying instance
	Last         *axtype.Instance `json:"last_instance,omitempty"`
	LastExecutor string           `json:"last_executor,omitempty"`
	SuccessCount int64            `json:"success_count"` // pruned instances included
	FailureCount int64            `json:"failure_count"`
	// Pruned is what retention kept of the last instance, when every
	// instance of the task was pruned.
	Pruned *Pruned `json:"pruned_last,omitempty"`
}

// TaskSummary returns the summary of the task with the given id, or ErrNotFound.
func (s *Store) TaskSummary(ctx context.Context, id string) (Summary, error) {
	ts, err := s.Tasks(ctx, TaskFilter{ID: id, IncludeRemoved: true})
	if err != nil {
		return Summary{}, err
	}
	if len(ts) == 0 {
		return Summary{}, notFound("task", id)
	}
	sum := Summary{Task: ts[0]}
	last, err := s.Instances(ctx, InstanceFilter{TaskID: id, Limit: 1})
	if err != nil {
		return Summary{}, err
	}
	if len(last) == 1 {
		sum.Last = &last[0]
	}
	// The last executor is the last attempt's: the newest instance may not
	// have run (a scheduled task has one ahead).
	ran, err := s.Instances(ctx, InstanceFilter{TaskID: id, Ran: true, ByStarted: true, Limit: 1})
	if err != nil {
		return Summary{}, err
	}
	if len(ran) == 1 {
		sum.LastExecutor = ran[0].Executor
	}
	next, err := s.NextFires(ctx, []string{id})
	if err != nil {
		return Summary{}, err
	}
	sum.NextFireAt = next[id]
	// The counts are kept by every transition: one row, not a count of
	// the task's instances.
	if sum.SuccessCount, sum.FailureCount, err = s.Outcomes(ctx, id); err != nil {
		return sum, err
	}
	// Instances pruned by retention still count, and the last of them
	// stands for the last instance when none is left.
	p, err := s.PrunedSummary(ctx, id)
	if err != nil {
		return sum, err
	}
	sum.SuccessCount += p.Success
	sum.FailureCount += p.Failed
	if len(ran) == 0 && p.LastInstance != 0 {
		sum.LastExecutor = p.LastExecutor
	}
	if sum.Last == nil && p.LastInstance != 0 {
		sum.Pruned = &p
	}
	return sum, nil
}

// PipelineChangedAt returns when the stored definition of a pipeline last
// changed (was added, edited or came back after removal): its schedules as
// defined now exist since then. ErrNotFound when no such pipeline is stored.
func (s *Store) PipelineChangedAt(ctx context.Context, name string) (time.Time, error) {
	var (
		at    time.Time
		found bool
	)
	err := s.query(ctx, s.read, "read pipeline "+name, s.sb.Select("updated_at").From("pipelines").Where(sq.Eq{"name": name}),
		func(rows *sql.Rows) error {
			var ms int64
			if err := rows.Scan(&ms); err != nil {
				return err
			}
			at, found = time.UnixMilli(ms).UTC(), true
			return nil
		})
	if err != nil {
		return time.Time{}, err
	}
	if !found {
		return time.Time{}, notFound("pipeline", name)
	}
	return at, nil
}

// PipelineDefinition returns the stored definition (JSON) of a pipeline as
// last synced, removed ones included: what a reader of the store alone
// knows of it, such as its time zone. ErrNotFound when no such pipeline
// was ever stored.
func (s *Store) PipelineDefinition(ctx context.Context, name string) ([]byte, error) {
	var (
		def   []byte
		found bool
	)
	err := s.query(ctx, s.read, "read pipeline "+name, s.sb.Select("definition").From("pipelines").Where(sq.Eq{"name": name}),
		func(rows *sql.Rows) error {
			var d string
			if err := rows.Scan(&d); err != nil {
				return err
			}
			def, found = []byte(d), true
			return nil
		})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, notFound("pipeline", name)
	}
	return def, nil
}

// tasksPerRead bounds the tasks of one statement of LatestInstances and
// NextFires (SQLite allows 500 arms to a compound SELECT).
const tasksPerRead = 100

// LatestInstances returns the newest instance (by id) of each of tasks that
// has one, by task id: one statement per hundred tasks, each task's newest
// id one MAX over the (task_id, id) index (a single seek on both stores,
// whatever the task's history holds), then the rows by primary key.
func (s *Store) LatestInstances(ctx context.Context, tasks []string) (map[string]axtype.Instance, error) {
	out := make(map[string]axtype.Instance, len(tasks))
	for start := 0; start < len(tasks); start += tasksPerRead {
		chunk := tasks[start:min(start+tasksPerRead, len(tasks))]
		newest := make([]string, len(chunk))
		args := make([]any, len(chunk))
		for i, t := range chunk {
			newest[i], args[i] = "(SELECT MAX(id) FROM instances WHERE task_id = ?)", t
		}
		q := instanceSelect(s.sb).Where("id IN ("+strings.Join(newest, ", ")+")", args...)
		err := s.query(ctx, s.read, "read latest instances", q, func(rows *sql.Rows) error {
			in, err := scanInstance(rows)
			out[in.TaskID] = in
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// NextFires returns the earliest next fire of each of tasks that has a
// scheduled or retrying instance, by task id: one read of the (task_id,
// state) index per hundred tasks.
func (s *Store) NextFires(ctx context.Context, tasks []string) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(tasks))
	for start := 0; start < len(tasks); start += tasksPerRead {
		chunk := tasks[start:min(start+tasksPerRead, len(tasks))]
		b := s.sb.Select("task_id", "MIN(next_fire_at)").From("instances").
			Where(sq.Eq{"task_id": chunk, "state": []string{string(axtype.Scheduled), string(axtype.Retrying)}}).GroupBy("task_id")
		err := s.query(ctx, s.read, "read next fires", b, func(rows *sql.Rows) error {
			var (
				task string
				v    sql.NullInt64
			)
			err := rows.Scan(&task, &v)
			if v.Valid {
				out[task] = fromMS(v)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
