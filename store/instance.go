package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/ax-sched/ax/axtype"
)

// LeaseName is the scheduler's lease: the row its primary renews.
const LeaseName = "scheduler"

// FenceName is the row that fences the scheduler's writes: the epoch of
// the lease named LeaseName, written with it, in the same transaction, by
// every AcquireLease (a new holder, or the lease taken again), and by
// nothing else. Every fenced write reads it (under a shared lock on MySQL,
// so that a takeover waits for the writes in progress, or ends the
// connections of a holder stalled inside one); a renewal updates only the
// lease row, so it never waits for the holder's own writes. Before the
// fence had a row of its own, each renewal on MySQL waited for every
// dispatch and result batch in progress (they held the lease row's shared
// lock), up to half a second during a 10,000-command burst.
const FenceName = LeaseName + "/fence"

// fenceName is the fence row of the lease named name.
func fenceName(name string) string { return name + "/fence" }

// NewInstance is one instance of a run to create.
type NewInstance struct {
	TaskID     string
	Group      string
	Priority   int
	State      axtype.State // WAITING or SCHEDULED
	NextFireAt time.Time    // when SCHEDULED: the fire time
	Reason     string
	ApprovedBy string // a manual gate approved when its run is created (a trigger of it)
}

// CreateRunParams creates a run and its instances.
type CreateRunParams struct {
	Pipeline    string
	Trigger     string
	Kind        axtype.RunKind
	LogicalTime time.Time
	// DedupKey makes run creation idempotent: a second run with the same key
	// fails with ErrDuplicate. Empty means: for a schedule run,
	// "schedule/TRIGGER/LOGICAL_MS" (one run per trigger and logical time,
	// however many schedulers try); for other kinds, no key.
	DedupKey   string
	BackfillID int64
	Actor      string
	Params     string // the trigger's --param values, a JSON object; empty for none
	Instances  []NewInstance
	Epoch      int64 // the caller's lease epoch; 0 writes unfenced (operator tools)
	Now        time.Time
	// Chunk is how many instances one transaction writes at most (0:
	// DefaultCreateChunk).
	Chunk int
}

// DefaultCreateChunk is how many instances (and their first history rows)
// one transaction of CreateRun writes at most: a few thousand rows, which
// SQLite commits in well under a second on a loaded machine, so that no
// write holds the store past the lease's renewal margin.
const DefaultCreateChunk = 2000

// CreatingSetting, followed by a run's id, is the setting that marks a run
// whose instances are still being written: set with the run row when the
// run takes more than one transaction, removed by the transaction that
// writes its last instances. A run so marked is unfinished: nothing of it
// is dispatched, and the next term drops it (DropUnfinishedRun).
const CreatingSetting = "run_creating/"

// CreateRun writes a run and its instances, and a history row for each
// instance's first state, in transactions of at most Chunk instances, each
// fenced. A run of more than Chunk instances is marked unfinished
// (CreatingSetting) by its first transaction and made whole by its last;
// when a later transaction fails, the part written is dropped (or, when
// that fails too, left marked for the next term to drop). It fails with
// ErrDuplicate when the run's dedup key exists (the run was created
// already) and ErrNotLeader when Epoch is stale.
func (s *Store) CreateRun(ctx context.Context, p CreateRunParams) (axtype.Run, []axtype.Instance, error) {
	if err := p.check(); err != nil {
		return axtype.Run{}, nil, err
	}
	chunk := cmp.Or(max(p.Chunk, 0), DefaultCreateChunk)
	run, insts, err := s.createRunRow(ctx, p, chunk)
	if err != nil {
		return axtype.Run{}, nil, err
	}
	for start := chunk; start < len(p.Instances); start += chunk {
		part, last := p.Instances[start:min(start+chunk, len(p.Instances))], start+chunk >= len(p.Instances)
		err := s.inTxFenced(ctx, "create run instances", p.Epoch, func(tx *sql.Tx) error {
			written, err := s.insertInstances(ctx, tx, run.ID, p, part)
			if err != nil {
				return err
			}
			insts = append(insts, written...)
			if !last {
				return nil
			}
			_, err = s.exec(ctx, tx, "finish run creation", s.sb.Delete("settings").Where(sq.Eq{"name": CreatingSetting + strconv.FormatInt(run.ID, 10)}))
			return err
		})
		if err != nil {
			if derr := s.DropUnfinishedRun(ctx, run.ID, p.Epoch, chunk); derr != nil {
				err = errors.Join(err, fmt.Errorf("store: run %d left unfinished (the next term drops it): %w", run.ID, derr))
			}
			return axtype.Run{}, nil, err
		}
	}
	return run, insts, nil
}

// check refuses a run no store can create.
func (p CreateRunParams) check() error {
	if p.Kind == "" || p.Pipeline == "" || p.Trigger == "" || len(p.Instances) == 0 || p.LogicalTime.IsZero() {
		return fmt.Errorf("store: create run: pipeline, trigger, kind, logical time and instances are required")
	}
	for _, in := range p.Instances {
		if in.State != axtype.Waiting && in.State != axtype.Scheduled {
			return fmt.Errorf("store: create run: instance of %s starts in %s: %w (WAITING or SCHEDULED only)", in.TaskID, in.State, ErrIllegalTransition)
		}
	}
	return nil
}

// dedupKey is the key that makes p's run exist once (CreateRunParams.DedupKey).
func (p CreateRunParams) dedupKey() string {
	if p.DedupKey == "" && p.Kind == axtype.RunSchedule {
		return "schedule/" + p.Trigger + "/" + strconv.FormatInt(p.LogicalTime.UnixMilli(), 10)
	}
	return p.DedupKey
}

// CreateRuns writes many small runs in one fenced transaction, as CreateRun
// writes one: the runs a schedule makes ahead, a batch at a time rather
// than a commit each. Every run must fit in one chunk (at most Chunk
// instances) and carry the same Epoch. A run whose dedup key exists already
// (this or another scheduler made it) is skipped: its Run is zero and its
// instances nil. Any other failure writes nothing of the batch. Its
// transaction is a "create run" to the fault seam (SetFault), as CreateRun's
// first is.
func (s *Store) CreateRuns(ctx context.Context, ps []CreateRunParams) ([]axtype.Run, [][]axtype.Instance, error) {
	for _, p := range ps {
		if err := p.check(); err != nil {
			return nil, nil, err
		}
		if chunk := cmp.Or(max(p.Chunk, 0), DefaultCreateChunk); len(p.Instances) > chunk {
			return nil, nil, fmt.Errorf("store: create runs: the run of %s at %s has %d instances, more than one transaction writes (%d): create it alone (CreateRun)",
				p.Trigger, p.LogicalTime.UTC().Format(time.RFC3339), len(p.Instances), chunk)
		}
		if p.Epoch != ps[0].Epoch {
			return nil, nil, fmt.Errorf("store: create runs: epochs %d and %d in one batch: a batch is written under one lease term", ps[0].Epoch, p.Epoch)
		}
	}
	if len(ps) == 0 {
		return nil, nil, nil
	}
	runs, insts := make([]axtype.Run, len(ps)), make([][]axtype.Instance, len(ps))
	err := s.inTxFenced(ctx, "create run", ps[0].Epoch, func(tx *sql.Tx) error {
		for i, p := range ps {
			if key := p.dedupKey(); key != "" {
				var n int
				if err := s.queryRowTx(ctx, tx, "SELECT COUNT(*) FROM runs WHERE dedup_key = ?", key).Scan(&n); err != nil {
					return fmt.Errorf("store: create runs: %w", s.d.translate(err))
				}
				if n > 0 {
					continue // made already
				}
			}
			run, in, err := s.insertRun(ctx, tx, p, len(p.Instances))
			if err != nil {
				return err
			}
			runs[i], insts[i] = run, in
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return runs, insts, nil
}

// createRunRow writes, in one fenced transaction, the run row of p, its
// first chunk of instances and, when more follow, the mark that the run is
// unfinished.
func (s *Store) createRunRow(ctx context.Context, p CreateRunParams, chunk int) (run axtype.Run, insts []axtype.Instance, err error) {
	err = s.inTxFenced(ctx, "create run", p.Epoch, func(tx *sql.Tx) error {
		run, insts, err = s.insertRun(ctx, tx, p, chunk)
		return err
	})
	return run, insts, err
}

// insertRun writes in tx the run row of p, its first chunk of instances
// and, when more follow, the mark that the run is unfinished.
func (s *Store) insertRun(ctx context.Context, tx *sql.Tx, p CreateRunParams, chunk int) (axtype.Run, []axtype.Instance, error) {
	key := p.dedupKey()
	run := axtype.Run{Pipeline: p.Pipeline, Trigger: p.Trigger, Kind: p.Kind, LogicalTime: p.LogicalTime.UTC().Truncate(time.Millisecond),
		BackfillID: p.BackfillID, Actor: p.Actor, CreatedAt: p.Now.UTC().Truncate(time.Millisecond), Params: p.Params}
	var insts []axtype.Instance
	err := func() error {
		q, args, err := s.sb.Insert("runs").
			Columns("pipeline", "trigger_name", "kind", "logical_time", "dedup_key", "backfill_id", "actor", "created_at", "params").
			Values(p.Pipeline, p.Trigger, string(p.Kind), p.LogicalTime.UnixMilli(), nullStr(key), nullID(p.BackfillID), p.Actor, p.Now.UnixMilli(), nullStr(p.Params)).ToSql()
		if err != nil {
			return fmt.Errorf("store: create run: %w", err)
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("store: create run %s at %s: %w", p.Trigger, p.LogicalTime.UTC().Format(time.RFC3339), s.d.translate(err))
		}
		if run.ID, err = res.LastInsertId(); err != nil {
			return fmt.Errorf("store: create run: %w", s.d.translate(err))
		}
		if len(p.Instances) > chunk {
			if err := s.setSetting(ctx, tx, CreatingSetting+strconv.FormatInt(run.ID, 10), strconv.Itoa(len(p.Instances)), p.Now); err != nil {
				return err
			}
		}
		insts, err = s.insertInstances(ctx, tx, run.ID, p, p.Instances[:min(chunk, len(p.Instances))])
		return err
	}()
	return run, insts, err
}

// insertInstances writes list, instances of run id, and their first
// history rows in tx, and returns them as written.
func (s *Store) insertInstances(ctx context.Context, tx *sql.Tx, id int64, p CreateRunParams, list []NewInstance) ([]axtype.Instance, error) {
	// Ids grow: the rows written here are those of the run above the
	// largest id before them.
	var before int64
	if err := s.queryRowTx(ctx, tx, "SELECT COALESCE(MAX(id), 0) FROM instances").Scan(&before); err != nil {
		return nil, fmt.Errorf("store: create instances: %w", s.d.translate(err))
	}
	const batch = 500 // rows per statement
	for start := 0; start < len(list); start += batch {
		b := s.sb.Insert("instances").Columns("run_id", "task_id", "pipeline", "group_name", "state", "version", "attempt", "counted",
			"priority", "logical_time", "next_fire_at", "reason", "approved_by", "created_at", "updated_at")
		for _, in := range list[start:min(start+batch, len(list))] {
			b = b.Values(id, in.TaskID, p.Pipeline, in.Group, string(in.State), 1, 0, 0, in.Priority, p.LogicalTime.UnixMilli(),
				ms(in.NextFireAt), nullStr(in.Reason), nullStr(in.ApprovedBy), p.Now.UnixMilli(), p.Now.UnixMilli())
		}
		if _, err := s.exec(ctx, tx, "create instances", b); err != nil {
			return nil, err
		}
	}
	hist := sq.Expr("INSERT INTO history (instance_id, run_id, task_id, ticket, from_state, to_state, reason, actor, epoch, at) "+
		"SELECT id, run_id, task_id, ticket, '', state, ?, ?, ?, ? FROM instances WHERE run_id = ? AND id > ?",
		"created by "+string(p.Kind)+" run", p.Actor, p.Epoch, p.Now.UnixMilli(), id, before)
	if _, err := s.exec(ctx, tx, "record created instances", hist); err != nil {
		return nil, err
	}
	return s.instances(ctx, tx, instanceSelect(s.sb).Where(sq.Eq{"run_id": id}).Where(sq.Gt{"id": before}).OrderBy("id"))
}

// UnfinishedRuns returns the ids of the runs whose creation has not
// finished (CreatingSetting): being written now by the primary, or left
// by a primary that stopped or failed while it wrote them.
func (s *Store) UnfinishedRuns(ctx context.Context) ([]int64, error) {
	var ids []int64
	err := s.query(ctx, s.read, "read unfinished runs", s.sb.Select("name").From("settings").Where(sq.Like{"name": CreatingSetting + "%"}),
		func(rows *sql.Rows) error {
			var name string
			if err := rows.Scan(&name); err != nil {
				return err
			}
			if id, err := strconv.ParseInt(strings.TrimPrefix(name, CreatingSetting), 10, 64); err == nil {
				ids = append(ids, id)
			}
			return nil
		})
	return ids, err
}

// DropUnfinishedRun deletes run id, whose creation did not finish, with
// its instances and their history, in fenced transactions of at most chunk
// instances (0: DefaultCreateChunk); the run row and its mark go last, so
// that a drop interrupted is resumed by the next. Nothing of such a run
// ran: it was never whole. A run that is not marked unfinished is refused
// (ErrConflict) and left as it is.
func (s *Store) DropUnfinishedRun(ctx context.Context, id, epoch int64, chunk int) error {
	chunk = cmp.Or(max(chunk, 0), DefaultCreateChunk)
	mark := CreatingSetting + strconv.FormatInt(id, 10)
	for done := false; !done; {
		err := s.inTxFenced(ctx, "drop unfinished run", epoch, func(tx *sql.Tx) error {
			var n int
			if err := s.queryRowTx(ctx, tx, "SELECT COUNT(*) FROM settings WHERE name = ?", mark).Scan(&n); err != nil {
				return fmt.Errorf("store: drop unfinished run %d: %w", id, s.d.translate(err))
			}
			if n == 0 {
				return fmt.Errorf("store: drop run %d: %w (its creation finished: it is a run like any other)", id, ErrConflict)
			}
			var ids []int64
			err := s.query(ctx, tx, "read unfinished instances", s.sb.Select("id").From("instances").Where(sq.Eq{"run_id": id}).OrderBy("id").Limit(uint64(chunk)),
				func(rows *sql.Rows) error {
					var i int64
					err := rows.Scan(&i)
					ids = append(ids, i)
					return err
				})
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				done = true
				if _, err := s.exec(ctx, tx, "drop unfinished run", s.sb.Delete("runs").Where(sq.Eq{"id": id})); err != nil {
					return err
				}
				_, err := s.exec(ctx, tx, "drop unfinished run", s.sb.Delete("settings").Where(sq.Eq{"name": mark}))
				return err
			}
			if _, err := s.exec(ctx, tx, "drop unfinished history", s.sb.Delete("history").Where(sq.Eq{"instance_id": ids})); err != nil {
				return err
			}
			_, err = s.exec(ctx, tx, "drop unfinished instances", s.sb.Delete("instances").Where(sq.Eq{"id": ids}))
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// checkEpoch fails with ErrNotLeader unless epoch is the current lease epoch,
// as the fence row has it (FenceName). Epoch 0 skips the check (operator
// tools that never dispatch). The read is a locking read on MySQL, so a
// takeover waits for this transaction; a renewal does not (it writes the
// lease row only).
func (s *Store) checkEpoch(ctx context.Context, tx *sql.Tx, epoch int64) error {
	if epoch == 0 {
		return nil
	}
	var cur int64
	err := s.queryRowTx(ctx, tx, "SELECT epoch FROM leases WHERE name = ?"+s.d.lockShared(), FenceName).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w (no fence row %q: the lease was never taken; caller holds epoch %d)", ErrNotLeader, FenceName, epoch)
	}
	if err != nil {
		return fmt.Errorf("store: check lease: %w", s.d.translate(err))
	}
	if cur != epoch {
		return fmt.Errorf("%w (caller holds epoch %d, current is %d)", ErrNotLeader, epoch, cur)
	}
	return nil
}

// Changes are the fields a transition writes with the state. A nil field is
// left as it is; a pointer to the zero value (empty string, zero time)
// clears the column.
type Changes struct {
	Ticket     *string
	Attempt    *int // the number of the attempt dispatched (nextAttempt in the engine)
	Counted    *int // attempts counted against the retries
	NextFireAt *time.Time
	Executor   *string
	StartedAt  *time.Time
	EndedAt    *time.Time
	Error      *string
	Reason     *string
}

// TransitionParams asks for one compare-and-set of an instance's state.
type TransitionParams struct {
	InstanceID int64
	Version    int64 // the version the caller read
	From, To   axtype.State
	Set        Changes
	Epoch      int64 // the caller's lease epoch; 0 writes unfenced (operator tools that never dispatch)
	Now        time.Time
	Actor      string
	Reason     string
	// Action, when set, is appended to the action log in the same transaction.
	Action *Action
}

// Transition moves one instance From → To if, and only if, it is still at
// Version in state From and Epoch is still the current lease epoch. The new
// state, the changes, the history row (and the action, if any) are written in
// one transaction. It returns the new version, or a *TransitionError that
// wraps ErrIllegalTransition, ErrNotFound, ErrConflict (lost the race: drop
// the trigger) or ErrNotLeader; or ErrUnavailable, in which case nothing was
// written.
func (s *Store) Transition(ctx context.Context, p TransitionParams) (int64, error) {
	if err := checkLegal(p); err != nil {
		return 0, err
	}
	var v int64
	err := s.inTx(ctx, "transition", func(tx *sql.Tx) error {
		var err error
		v, err = s.transition(ctx, tx, p)
		return err
	})
	return v, err
}

// BatchResult is the outcome of one transition of a batch.
type BatchResult struct {
	Version int64
	Err     error
}

// TransitionBatch applies many transitions in one transaction, each checked
// as by Transition. A transition that fails (illegal, lost race, not found)
// writes nothing and does not stop the others. When the epoch is stale, or
// the database fails, nothing at all is written and the error is returned.
func (s *Store) TransitionBatch(ctx context.Context, ps []TransitionParams) ([]BatchResult, error) {
	out, _, err := s.TransitionBatchThen(ctx, ps, nil)
	return out, err
}

// TransitionBatchThen applies ps as TransitionBatch does and then, in the
// same transaction, the transitions that then computes from their results
// (nil or empty for none): a success and the release of its downstream
// commit together or not at all. then runs inside the transaction and must
// not write to the store itself; an error from it undoes everything. When
// the epoch is stale, or the database fails, nothing at all is written and
// the error is returned.
func (s *Store) TransitionBatchThen(ctx context.Context, ps []TransitionParams, then func([]BatchResult) ([]TransitionParams, error)) (first, second []BatchResult, err error) {
	return s.transitionBatch(ctx, ps, LogWrite{}, then)
}

// transitionBatch is TransitionBatchThen that also writes logs (task output
// and attempt records) in the same transaction. ps must not be empty when
// logs is not: the transitions carry the fence.
func (s *Store) transitionBatch(ctx context.Context, ps []TransitionParams, logs LogWrite, then func([]BatchResult) ([]TransitionParams, error)) (first, second []BatchResult, err error) {
	if len(ps) == 0 {
		return []BatchResult{}, nil, nil
	}
	err = s.inTx(ctx, "transition batch", func(tx *sql.Tx) error {
		checked := map[int64]bool{}
		first = make([]BatchResult, len(ps))
		if err := s.batch(ctx, tx, ps, first, checked); err != nil {
			return err
		}
		if err := s.writeLogs(ctx, tx, logs); err != nil {
			return err
		}
		if then == nil {
			return nil
		}
		more, err := then(first)
		if err != nil {
			return err
		}
		if len(more) == 0 {
			return nil
		}
		second = make([]BatchResult, len(more))
		return s.batch(ctx, tx, more, second, checked)
	})
	if err != nil {
		return nil, nil, err
	}
	return first, second, nil
}

// smallBatch is the batch size up to which each transition is written on
// its own (an UPDATE that checks state and version, and an INSERT … SELECT
// of its history): fewer statements than the multi-row form's locking read
// plus UPDATE … CASE and inserts, which pay off for larger batches. A chain
// of tasks records one transition at a time.
const smallBatch = 2

// batch checks and applies ps inside tx; checked remembers the epochs
// verified in this transaction.
//
// The epoch is checked first, not just before the commit: on MySQL its
// locking read takes the fence row's shared lock before any instance row
// is locked, so that a holder stalled inside a batch (SIGSTOP, a frozen VM)
// holds the fence row too, and a takeover finds it and ends its
// connections (breakStalledHolder). Checked last, a holder stalled
// mid-batch held instance rows but not the lease row: the standby took
// over at once and its writes then waited up to innodb_lock_wait_timeout
// on the stalled rows (TestHAStalledPrimaryCannotWrite: fewer than 7 runs
// in 60 s, twice in three runs). A renewal does not wait for the batch:
// it writes the lease row, not the fence row (FenceName).
func (s *Store) batch(ctx context.Context, tx *sql.Tx, ps []TransitionParams, out []BatchResult, checked map[int64]bool) error {
	small := len(ps) <= smallBatch
	for i, p := range ps {
		if err := checkLegal(p); err != nil {
			out[i].Err = err
			continue
		}
		// The single-row form carries the fence in its UPDATE (a stale epoch
		// fails it as ErrNotLeader, undoing the batch); the multi-row form
		// checks the epoch once, up front, under the lease row's lock.
		if !small && !checked[p.Epoch] {
			if err := s.checkEpoch(ctx, tx, p.Epoch); err != nil {
				return err
			}
			checked[p.Epoch] = true
		}
	}
	if !small {
		return s.transitionMany(ctx, tx, ps, out)
	}
	for i, p := range ps {
		if out[i].Err != nil {
			continue
		}
		v, err := s.transition(ctx, tx, p)
		var te *TransitionError
		switch {
		case err == nil:
			out[i].Version = v
		case errors.As(err, &te) && !errors.Is(err, ErrNotLeader):
			out[i].Err = err // this one fails alone
		default:
			return err // the database, or the lease changed under the batch: nothing is written
		}
	}
	return nil
}

func checkLegal(p TransitionParams) error {
	if !p.From.Valid() || !p.To.Valid() || !axtype.CanTransition(p.From, p.To) {
		return &TransitionError{InstanceID: p.InstanceID, From: p.From, To: p.To, Err: ErrIllegalTransition}
	}
	return nil
}

// transition does the work of one transition inside tx. The happy path is
// one UPDATE and one INSERT … SELECT, as cheap as a raw CAS with history; only a refused update pays for a
// diagnosing read. The fence is part of the UPDATE: its subquery reads the
// fence row under a shared lock on MySQL (a takeover waits for this
// transaction, a renewal does not), and SQLite has a single writer.
func (s *Store) transition(ctx context.Context, tx *sql.Tx, p TransitionParams) (int64, error) {
	now := p.Now.UnixMilli()
	up := s.sb.Update("instances").
		Set("state", string(p.To)).
		Set("version", sq.Expr("version + 1")).
		Set("updated_at", now).
		Where(sq.Eq{"id": p.InstanceID, "version": p.Version, "state": string(p.From)})
	fenced := p.Epoch != 0
	if fenced {
		up = up.Where(sq.Expr("EXISTS (SELECT 1 FROM leases WHERE name = ? AND epoch = ?)", FenceName, p.Epoch))
	}
	c := p.Set
	if c.Ticket != nil {
		up = up.Set("ticket", nullStr(*c.Ticket))
	}
	if c.Attempt != nil {
		up = up.Set("attempt", *c.Attempt)
	}
	if c.Counted != nil {
		up = up.Set("counted", *c.Counted)
	}
	if c.NextFireAt != nil {
		up = up.Set("next_fire_at", ms(*c.NextFireAt))
	}
	if c.Executor != nil {
		up = up.Set("executor", nullStr(*c.Executor))
	}
	if c.StartedAt != nil {
		up = up.Set("started_at", ms(*c.StartedAt))
	}
	if c.EndedAt != nil {
		up = up.Set("ended_at", ms(*c.EndedAt))
	}
	if c.Error != nil {
		up = up.Set("error", nullStr(*c.Error))
	}
	if c.Reason != nil {
		up = up.Set("reason", nullStr(*c.Reason))
	}
	n, err := s.exec(ctx, tx, "transition", up)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, s.diagnose(ctx, tx, p, fenced)
	}
	if hook := s.afterUpdate; hook != nil {
		if err := hook(ctx, tx); err != nil {
			return 0, fmt.Errorf("store: transition: %w", s.d.translate(err))
		}
	}
	hist := sq.Expr("INSERT INTO history (instance_id, run_id, task_id, ticket, from_state, to_state, reason, actor, epoch, at) "+
		"SELECT id, run_id, task_id, ticket, ?, ?, ?, ?, ?, ? FROM instances WHERE id = ?",
		string(p.From), string(p.To), p.Reason, p.Actor, p.Epoch, now, p.InstanceID)
	if _, err := s.exec(ctx, tx, "record transition", hist); err != nil {
		return 0, err
	}
	if err := s.addOutcomeOf(ctx, tx, p.InstanceID, p.From, p.To); err != nil {
		return 0, err
	}
	if p.Action != nil {
		a := *p.Action
		a.InstanceID = p.InstanceID
		if a.At.IsZero() {
			a.At = p.Now
		}
		if err := s.appendAction(ctx, tx, a); err != nil {
			return 0, err
		}
	}
	return p.Version + 1, nil
}

// diagnose explains why a transition's UPDATE matched no row: the instance
// is missing, or moved on (lost race), or else — when the update was fenced —
// the epoch is no longer current.
func (s *Store) diagnose(ctx context.Context, tx *sql.Tx, p TransitionParams, fenced bool) error {
	te := &TransitionError{InstanceID: p.InstanceID, From: p.From, To: p.To}
	var state string
	err := tx.QueryRowContext(ctx, "SELECT state, version FROM instances WHERE id = ?", p.InstanceID).Scan(&state, &te.ActualVersion)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		te.Err = ErrNotFound
	case err != nil:
		return fmt.Errorf("store: transition: %w", s.d.translate(err))
	case axtype.State(state) != p.From || te.ActualVersion != p.Version:
		te.ActualState = axtype.State(state)
		te.Err = ErrConflict
	case fenced:
		te.Err = s.checkEpoch(ctx, tx, p.Epoch)
		if te.Err == nil { // the lease changed back between the two reads: report the race
			te.Err = fmt.Errorf("%w (lease epoch changed during the transition)", ErrNotLeader)
		}
	default:
		te.ActualState, te.Err = axtype.State(state), ErrConflict
	}
	return te
}

// instanceCols are the columns of Instance, in scan order.
var instanceCols = []string{"id", "run_id", "task_id", "pipeline", "group_name", "state", "version", "ticket", "attempt",
	"priority", "logical_time", "next_fire_at", "executor", "started_at", "ended_at", "error", "reason", "created_at", "updated_at", "approved_by", "counted"}

func instanceSelect(sb sq.StatementBuilderType) sq.SelectBuilder {
	return sb.Select(instanceCols...).From("instances")
}

func scanInstance(rows *sql.Rows) (axtype.Instance, error) {
	var (
		in                             axtype.Instance
		state                          string
		ticket, executor, errText, why sql.NullString
		approved                       sql.NullString
		logical, created, updated      int64
		nextFire, started, ended       sql.NullInt64
	)
	err := rows.Scan(&in.ID, &in.RunID, &in.TaskID, &in.Pipeline, &in.Group, &state, &in.Version, &ticket, &in.Attempt,
		&in.Priority, &logical, &nextFire, &executor, &started, &ended, &errText, &why, &created, &updated, &approved, &in.Counted)
	if err != nil {
		return in, err
	}
	in.State = axtype.State(state)
	in.Ticket, in.Executor, in.Error, in.Reason, in.ApprovedBy = ticket.String, executor.String, errText.String, why.String, approved.String
	in.LogicalTime = time.UnixMilli(logical).UTC()
	in.NextFireAt, in.StartedAt, in.EndedAt = fromMS(nextFire), fromMS(started), fromMS(ended)
	in.CreatedAt, in.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	return in, nil
}

func (s *Store) instances(ctx context.Context, q querier, b sq.SelectBuilder) ([]axtype.Instance, error) {
	var out []axtype.Instance
	err := s.query(ctx, q, "read instances", b, func(rows *sql.Rows) error {
		in, err := scanInstance(rows)
		out = append(out, in)
		return err
	})
	return out, err
}

// Instance returns the instance with the given id, or ErrNotFound.
func (s *Store) Instance(ctx context.Context, id int64) (axtype.Instance, error) {
	ins, err := s.instances(ctx, s.read, instanceSelect(s.sb).Where(sq.Eq{"id": id}))
	if err != nil {
		return axtype.Instance{}, err
	}
	if len(ins) == 0 {
		return axtype.Instance{}, fmt.Errorf("instance %d: %w", id, ErrNotFound)
	}
	return ins[0], nil
}

// InstanceByTicket returns the instance whose current ticket is ticket, or
// ErrNotFound (an unknown or stale ticket).
func (s *Store) InstanceByTicket(ctx context.Context, ticket string) (axtype.Instance, error) {
	if ticket == "" {
		return axtype.Instance{}, fmt.Errorf("empty ticket: %w", ErrNotFound)
	}
	ins, err := s.instances(ctx, s.read, instanceSelect(s.sb).Where(sq.Eq{"ticket": ticket}))
	if err != nil {
		return axtype.Instance{}, err
	}
	if len(ins) == 0 {
		return axtype.Instance{}, fmt.Errorf("ticket %q: %w", ticket, ErrNotFound)
	}
	return ins[0], nil
}

// DueParams selects instances waiting in the wheel.
type DueParams struct {
	Until  time.Time      // next fire time at or before this
	States []axtype.State // empty means SCHEDULED and RETRYING
	Limit  int            // zero means no limit
}

// DueInstances returns the instances whose next fire time is at or before
// Until, in fire-time order: what the time wheel loads.
func (s *Store) DueInstances(ctx context.Context, p DueParams) ([]axtype.Instance, error) {
	states := p.States
	if len(states) == 0 {
		states = []axtype.State{axtype.Scheduled, axtype.Retrying}
	}
	ss := make([]string, len(states))
	for i, st := range states {
		ss[i] = string(st)
	}
	b := instanceSelect(s.sb).Where(sq.Eq{"state": ss}).Where(sq.LtOrEq{"next_fire_at": p.Until.UnixMilli()}).OrderBy("next_fire_at", "id")
	if p.Limit > 0 {
		b = b.Limit(uint64(p.Limit))
	}
	return s.instances(ctx, s.read, b)
}

// InstanceFilter selects instances; zero fields do not filter.
type InstanceFilter struct {
	RunID       int64
	TaskID      string
	Pipeline    string
	States      []axtype.State
	LogicalFrom time.Time // inclusive
	LogicalTo   time.Time // inclusive
	BeforeID    int64     // paging: only ids below this
	Ran         bool      // only instances that were dispatched at least once (attempt > 0)
	Limit       int       // zero means 100
	Ascending   bool      // oldest first; default newest first
	// ByLogicalTime orders by logical time (then id) instead of id, newest
	// first unless Ascending.
	ByLogicalTime bool
	// ByStarted orders by the start of the latest attempt (then id), newest
	// first: a task's latest attempt first, even when an older instance
	// was rerun after a newer one ran (indexed with TaskID).
	ByStarted bool
	// ByTask orders a run's instances by task id (indexed with RunID: a
	// run has one instance per task); AfterTask pages on: only tasks after
	// it.
	ByTask    bool
	AfterTask string
}

// Instances lists instances matching f.
func (s *Store) Instances(ctx context.Context, f InstanceFilter) ([]axtype.Instance, error) {
	b := instanceSelect(s.sb)
	if f.RunID != 0 {
		b = b.Where(sq.Eq{"run_id": f.RunID})
	}
	if f.TaskID != "" {
		b = b.Where(sq.Eq{"task_id": f.TaskID})
	}
	if f.Pipeline != "" {
		b = b.Where(sq.Eq{"pipeline": f.Pipeline})
	}
	if len(f.States) > 0 {
		ss := make([]string, len(f.States))
		for i, st := range f.States {
			ss[i] = string(st)
		}
		b = b.Where(sq.Eq{"state": ss})
	}
	if !f.LogicalFrom.IsZero() {
		b = b.Where(sq.GtOrEq{"logical_time": f.LogicalFrom.UnixMilli()})
	}
	if !f.LogicalTo.IsZero() {
		b = b.Where(sq.LtOrEq{"logical_time": f.LogicalTo.UnixMilli()})
	}
	if f.BeforeID > 0 {
		b = b.Where(sq.Lt{"id": f.BeforeID})
	}
	if f.Ran {
		b = b.Where(sq.Gt{"attempt": 0})
	}
	if f.AfterTask != "" {
		b = b.Where(sq.Gt{"task_id": f.AfterTask})
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	order := []string{"id DESC"}
	switch {
	case f.ByStarted:
		order = []string{"started_at DESC", "id DESC"}
	case f.ByTask:
		order = []string{"task_id"}
	case f.ByLogicalTime && f.Ascending:
		order = []string{"logical_time", "id"}
	case f.ByLogicalTime:
		order = []string{"logical_time DESC", "id DESC"}
	case f.Ascending:
		order = []string{"id"}
	}
	return s.instances(ctx, s.read, b.OrderBy(order...).Limit(uint64(f.Limit)))
}

// Runs lists the newest runs of a pipeline, newest logical time first: the
// first page of RunsPage.
func (s *Store) Runs(ctx context.Context, pipeline string, limit int) ([]axtype.Run, error) {
	return s.RunsPage(ctx, RunFilter{Pipeline: pipeline, Limit: limit})
}

// LastRun returns the run of trigger and kind with the latest logical time,
// or ErrNotFound when it never ran.
func (s *Store) LastRun(ctx context.Context, trigger string, kind axtype.RunKind) (axtype.Run, error) {
	runs, err := s.runs(ctx, s.sb.Select(runCols...).From("runs").
		Where(sq.Eq{"trigger_name": trigger, "kind": string(kind)}).OrderBy("logical_time DESC").Limit(1))
	if err != nil {
		return axtype.Run{}, err
	}
	if len(runs) == 0 {
		return axtype.Run{}, notFound(string(kind)+" run of", trigger)
	}
	return runs[0], nil
}

// Run returns the run with the given id, or ErrNotFound.
func (s *Store) Run(ctx context.Context, id int64) (axtype.Run, error) {
	runs, err := s.runs(ctx, s.sb.Select(runCols...).From("runs").Where(sq.Eq{"id": id}))
	if err != nil {
		return axtype.Run{}, err
	}
	if len(runs) == 0 {
		return axtype.Run{}, notFound("run", strconv.FormatInt(id, 10))
	}
	return runs[0], nil
}

var runCols = []string{"id", "pipeline", "trigger_name", "kind", "logical_time", "backfill_id", "actor", "created_at", "params"}

func (s *Store) runs(ctx context.Context, b sq.SelectBuilder) ([]axtype.Run, error) {
	var out []axtype.Run
	err := s.query(ctx, s.read, "read runs", b, func(rows *sql.Rows) error {
		var (
			r                axtype.Run
			kind             string
			logical, created int64
			backfill         sql.NullInt64
			params           sql.NullString
		)
		if err := rows.Scan(&r.ID, &r.Pipeline, &r.Trigger, &kind, &logical, &backfill, &r.Actor, &created, &params); err != nil {
			return err
		}
		r.Params = params.String
		r.Kind, r.BackfillID = axtype.RunKind(kind), backfill.Int64
		r.LogicalTime, r.CreatedAt = time.UnixMilli(logical).UTC(), time.UnixMilli(created).UTC()
		out = append(out, r)
		return nil
	})
	return out, err
}

// BackfillRuns returns the runs a backfill created, by logical time.
func (s *Store) BackfillRuns(ctx context.Context, backfill int64) ([]axtype.Run, error) {
	return s.runs(ctx, s.sb.Select(runCols...).From("runs").Where(sq.Eq{"backfill_id": backfill}).OrderBy("logical_time", "id"))
}

// BackfillRunsFirst returns at most limit of the runs a backfill created,
// the earliest logical times first.
func (s *Store) BackfillRunsFirst(ctx context.Context, backfill int64, limit int) ([]axtype.Run, error) {
	return s.runs(ctx, s.sb.Select(runCols...).From("runs").Where(sq.Eq{"backfill_id": backfill}).OrderBy("logical_time", "id").Limit(uint64(max(limit, 1))))
}

// Progress counts a backfill's instances.
type Progress struct {
	Ended    int `json:"ended"`    // SUCCESS, FAILED or KILLED
	Awaiting int `json:"awaiting"` // WAITING manual gates nobody approved: not done
	Total    int `json:"total"`    // all it created
}

// BackfillProgress counts a backfill's instances: those that ended, the
// manual gates (task ids in manual) that await approval, and all of them.
func (s *Store) BackfillProgress(ctx context.Context, backfill int64, manual []string) (Progress, error) {
	var p Progress
	gate := make(map[string]bool, len(manual))
	for _, m := range manual {
		gate[m] = true
	}
	b := s.sb.Select("i.state", "i.task_id", "CASE WHEN i.approved_by IS NULL THEN 0 ELSE 1 END", "COUNT(*)").From("instances i").
		Join("runs r ON r.id = i.run_id").Where(sq.Eq{"r.backfill_id": backfill}).
		GroupBy("i.state", "i.task_id", "CASE WHEN i.approved_by IS NULL THEN 0 ELSE 1 END")
	err := s.query(ctx, s.read, "count backfill instances", b, func(rows *sql.Rows) error {
		var (
			state, task string
			approved, n int
		)
		if err := rows.Scan(&state, &task, &approved, &n); err != nil {
			return err
		}
		p.Total += n
		switch {
		case axtype.State(state).Terminal():
			p.Ended += n
		case axtype.State(state) == axtype.Waiting && approved == 0 && gate[task]:
			p.Awaiting += n
		}
		return nil
	})
	return p, err
}

// InstancesOfRuns returns the instances of each of runs, oldest first, by
// run id: one read of the (run_id, task_id) key per 400 runs, rather than
// one per run.
func (s *Store) InstancesOfRuns(ctx context.Context, runs []int64) (map[int64][]axtype.Instance, error) {
	out := make(map[int64][]axtype.Instance, len(runs))
	for start := 0; start < len(runs); start += batchRows {
		ins, err := s.instances(ctx, s.read, instanceSelect(s.sb).Where(sq.Eq{"run_id": runs[start:min(start+batchRows, len(runs))]}).OrderBy("id"))
		if err != nil {
			return nil, err
		}
		for _, in := range ins {
			out[in.RunID] = append(out[in.RunID], in)
		}
	}
	return out, nil
}

// RunStates returns what a run's summary reads of each instance of each
// of runs, by run, oldest first: id, run, task, pipeline, state, version,
// attempt, logical time, error, approval and creation; the other fields
// are zero. It reads half the columns of InstancesOfRuns, in one read of
// the (run_id, task_id) key per 400 runs, for the summaries of runs of
// many tasks.
func (s *Store) RunStates(ctx context.Context, runs []int64) (map[int64][]axtype.Instance, error) {
	out := make(map[int64][]axtype.Instance, len(runs))
	for start := 0; start < len(runs); start += batchRows {
		err := s.runStates(ctx, sq.Eq{"run_id": runs[start:min(start+batchRows, len(runs))]}, func(in axtype.Instance) {
			out[in.RunID] = append(out[in.RunID], in)
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RunStatesOf is RunStates for the instances of tasks only in one run,
// oldest first: one read of the (run_id, task_id) key per 400 tasks,
// whatever the run's size.
func (s *Store) RunStatesOf(ctx context.Context, run int64, tasks []string) ([]axtype.Instance, error) {
	var out []axtype.Instance
	for start := 0; start < len(tasks); start += batchRows {
		err := s.runStates(ctx, sq.Eq{"run_id": run, "task_id": tasks[start:min(start+batchRows, len(tasks))]}, func(in axtype.Instance) {
			out = append(out, in)
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b axtype.Instance) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// runStates reads RunStates' columns of the instances where says, by id.
func (s *Store) runStates(ctx context.Context, where sq.Eq, each func(axtype.Instance)) error {
	b := s.sb.Select(runStateCols...).
		From("instances").Where(where).OrderBy("id")
	return s.query(ctx, s.read, "read the states of runs' instances", b, func(rows *sql.Rows) error {
		in, err := scanRunState(rows)
		each(in)
		return err
	})
}

// runStateCols are the columns RunStates reads, in scanRunState's order.
var runStateCols = []string{"id", "run_id", "task_id", "pipeline", "state", "version", "attempt", "logical_time", "error", "approved_by", "created_at"}

// scanRunState reads a row of runStateCols.
func scanRunState(rows *sql.Rows) (axtype.Instance, error) {
	var (
		in                axtype.Instance
		state             string
		errText, approved sql.NullString
		logical, created  int64
	)
	if err := rows.Scan(&in.ID, &in.RunID, &in.TaskID, &in.Pipeline, &state, &in.Version, &in.Attempt, &logical, &errText, &approved, &created); err != nil {
		return in, err
	}
	in.State, in.Error, in.ApprovedBy = axtype.State(state), errText.String, approved.String
	in.LogicalTime, in.CreatedAt = time.UnixMilli(logical).UTC(), time.UnixMilli(created).UTC()
	return in, nil
}

// RunStateCounts counts the instances of each of runs by state: one
// grouped read, whatever the runs' sizes.
func (s *Store) RunStateCounts(ctx context.Context, runs []int64) (map[int64]map[axtype.State]int, error) {
	out := make(map[int64]map[axtype.State]int, len(runs))
	for start := 0; start < len(runs); start += batchRows {
		b := s.sb.Select("run_id", "state", "COUNT(*)").From("instances").
			Where(sq.Eq{"run_id": runs[start:min(start+batchRows, len(runs))]}).GroupBy("run_id", "state")
		err := s.query(ctx, s.read, "count the instances of runs", b, func(rows *sql.Rows) error {
			var (
				run   int64
				state string
				n     int
			)
			if err := rows.Scan(&run, &state, &n); err != nil {
				return err
			}
			if out[run] == nil {
				out[run] = map[axtype.State]int{}
			}
			out[run][axtype.State(state)] = n
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AwaitingGates returns the first limit of gates, by task id, among the
// WAITING instances of run not yet approved whose task is one of the
// manual tasks, and how many there are: indexed reads of the run, two per
// 400 manual tasks.
func (s *Store) AwaitingGates(ctx context.Context, run int64, manual []string, limit int) ([]string, int, error) {
	if len(manual) == 0 {
		return nil, 0, nil
	}
	// In task order, batch by batch: once limit gates are named, the later
	// batches are only counted.
	manual = slices.Sorted(slices.Values(manual))
	var (
		tasks []string
		n     int
	)
	for start := 0; start < len(manual); start += batchRows {
		where := sq.And{sq.Eq{"run_id": run, "state": string(axtype.Waiting), "task_id": manual[start:min(start+batchRows, len(manual))]},
			sq.Or{sq.Eq{"approved_by": nil}, sq.Eq{"approved_by": ""}}}
		err := s.query(ctx, s.read, "count a run's gates awaiting approval", s.sb.Select("COUNT(*)").From("instances").Where(where),
			func(rows *sql.Rows) error {
				var k int
				err := rows.Scan(&k)
				n += k
				return err
			})
		if err != nil {
			return nil, 0, err
		}
		if len(tasks) >= limit {
			continue
		}
		err = s.query(ctx, s.read, "list a run's gates awaiting approval",
			s.sb.Select("task_id").From("instances").Where(where).OrderBy("task_id").Limit(uint64(limit-len(tasks))),
			func(rows *sql.Rows) error {
				var t string
				err := rows.Scan(&t)
				tasks = append(tasks, t)
				return err
			})
		if err != nil {
			return nil, 0, err
		}
	}
	return tasks, n, nil
}

// RootFailures returns the first limit, by task id, of the FAILED and
// KILLED instances of run whose error is not one of the words that say
// an upstream of the run ended it (an error starting with prefix and
// ending with one of suffixes, compared case for case), and how many
// there are: two reads of the run's key, whatever its size.
func (s *Store) RootFailures(ctx context.Context, run int64, prefix string, suffixes []string, limit int) ([]axtype.Instance, int, error) {
	var like sq.Or
	for _, suf := range suffixes {
		like = append(like, s.d.matchesCase("COALESCE(error, '')", prefix, suf))
	}
	where := sq.And{sq.Eq{"run_id": run, "state": []string{string(axtype.Failed), string(axtype.Killed)}}, sq.Expr("NOT (?)", like)}
	n := 0
	err := s.query(ctx, s.read, "count the failures that ended a run", s.sb.Select("COUNT(*)").From("instances").Where(where),
		func(rows *sql.Rows) error { return rows.Scan(&n) })
	if err != nil {
		return nil, 0, err
	}
	var out []axtype.Instance
	b := s.sb.Select(runStateCols...).
		From("instances").Where(where).OrderBy("task_id").Limit(uint64(limit))
	err = s.query(ctx, s.read, "list the failures that ended a run", b, func(rows *sql.Rows) error {
		in, err := scanRunState(rows)
		out = append(out, in)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return out, n, nil
}
