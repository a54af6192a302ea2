package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/ax-sched/ax/axtype"
)

// PruneParams selects the runs retention deletes: every instance of
// the run ended (SUCCESS, FAILED or KILLED) and was last changed before
// Before, and the run belongs to no backfill that is still going.
// Waiting, scheduled, running, retrying and paused work is never selected.
type PruneParams struct {
	Before time.Time
	// FinishedBackfills are the backfill states in which a backfill's runs
	// may go; runs of a backfill in any other state are kept.
	FinishedBackfills []string
	// AfterRun continues a pass: only runs with a larger id (keyset).
	AfterRun int64
	// Runs bounds the runs of one batch; zero means 50. A batch is one short
	// transaction, so that pruning never holds the write lock long.
	Runs int
	Now  time.Time
}

// PruneResult counts what a batch deleted (or, for a dry run, would delete).
type PruneResult struct {
	Runs      int64 `json:"runs"`
	Instances int64 `json:"instances"`
	History   int64 `json:"history"`
	Actions   int64 `json:"actions"`
	Chunks    int64 `json:"log_chunks"`
	Attempts  int64 `json:"attempts"`
	Inbox     int64 `json:"inbox"`    // results applied before the horizon
	LastRun   int64 `json:"last_run"` // the largest run id looked at: AfterRun of the next batch
	More      bool  `json:"more"`     // the batch was full: there may be more
}

// Add sums two results (for a pass of many batches).
func (r PruneResult) Add(o PruneResult) PruneResult {
	r.Runs += o.Runs
	r.Instances += o.Instances
	r.History += o.History
	r.Actions += o.Actions
	r.Chunks += o.Chunks
	r.Attempts += o.Attempts
	r.Inbox += o.Inbox
	r.LastRun, r.More = o.LastRun, o.More
	return r
}

// terminal are the states of an instance that has ended for good.
var terminal = []string{string(axtype.Success), string(axtype.Failed), string(axtype.Killed)}

// pruneCandidates returns the ids of up to p.Runs runs that may go, after
// p.AfterRun, and the largest id looked at.
func (s *Store) pruneCandidates(ctx context.Context, q querier, p PruneParams) ([]int64, error) {
	if p.Runs <= 0 {
		p.Runs = 50
	}
	before := p.Before.UnixMilli()
	b := s.sb.Select("r.id").From("runs r").
		Where(sq.Gt{"r.id": p.AfterRun}).
		Where(sq.Lt{"r.created_at": before}).
		Where(sq.Expr("NOT EXISTS (SELECT 1 FROM instances i WHERE i.run_id = r.id AND (i.state NOT IN (?, ?, ?) OR i.updated_at >= ?))",
			terminal[0], terminal[1], terminal[2], before))
	if len(p.FinishedBackfills) > 0 {
		ph := strings.TrimSuffix(strings.Repeat("?, ", len(p.FinishedBackfills)), ", ")
		args := make([]any, len(p.FinishedBackfills))
		for i, st := range p.FinishedBackfills {
			args[i] = st
		}
		b = b.Where(sq.Expr("(r.backfill_id IS NULL OR EXISTS (SELECT 1 FROM backfills b WHERE b.id = r.backfill_id AND b.state IN ("+ph+")))", args...))
	} else {
		b = b.Where("r.backfill_id IS NULL")
	}
	var ids []int64
	err := s.query(ctx, q, "find runs to prune", b.OrderBy("r.id").Limit(uint64(p.Runs)), func(r *sql.Rows) error {
		var id int64
		if err := r.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
		return nil
	})
	return ids, err
}

// prunedInstance is what the summary keeps of a pruned instance.
type prunedInstance struct {
	id, started    int64
	task, state    string
	executor       string
	logical, ended int64
}

// PruneDryRun counts what pruning with p would delete now, in all batches,
// deleting nothing.
func (s *Store) PruneDryRun(ctx context.Context, p PruneParams) (PruneResult, error) {
	var total PruneResult
	if err := s.query(ctx, s.read, "count inbox to prune", s.sb.Select("COUNT(*)").From("inbox").Where(inboxPrunable(p)), func(rows *sql.Rows) error {
		return rows.Scan(&total.Inbox)
	}); err != nil {
		return total, err
	}
	for {
		ids, err := s.pruneCandidates(ctx, s.read, p)
		if err != nil || len(ids) == 0 {
			return total, err
		}
		var r PruneResult
		r.Runs = int64(len(ids))
		for _, c := range []struct {
			n     *int64
			table string
			where sq.Sqlizer
		}{
			{&r.Instances, "instances", sq.Eq{"run_id": ids}},
			{&r.History, "history", sq.Eq{"run_id": ids}},
			{&r.Attempts, "attempts", sq.Eq{"run_id": ids}},
			{&r.Actions, "actions", sq.Expr("instance_id IN (SELECT id FROM instances WHERE run_id IN ("+placeholders(len(ids))+"))", anys(ids)...)},
			{&r.Chunks, "log_chunks", sq.Expr("instance_id IN (SELECT id FROM instances WHERE run_id IN ("+placeholders(len(ids))+"))", anys(ids)...)},
		} {
			if err := s.query(ctx, s.read, "count "+c.table+" to prune", s.sb.Select("COUNT(*)").From(c.table).Where(c.where), func(rows *sql.Rows) error {
				return rows.Scan(c.n)
			}); err != nil {
				return total, err
			}
		}
		r.LastRun = ids[len(ids)-1]
		total = total.Add(r)
		p.AfterRun = r.LastRun
	}
}

// inboxPrunable selects the inbox entries retention deletes: results
// applied before the horizon (their attempt is long recorded; the
// (applied_at, received_at) index bounds the read, and entries not applied
// yet, NULL, are never in the range).
func inboxPrunable(p PruneParams) sq.Sqlizer {
	return sq.Lt{"applied_at": p.Before.UnixMilli()}
}

// inboxBatch bounds the inbox entries one batch deletes.
const inboxBatch = 500

func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

func anys(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// PruneBatch deletes one batch of the runs p selects, with their instances,
// history, the instances' actions, task output and attempt records, in one
// transaction fenced by the fence's epoch. What the per-task summary shows
// (outcome counts, the last instance's executor and times) is carried into
// task_pruned first, so that summaries survive.
//
// The epoch is checked first, on the fence row, which renewals of the
// lease do not touch: a batch never delays a renewal (see inTxFenced).
func (f *Fence) PruneBatch(ctx context.Context, p PruneParams) (PruneResult, error) {
	var res PruneResult
	err := f.tx(ctx, "prune", func(tx *sql.Tx) error {
		var err error
		res, err = f.s.pruneBatch(ctx, tx, p)
		return err
	})
	return res, err
}

// pruneInbox deletes a batch of the results inbox's applied entries
// older than p allows.
func (s *Store) pruneInbox(ctx context.Context, tx *sql.Tx, p PruneParams, res *PruneResult) error {
	var tickets []any
	q := s.sb.Select("ticket").From("inbox").Where(inboxPrunable(p)).OrderBy("applied_at").Limit(inboxBatch)
	if err := s.query(ctx, tx, "find inbox entries to prune", q, func(r *sql.Rows) error {
		var t string
		err := r.Scan(&t)
		tickets = append(tickets, t)
		return err
	}); err != nil {
		return err
	}
	if len(tickets) > 0 {
		n, err := s.exec(ctx, tx, "prune inbox", s.sb.Delete("inbox").Where("ticket IN ("+placeholders(len(tickets))+")", tickets...))
		if err != nil {
			return err
		}
		res.Inbox, res.More = n, len(tickets) == inboxBatch
	}
	return nil
}

func (s *Store) pruneBatch(ctx context.Context, tx *sql.Tx, p PruneParams) (PruneResult, error) {
	var res PruneResult
	if err := s.pruneInbox(ctx, tx, p, &res); err != nil {
		return res, err
	}
	res.LastRun = p.AfterRun // no run found: the next batch continues from here
	ids, err := s.pruneCandidates(ctx, tx, p)
	if err != nil || len(ids) == 0 {
		return res, err
	}
	if p.Runs <= 0 {
		p.Runs = 50
	}
	res.Runs, res.LastRun, res.More = int64(len(ids)), ids[len(ids)-1], res.More || len(ids) == p.Runs
	var ins []prunedInstance
	q := s.sb.Select("id", "task_id", "state", "executor", "logical_time", "started_at", "ended_at").From("instances").
		Where(sq.Eq{"run_id": ids}).OrderBy("id")
	if err := s.query(ctx, tx, "read instances to prune", q, func(r *sql.Rows) error {
		var (
			in                     prunedInstance
			exec                   sql.NullString
			started, ended, logicl sql.NullInt64
		)
		if err := r.Scan(&in.id, &in.task, &in.state, &exec, &logicl, &started, &ended); err != nil {
			return err
		}
		in.executor, in.logical, in.started, in.ended = exec.String, logicl.Int64, started.Int64, ended.Int64
		ins = append(ins, in)
		return nil
	}); err != nil {
		return res, err
	}
	if err := s.carrySummaries(ctx, tx, ins, p.Now); err != nil {
		return res, err
	}
	instIDs := make([]int64, len(ins))
	for i, in := range ins {
		instIDs[i] = in.id
	}
	del := func(n *int64, table string, where sq.Sqlizer) error {
		c, err := s.exec(ctx, tx, "prune "+table, s.sb.Delete(table).Where(where))
		*n = c
		return err
	}
	if len(instIDs) > 0 {
		if err := del(&res.Actions, "actions", sq.Eq{"instance_id": instIDs}); err != nil {
			return res, err
		}
		if err := del(&res.Chunks, "log_chunks", sq.Eq{"instance_id": instIDs}); err != nil {
			return res, err
		}
	}
	if err := del(&res.Attempts, "attempts", sq.Eq{"run_id": ids}); err != nil {
		return res, err
	}
	var procs int64
	if err := del(&procs, "procs", sq.Eq{"run_id": ids}); err != nil {
		return res, err
	}
	if err := del(&res.History, "history", sq.Eq{"run_id": ids}); err != nil {
		return res, err
	}
	if err := del(&res.Instances, "instances", sq.Eq{"run_id": ids}); err != nil {
		return res, err
	}
	var runs int64
	if err := del(&runs, "runs", sq.Eq{"id": ids}); err != nil {
		return res, err
	}
	return res, nil
}

// carrySummaries adds the pruned instances to task_pruned: their outcome
// counts, and the last of them (by id) as the task's last instance.
func (s *Store) carrySummaries(ctx context.Context, tx *sql.Tx, ins []prunedInstance, now time.Time) error {
	type acc struct {
		success, failed, killed int64
		last                    prunedInstance
	}
	by := map[string]*acc{}
	var order []string
	for _, in := range ins {
		a := by[in.task]
		if a == nil {
			a = &acc{}
			by[in.task] = a
			order = append(order, in.task)
		}
		switch axtype.State(in.state) {
		case axtype.Success:
			a.success++
		case axtype.Failed:
			a.failed++
		case axtype.Killed:
			a.killed++
		}
		if in.id > a.last.id {
			a.last = in
		}
	}
	// What goes leaves the live counts for the pruned ones.
	deltas := map[string][2]int64{}
	for _, task := range order {
		deltas[task] = [2]int64{-by[task].success, -by[task].failed}
	}
	if err := s.addOutcomes(ctx, tx, deltas); err != nil {
		return err
	}
	for _, task := range order {
		a := by[task]
		b := s.sb.Insert("task_pruned").
			Columns("task_id", "success", "failed", "killed", "last_instance", "last_state", "last_executor", "last_logical", "last_started", "last_ended", "updated_at").
			Values(task, a.success, a.failed, a.killed, a.last.id, a.last.state, a.last.executor, a.last.logical, a.last.started, a.last.ended, now.UnixMilli()).
			Suffix(s.d.upsertAdd("task_pruned", []string{"task_id"}, []string{"success", "failed", "killed"},
				[]string{"last_instance", "last_state", "last_executor", "last_logical", "last_started", "last_ended", "updated_at"}))
		if _, err := s.exec(ctx, tx, "carry task summary", b); err != nil {
			return err
		}
	}
	return nil
}

// Pruned is what retention kept of a task's pruned instances.
type Pruned struct {
	Success, Failed, Killed int64
	LastInstance            int64
	LastState               axtype.State
	LastExecutor            string
	LastLogical             time.Time
	LastStarted, LastEnded  time.Time
}

// PrunedSummary returns what retention kept of a task's pruned instances
// (zero when none were pruned).
func (s *Store) PrunedSummary(ctx context.Context, task string) (Pruned, error) {
	var p Pruned
	b := s.sb.Select("success", "failed", "killed", "last_instance", "last_state", "last_executor", "last_logical", "last_started", "last_ended").
		From("task_pruned").Where(sq.Eq{"task_id": task})
	err := s.query(ctx, s.read, "read pruned summary", b, func(r *sql.Rows) error {
		var (
			state                     string
			logical, started, endedAt int64
		)
		if err := r.Scan(&p.Success, &p.Failed, &p.Killed, &p.LastInstance, &state, &p.LastExecutor, &logical, &started, &endedAt); err != nil {
			return err
		}
		p.LastState = axtype.State(state)
		p.LastLogical, p.LastStarted, p.LastEnded = msTime(logical), msTime(started), msTime(endedAt)
		return nil
	})
	if err != nil {
		return p, fmt.Errorf("store: pruned summary of %s: %w", task, err)
	}
	return p, nil
}

func msTime(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// RunFilter selects a page of a pipeline's runs, newest logical time
// first (then newest id).
type RunFilter struct {
	Pipeline string
	From, To time.Time // logical time, inclusive; a zero bound is open
	// Before continues a listing after the run with this id (the last of the
	// previous page): only runs that sort after it come (keyset paging, so a
	// page far back costs what the first does). ErrNotFound when no such run
	// of the pipeline is stored.
	Before int64
	Limit  int // zero means 100
}

// RunsPage lists the runs f selects: the (pipeline, logical_time) index
// bounds the read, whether by time or by the Before cursor.
func (s *Store) RunsPage(ctx context.Context, f RunFilter) ([]axtype.Run, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	b := s.sb.Select(runCols...).From("runs").Where(sq.Eq{"pipeline": f.Pipeline})
	if !f.From.IsZero() {
		b = b.Where(sq.GtOrEq{"logical_time": f.From.UnixMilli()})
	}
	if !f.To.IsZero() {
		b = b.Where(sq.LtOrEq{"logical_time": f.To.UnixMilli()})
	}
	if f.Before != 0 {
		cur, err := s.Run(ctx, f.Before)
		if err == nil && cur.Pipeline != f.Pipeline {
			err = notFound("run of pipeline "+f.Pipeline, strconv.FormatInt(f.Before, 10))
		}
		if err != nil {
			return nil, err
		}
		// (logical_time, id) < the cursor's, written so that both stores
		// walk the index range logical_time <= the cursor's.
		lt := cur.LogicalTime.UnixMilli()
		b = b.Where(sq.LtOrEq{"logical_time": lt}).Where(sq.Or{sq.Lt{"logical_time": lt}, sq.Lt{"id": f.Before}})
	}
	return s.runs(ctx, b.OrderBy("logical_time DESC", "id DESC").Limit(uint64(f.Limit)))
}

// RunsCreated returns the newest limit runs of a pipeline by creation
// (newest id first) created after after whose logical time is at or before
// to: a run triggered for an older date is among them however old its
// logical time. The created_at index bounds the read to the runs created
// since after.
func (s *Store) RunsCreated(ctx context.Context, pipeline string, after, to time.Time, limit int) ([]axtype.Run, error) {
	if limit <= 0 {
		limit = 100
	}
	return s.runs(ctx, s.sb.Select(runCols...).From("runs").Where(sq.Eq{"pipeline": pipeline}).
		Where(sq.Gt{"created_at": after.UnixMilli()}).Where(sq.LtOrEq{"logical_time": to.UnixMilli()}).
		OrderBy("id DESC").Limit(uint64(limit)))
}

// RunsDeferred returns up to limit operator's runs of a pipeline whose
// logical time is after now (triggered to fire later: --in, or --at a
// time to come), the soonest first.
func (s *Store) RunsDeferred(ctx context.Context, pipeline string, now time.Time, limit int) ([]axtype.Run, error) {
	return s.runs(ctx, s.sb.Select(runCols...).From("runs").Where(sq.Eq{"pipeline": pipeline, "kind": string(axtype.RunManual)}).
		Where(sq.Gt{"logical_time": now.UnixMilli()}).OrderBy("logical_time ASC", "id ASC").Limit(uint64(max(limit, 1))))
}

// RunsMovedAhead returns the runs of a pipeline whose logical time is after
// now (created ahead, inside the window) in which an instance has moved past
// waiting (one ran, ended or was triggered early), newest logical time first:
// the runs ahead worth showing beside the past ones. The (pipeline,
// logical_time) index of instances bounds the read to the window.
func (s *Store) RunsMovedAhead(ctx context.Context, pipeline string, now time.Time) ([]axtype.Run, error) {
	moved := s.sb.Select("DISTINCT run_id").From("instances").Where(sq.Eq{"pipeline": pipeline}).
		Where(sq.Gt{"logical_time": now.UnixMilli()}).
		Where(sq.NotEq{"state": []string{string(axtype.Waiting), string(axtype.Scheduled), string(axtype.Paused)}})
	// `?` placeholders: the outer query numbers them all (PostgreSQL).
	q, args, err := moved.PlaceholderFormat(sq.Question).ToSql()
	if err != nil {
		return nil, err
	}
	return s.runs(ctx, s.sb.Select(runCols...).From("runs").Where("id IN ("+q+")", args...).
		Where(sq.Gt{"logical_time": now.UnixMilli()}).OrderBy("logical_time DESC", "id DESC"))
}
