package store

import (
	"cmp"
	"context"
	"database/sql"
	"maps"
	"slices"
	"strconv"
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
	// Chunk is how many definitions (pipelines and tasks added, changed
	// or removed) one transaction writes at most (0: DefaultCreateChunk).
	Chunk int
}

// SyncResult names what a sync changed, by pipeline name and task id.
type SyncResult struct {
	Added, Changed, Removed []string
}

// SyncingSetting is the setting that marks a sync of the definitions
// that takes more than one transaction and has not finished: its value is
// the time (Unix milliseconds) the first of them wrote. Set by the first
// transaction, removed by the last. While it is there, every definition
// written since that time belongs to a sync still to finish, and the next
// sync reports it among its own changes.
const SyncingSetting = "definitions_syncing"

// syncWrite is one definition a sync writes: a row added, changed or
// marked removed.
type syncWrite struct {
	id    string
	table string // "pipelines" or "tasks"
	kind  int    // syncAdd, syncChange or syncRemove
	pd    *PipelineDef
	td    *TaskDef
}

const (
	syncAdd = iota
	syncChange
	syncRemove
)

// storedDef is what a sync reads of a stored definition.
type storedDef struct {
	hash      string
	removed   bool
	version   int64
	updatedAt int64
}

// SyncDefinitions makes the stored definitions match p.Pipelines: new ones
// are added at version 1, changed ones (by hash) get the next version, and
// ones no longer given are marked removed — kept for history, never
// scheduled. A removed definition that comes back is changed.
//
// It writes at most p.Chunk definitions per fenced transaction, so that no
// sync of any size holds the store past the lease's renewal margin. A sync
// that takes more than one transaction is marked unfinished
// (SyncingSetting) from its first to its last; when it fails midway, what
// it wrote stays, and the next sync (which writes what still differs)
// reports what the unfinished one changed as its own changes, so that no
// addition or removal goes unreported to the caller that acts on it.
func (s *Store) SyncDefinitions(ctx context.Context, p SyncParams) (SyncResult, error) {
	chunk := cmp.Or(max(p.Chunk, 0), DefaultCreateChunk)
	now := p.Now.UnixMilli()
	var (
		writes  []syncWrite
		earlier map[string]int // what an unfinished sync changed, by id: syncAdd, syncChange or syncRemove
		mark    int64          // the unfinished sync's time; 0: none
	)
	for done, first := 0, true; first || done < len(writes); first = false {
		err := s.inTxFenced(ctx, "sync definitions", p.Epoch, func(tx *sql.Tx) error {
			if first {
				var err error
				if writes, earlier, mark, err = s.planSync(ctx, tx, p); err != nil {
					return err
				}
			}
			part := writes[done:min(done+chunk, len(writes))]
			if err := s.applySync(ctx, tx, part, now); err != nil {
				return err
			}
			switch last := done+len(part) >= len(writes); {
			case last && (mark != 0 || !first):
				_, err := s.exec(ctx, tx, "finish definitions sync", s.sb.Delete("settings").Where(sq.Eq{"name": SyncingSetting}))
				return err
			case !last && first:
				return s.setSetting(ctx, tx, SyncingSetting, strconv.FormatInt(cmp.Or(mark, now), 10), p.Now)
			}
			return nil
		})
		if err != nil {
			return SyncResult{}, err
		}
		done += min(chunk, len(writes)-done)
	}
	return syncResult(writes, earlier), nil
}

// planSync reads the stored definitions in tx and returns the writes that
// make them match p.Pipelines, in order (each pipeline's tasks, then the
// pipeline; the removals last), with what an unfinished sync changed and
// its time.
func (s *Store) planSync(ctx context.Context, tx *sql.Tx, p SyncParams) ([]syncWrite, map[string]int, int64, error) {
	pipes, err := s.loadDefs(ctx, tx, "pipelines", "name")
	if err != nil {
		return nil, nil, 0, err
	}
	tasks, err := s.loadDefs(ctx, tx, "tasks", "id")
	if err != nil {
		return nil, nil, 0, err
	}
	var mark int64
	err = s.query(ctx, tx, "read "+SyncingSetting, s.sb.Select("value").From("settings").Where(sq.Eq{"name": SyncingSetting}), func(rows *sql.Rows) error {
		var v string
		if err := rows.Scan(&v); err != nil {
			return err
		}
		mark, _ = strconv.ParseInt(v, 10, 64)
		return nil
	})
	if err != nil {
		return nil, nil, 0, err
	}
	return syncWrites(p, pipes, tasks), earlierSync(mark, pipes, tasks), mark, nil
}

// loadDefs reads the stored definitions of table, by key.
func (s *Store) loadDefs(ctx context.Context, tx *sql.Tx, table, key string) (map[string]storedDef, error) {
	out := map[string]storedDef{}
	err := s.query(ctx, tx, "read "+table, s.sb.Select(key, "hash", "removed", "version", "updated_at").From(table), func(rows *sql.Rows) error {
		var (
			k string
			d storedDef
			r int
		)
		if err := rows.Scan(&k, &d.hash, &r, &d.version, &d.updatedAt); err != nil {
			return err
		}
		d.removed = r != 0
		out[k] = d
		return nil
	})
	return out, err
}

// earlierSync is what a sync that stopped part-way (begun at mark, 0 for
// none) wrote already, by id: what it added, changed or removed.
func earlierSync(mark int64, defs ...map[string]storedDef) map[string]int {
	earlier := map[string]int{}
	if mark == 0 {
		return earlier
	}
	for _, m := range defs {
		for id, d := range m {
			switch {
			case d.updatedAt < mark:
			case d.removed:
				earlier[id] = syncRemove
			case d.version == 1:
				earlier[id] = syncAdd
			default:
				earlier[id] = syncChange
			}
		}
	}
	return earlier
}

// syncWrites compares the definitions of p with the stored ones: what to
// add, change and remove, tasks before their pipeline.
func syncWrites(p SyncParams, pipes, tasks map[string]storedDef) []syncWrite {
	judge := func(stored map[string]storedDef, id, hash string) (int, bool) {
		d, ok := stored[id]
		switch {
		case !ok:
			return syncAdd, true
		case d.hash != hash || d.removed:
			return syncChange, true
		}
		return 0, false
	}
	var writes []syncWrite
	seenP, seenT := map[string]bool{}, map[string]bool{}
	for i := range p.Pipelines {
		pd := &p.Pipelines[i]
		seenP[pd.Name] = true
		for j := range pd.Tasks {
			td := &pd.Tasks[j]
			seenT[td.ID] = true
			if kind, ok := judge(tasks, td.ID, td.Hash); ok {
				writes = append(writes, syncWrite{id: td.ID, table: "tasks", kind: kind, td: td})
			}
		}
		if kind, ok := judge(pipes, pd.Name, pd.Hash); ok {
			writes = append(writes, syncWrite{id: pd.Name, table: "pipelines", kind: kind, pd: pd})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(tasks)) {
		if !seenT[id] && !tasks[id].removed {
			writes = append(writes, syncWrite{id: id, table: "tasks", kind: syncRemove})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pipes)) {
		if !seenP[name] && !pipes[name].removed {
			writes = append(writes, syncWrite{id: name, table: "pipelines", kind: syncRemove})
		}
	}
	return writes
}

// applySync writes part of a sync's writes in tx; the tasks it adds many
// rows a statement: one statement each made the sync of 10,000 new tasks
// hold SQLite's one writer for over a second on a loaded machine.
func (s *Store) applySync(ctx context.Context, tx *sql.Tx, part []syncWrite, now int64) error {
	var added [][]any
	for _, w := range part {
		var b sq.Sqlizer
		switch {
		case w.kind == syncRemove:
			key := "id"
			if w.table == "pipelines" {
				key = "name"
			}
			b = s.sb.Update(w.table).Set("removed", 1).Set("updated_at", now).Where(sq.Eq{key: w.id})
		case w.td != nil && w.kind == syncAdd:
			td := w.td
			added = append(added, []any{td.ID, td.Pipeline, td.Name, td.Group, td.Priority, td.Hash, string(td.Definition), 1, 0, now, now})
			continue
		case w.td != nil:
			td := w.td
			b = s.sb.Update("tasks").Set("group_name", td.Group).Set("priority", td.Priority).Set("hash", td.Hash).
				Set("definition", string(td.Definition)).Set("version", sq.Expr("version + 1")).Set("removed", 0).
				Set("updated_at", now).Where(sq.Eq{"id": td.ID})
		case w.kind == syncAdd:
			pd := w.pd
			b = s.sb.Insert("pipelines").Columns("name", "file", "hash", "definition", "version", "removed", "created_at", "updated_at").
				Values(pd.Name, pd.File, pd.Hash, string(pd.Definition), 1, 0, now, now)
		default:
			pd := w.pd
			b = s.sb.Update("pipelines").Set("file", pd.File).Set("hash", pd.Hash).Set("definition", string(pd.Definition)).
				Set("version", sq.Expr("version + 1")).Set("removed", 0).Set("updated_at", now).Where(sq.Eq{"name": pd.Name})
		}
		if _, err := s.exec(ctx, tx, []string{"add", "change", "remove"}[w.kind]+" "+strings.TrimSuffix(w.table, "s")+" "+w.id, b); err != nil {
			return err
		}
	}
	return s.insertMany(ctx, tx, "tasks", []string{"id", "pipeline", "name", "group_name", "priority", "hash", "definition", "version",
		"removed", "created_at", "updated_at"}, added)
}

// syncResult names the changes of writes and, for the ids they do not
// touch, those of an unfinished sync (earlier), sorted.
func syncResult(writes []syncWrite, earlier map[string]int) SyncResult {
	kinds := maps.Clone(earlier)
	for _, w := range writes {
		kinds[w.id] = w.kind
	}
	var res SyncResult
	for id, k := range kinds {
		switch k {
		case syncAdd:
			res.Added = append(res.Added, id)
		case syncChange:
			res.Changed = append(res.Changed, id)
		default:
			res.Removed = append(res.Removed, id)
		}
	}
	slices.Sort(res.Added)
	slices.Sort(res.Changed)
	slices.Sort(res.Removed)
	return res
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

// Summary is the article's task_runtime row: a task with its next fire
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
	return s.pipelineTime(ctx, name, "updated_at")
}

// PipelineAddedAt returns when a pipeline was first stored: what it
// defined then exists since then (each schedule's later changes are the
// engine's to keep). ErrNotFound when no such pipeline is stored.
func (s *Store) PipelineAddedAt(ctx context.Context, name string) (time.Time, error) {
	return s.pipelineTime(ctx, name, "created_at")
}

// pipelineTime reads one time column of a stored pipeline.
func (s *Store) pipelineTime(ctx context.Context, name, col string) (time.Time, error) {
	var (
		at    time.Time
		found bool
	)
	err := s.query(ctx, s.read, "read pipeline "+name, s.sb.Select(col).From("pipelines").Where(sq.Eq{"name": name}),
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
