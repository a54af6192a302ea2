package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/engine/queue"
	"github.com/ax-sched/ax/engine/wheel"
	"github.com/ax-sched/ax/store"
)

// planner owns what is planned to run and when: the triggers of the graph
// with the fire up to which their runs exist, the time wheel of the
// instances due within the window, and those instances (pending, waiting
// in the wheel or, once due, in the dispatcher's queue). The loop goroutine
// owns it.
//
// Its rules, each with one home: runs are created ahead for every fire
// inside the window, as far as the bounds of work ahead allow (createAhead,
// trigger.go), and the store's run key
// makes each (trigger, logical time) exist once; the misfire rule judges the
// fires that passed while no scheduler ran (initTriggers, misfire.go); the
// wheel is loaded from the store at start and topped up (load), and an
// entry whose instance changed meanwhile is dropped when it comes due
// (due). The overlap rule (overlap.go) is not the planner's: the dispatcher
// judges it at the fire time, against the attempts really running then.
// The planner must not write instance states except through the misfire
// rule, nor start anything.
type planner struct {
	trigs       []*trigger
	wheel       *wheel.Wheel
	pending     map[int64]*pend // instances waiting in the wheel or the queue
	loadedUntil time.Time       // the wheel holds every instance due up to here
	// horizon is up to where the last top-up planned runs (now + Window);
	// behind says the last creation stopped at the turn's budget, refillAt
	// when a fire created ahead passes and frees a bound that stopped it
	// (zero: none did); boundLogged that the window_bounded line was logged
	// for the schedule set in force (createAhead).
	horizon     time.Time
	behind      bool
	refillAt    time.Time
	boundLogged bool

	cfg   Config
	host  plannerHost
	st    plannerReader
	log   *slog.Logger
	sched *inForce // the schedule in force (snapshot.go)
	// cache is the resolver's run cache, told of the runs created here;
	// queued is the dispatcher's queue, into which what is due goes at once.
	cache  *runCache
	queued *queue.Queue[int64]
	// unfinished: a run's creation failed part way, and its part written
	// may be left in the store (store.CreatingSetting): dropped before
	// anything else of the next turns (dropLeftUnfinished).
	unfinished bool
}

// plannerHost is what the planner asks of the other components: the
// leadership's fence and epoch for its writes (and renewing the lease ahead
// of a long one), the operator requests' transitionAll to record misfire
// skips with what they settle, the alerts, and whether an attempt is in
// flight (the dispatcher's).
type plannerHost interface {
	fenced
	renewAhead(ctx context.Context)
	transitionAll(ctx context.Context, params []store.TransitionParams) (int, error)
	notify(a Alert)
	inFlight(id int64) bool
	soon()
}

// plannerReader is what the planner reads from the store.
type plannerReader interface {
	Settings(ctx context.Context) (map[string]string, error)
	LastRun(ctx context.Context, trigger string, kind axtype.RunKind) (axtype.Run, error)
	PipelineAddedAt(ctx context.Context, name string) (time.Time, error)
	Actions(ctx context.Context, f store.LogFilter) ([]store.Action, error)
	DueInstances(ctx context.Context, p store.DueParams) ([]axtype.Instance, error)
}

func newPlanner(cfg Config, host plannerHost, st plannerReader, runs *runCache, q *queue.Queue[int64]) planner {
	return planner{pending: map[int64]*pend{}, cfg: cfg, host: host, st: st, log: cfg.Logger, cache: runs, queued: q}
}

// setGraph puts the triggers of the schedule in force.
func (pl *planner) setGraph(trigs []*trigger) {
	pl.trigs = trigs
	pl.boundLogged = false
}

// newTerm empties the wheel for a term that loads it from the store.
func (pl *planner) newTerm(now time.Time, window time.Duration) {
	pl.wheel = wheel.New(now, window)
	pl.pending = map[int64]*pend{}
}

// due moves the entries of the wheel due up to until into queue q, in
// priority order; an entry whose instance changed since it was loaded (a
// newer version, or gone) is dropped.
func (pl *planner) due(until time.Time, q *queue.Queue[int64]) {
	pl.wheel.Advance(until, func(en wheel.Entry) {
		if p := pl.pending[en.ID]; p != nil && p.version == en.Version {
			q.Push(p.task.def.Priority, en.At, en.ID)
		}
	})
}

// forget drops instance id from what waits in the wheel or the queue (it
// was dispatched, or changed by a request), and returns what was known
// of it; a stale wheel or queue entry left behind is dropped when due.
func (pl *planner) forget(id int64) *pend {
	p := pl.pending[id]
	delete(pl.pending, id)
	return p
}

// rebind points what waits at the tasks of a new graph (tasks); an
// instance of a removed task, or of a run the reload dropped (droppedRun),
// is no longer loaded.
func (pl *planner) rebind(tasks map[string]*taskInfo, droppedRun map[int64]bool) {
	for id, p := range pl.pending {
		nt := tasks[p.task.id]
		if nt == nil || droppedRun[p.runID] {
			delete(pl.pending, id)
			continue
		}
		p.task = nt
	}
}

// enqueue puts a SCHEDULED or RETRYING instance into the wheel when its fire
// time is inside the window; later ones are loaded by a top-up.
func (pl *planner) enqueue(ctx context.Context, in axtype.Instance) {
	ti := pl.sched.tasks[in.TaskID]
	if ti == nil {
		return // a task removed from the files: its instances stay as they are
	}
	if p := pl.pending[in.ID]; p != nil && p.version == in.Version {
		return // loaded already
	}
	at := in.NextFireAt.UnixMilli()
	if !in.NextFireAt.After(pl.cfg.Now()) {
		pl.queued.Push(ti.def.Priority, at, in.ID) // due: no need to wait for a tick
	} else if !pl.wheel.Add(wheel.Entry{ID: in.ID, Version: in.Version, At: at}) {
		return
	}
	pl.pending[in.ID] = &pend{at: in.NextFireAt.UnixMilli(), version: in.Version, state: in.State, task: ti, runID: in.RunID,
		logical: in.LogicalTime, attempt: in.Attempt, counted: in.Counted, kind: pl.cache.kindOf(ctx, in.RunID)}
	pl.pending[in.ID].manual = pl.pending[in.ID].kind == axtype.RunManual
}

// load puts every instance due up to now + Window into the wheel.
func (pl *planner) load(ctx context.Context, now time.Time) error {
	until := now.Add(pl.cfg.Window)
	due, err := pl.st.DueInstances(ctx, store.DueParams{Until: until})
	if err != nil {
		return fmt.Errorf("engine: load the window: %w", err)
	}
	for _, in := range due {
		if !pl.host.inFlight(in.ID) {
			pl.enqueue(ctx, in)
		}
	}
	pl.loadedUntil = until
	pl.log.Debug("window_loaded", "until", until.Format(time.RFC3339), "due", len(due), "wheel", pl.wheel.Len())
	return nil
}
