package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/ax-sched/ax/store"
)

// finishedBackfills are the backfill states whose runs retention may prune;
// a backfill still running keeps all of its runs.
var finishedBackfills = []string{BackfillDone, BackfillFailed, BackfillCancelled}

// PruneSelection is the one rule of what retention deletes at now with
// retain: runs that ended (every instance SUCCESS, FAILED or KILLED) before
// now − retain and belong to no unfinished backfill. The primary's passes
// and the dry runs of ax prune both use it.
func PruneSelection(now time.Time, retain time.Duration) store.PruneParams {
	return store.PruneParams{Before: now.Add(-retain), FinishedBackfills: finishedBackfills, Now: now}
}

// Retention returns Config.Retain (zero: everything is kept).
func (e *Engine) Retention() time.Duration { return e.cfg.Retain }

// retainMetrics count what retention pruned.
type retainMetrics struct {
	runs   prometheus.Counter
	rows   *prometheus.CounterVec // by table
	passes prometheus.Counter
}

func newRetainMetrics(reg prometheus.Registerer) retainMetrics {
	f := promauto.With(reg)
	return retainMetrics{
		runs: f.NewCounter(prometheus.CounterOpts{Name: "ax_pruned_runs_total", Help: "Finished runs deleted by retention (--retain)."}),
		rows: f.NewCounterVec(prometheus.CounterOpts{Name: "ax_pruned_rows_total",
			Help: "Rows deleted by retention, by table (instances, history, actions, log_chunks, attempts, inbox)."}, []string{"table"}),
		passes: f.NewCounter(prometheus.CounterOpts{Name: "ax_prune_passes_total", Help: "Retention passes run by the primary."}),
	}
}

// retention is the service that prunes, while this process is the primary,
// the runs that ended before Config.Retain ago: a pass soon after start and
// every RetainEvery (Run), each in batches of RetainBatch runs, one short
// fenced transaction each, with a pause between batches so that dispatch is
// never kept waiting for the write lock. It runs in a goroutine of its own,
// beside the loop, and shares nothing with the loop's components: it asks
// the term (termWriter) for the fence and whether the lease is held.
type retention struct {
	cfg  Config
	log  *slog.Logger
	m    retainMetrics
	term termWriter
	mu   sync.Mutex // one pass at a time: the timer's or an operator's
}

// termWriter is what retention asks of the leadership, from its own
// goroutine: the fence of the term and whether the lease is safely held now.
type termWriter interface {
	w() *store.Fence
	primaryNow() bool
}

func newRetention(cfg Config, term termWriter) *retention {
	return &retention{cfg: cfg, log: cfg.Logger, m: newRetainMetrics(cfg.Registerer), term: term}
}

// Run makes a pass a minute after it starts (start-up comes first), then
// every RetainEvery, until ctx ends. With Retain zero it returns at once.
func (r *retention) Run(ctx context.Context) {
	if r.cfg.Retain <= 0 {
		return
	}
	t := time.NewTimer(min(time.Minute, r.cfg.RetainEvery))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := r.Pass(ctx, ""); err != nil && ctx.Err() == nil {
			r.log.Warn("prune_failed", "err", err, "retry_in", r.cfg.RetainEvery.String())
		}
		t.Reset(r.cfg.RetainEvery)
	}
}

// primaryNow reports whether this process holds the lease safely now, from
// any goroutine.
func (e *Engine) primaryNow() bool {
	return e.leadership.lease.Load().held(e.cfg.Now(), e.w().Epoch())
}

// PrunePass deletes, batch by batch, every run that ended before
// Config.Retain ago, and records what went in the action log (action
// "prune") and the metrics (see retention.Pass).
func (e *Engine) PrunePass(ctx context.Context, actor string) (store.PruneResult, error) {
	return e.retention.Pass(ctx, actor)
}

// Pass deletes, batch by batch, every run that ended before Config.Retain
// ago, and records what went in the action log (action "prune") and the
// metrics. It stops early when the lease is not safely held. With Retain
// zero it does nothing. actor is who asked for the pass (an operator, for
// the action log); "" is the scheduler's own timer.
func (r *retention) Pass(ctx context.Context, actor string) (store.PruneResult, error) {
	var total store.PruneResult
	if r.cfg.Retain <= 0 {
		return total, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.Now()
	p := PruneSelection(now, r.cfg.Retain)
	p.Runs = r.cfg.RetainBatch
	r.m.passes.Inc()
	pause := time.NewTimer(0)
	<-pause.C
	defer pause.Stop()
	for {
		if !r.term.primaryNow() {
			break
		}
		began := time.Now() // the batch's own duration, on the wall clock whatever Config.Now is
		res, err := r.term.w().PruneBatch(ctx, p)
		took := time.Since(began)
		if err != nil {
			r.record(ctx, now, total, actor)
			return total, fmt.Errorf("engine: prune runs ended before %s: %w", p.Before.UTC().Format(time.RFC3339), err)
		}
		total = total.Add(res)
		r.m.runs.Add(float64(res.Runs))
		for table, n := range map[string]int64{"instances": res.Instances, "history": res.History, "actions": res.Actions, "log_chunks": res.Chunks, "attempts": res.Attempts, "inbox": res.Inbox} {
			r.m.rows.WithLabelValues(table).Add(float64(n))
		}
		if !res.More {
			break
		}
		p.AfterRun = res.LastRun
		pause.Reset(prunePause(r.cfg.RetainPause, took))
		select {
		case <-ctx.Done():
			r.record(ctx, now, total, actor)
			return total, ctx.Err()
		case <-pause.C:
		}
	}
	r.record(ctx, now, total, actor)
	return total, nil
}

// pruneShare paces pruning: after a batch that took d, the next waits at
// least pruneShare × d, so pruning holds the store at most a fifth of the
// time, however slow its batches get on a busy database.
const pruneShare = 4

// prunePause is the pause after a pruning batch that took took: the
// configured least pause, or pruneShare times the batch's duration.
func prunePause(least, took time.Duration) time.Duration {
	return max(least, pruneShare*took)
}

// record writes what a pass pruned to the action log and the log.
func (rt *retention) record(ctx context.Context, now time.Time, r store.PruneResult, actor string) {
	if r.Runs == 0 && r.Inbox == 0 {
		return
	}
	r.LastRun, r.More = 0, false
	detail, _ := json.Marshal(r) // plain counters
	reason := fmt.Sprintf("retention %s: %d finished run(s) that ended before %s, %d applied result(s) of the inbox", rt.cfg.Retain, r.Runs,
		now.Add(-rt.cfg.Retain).UTC().Format(time.RFC3339), r.Inbox)
	if err := rt.term.w().AppendAction(ctx, store.Action{At: now, Actor: cmp.Or(actor, Actor), Action: "prune", Reason: reason, Detail: string(detail)}); err != nil {
		rt.log.Warn("prune_not_recorded", "err", err)
	}
	rt.log.Info("pruned", "runs", r.Runs, "instances", r.Instances, "history", r.History, "actions", r.Actions, "log_chunks", r.Chunks,
		"inbox", r.Inbox, "retain", rt.cfg.Retain.String())
}
