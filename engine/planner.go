package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/engine/wheel"
	"github.com/ax-sched/ax/store"
)

// planner owns what is planned to run and when: the triggers of the graph
// with the fire up to which their runs exist, the time wheel of the
// instances due within the window; what it knows of each instance waiting
// it hands to the dispatcher (expect), which owns it from then on. The loop
// goroutine owns it.
//
// Its rules, each with one home: runs are created ahead for every fire
// inside the window, as far as the bounds of work ahead allow (createAhead,
// trigger.go), and the store's run key
// makes each (trigger, logical time) exist once; the misfire rule judges the
// fires that passed while no scheduler ran (initTriggers, misfire.go); the
// wheel is loaded from the store at start and topped up (load), and an
// entry whose instance changed meanwhile is dropped when it comes due
// (due, then dispatcher.admit). The overlap rule (overlap.go) is not the planner's: the dispatcher
// judges it at the fire time, against the attempts really running then.
// The planner must not write instance states except through the misfire
// rule, nor start anything.
type planner struct {
	trigs       []*trigger
	wheel       *wheel.Wheel
	loadedUntil time.Time // the wheel holds every instance due up to here
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
	// cache is the resolver's run cache, told of the runs created here.
	cache *runCache
	// unfinished: a run's creation failed part way, and its part written
	// may be left in the store (store.CreatingSetting): dropped before
	// anything else of the next turns (dropLeftUnfinished).
	unfinished bool
}

// plannerHost is what the planner asks of the other components: the
// leadership's fence and epoch for its writes (and renewing the lease ahead
// of a long one), the alerts, and of the dispatcher whether an attempt is
// in flight or an instance waits, and to take what it loads.
type plannerHost interface {
	fenced
	renewAhead(ctx context.Context)
	notify(a Alert)
	inFlight(id int64) bool
	soon()
	waiting(id, version int64) bool        // the dispatcher holds the instance at this version
	expect(id int64, p *pend, dueNow bool) // the dispatcher takes what waits (and queues it when due)
}

// plannerReader is what the planner reads from the store.
type plannerReader interface {
	Settings(ctx context.Context) (map[string]string, error)
	LastRun(ctx context.Context, trigger string, kind axtype.RunKind) (axtype.Run, error)
	PipelineAddedAt(ctx context.Context, name string) (time.Time, error)
	Actions(ctx context.Context, f store.LogFilter) ([]store.Action, error)
	DueInstances(ctx context.Context, p store.DueParams) ([]axtype.Instance, error)
}

func newPlanner(cfg Config, host plannerHost, st plannerReader, runs *runCache) planner {
	return planner{cfg: cfg, host: host, st: st, log: cfg.Logger, cache: runs}
}

// setGraph puts the triggers of the schedule in force.
func (pl *planner) setGraph(trigs []*trigger) {
	pl.trigs = trigs
	pl.boundLogged = false
}

// newTerm empties the wheel for a term that loads it from the store.
func (pl *planner) newTerm(now time.Time, window time.Duration) {
	pl.wheel = wheel.New(now, window)
}

// due takes out of the wheel the entries due up to until, in the wheel's
// order, for the dispatcher to admit (dispatcher.admit).
func (pl *planner) due(until time.Time) []wheel.Entry {
	var out []wheel.Entry
	pl.wheel.Advance(until, func(en wheel.Entry) { out = append(out, en) })
	return out
}

// enqueue puts a SCHEDULED or RETRYING instance into the wheel when its fire
// time is inside the window (later ones are loaded by a top-up), and hands
// what waits to the dispatcher (expect), straight into its queue when due.
func (pl *planner) enqueue(ctx context.Context, in axtype.Instance) {
	ti := pl.sched.tasks[in.TaskID]
	if ti == nil {
		return // a task removed from the files: its instances stay as they are
	}
	if pl.host.waiting(in.ID, in.Version) {
		return // loaded already
	}
	at := in.NextFireAt.UnixMilli()
	dueNow := !in.NextFireAt.After(pl.cfg.Now()) // due: no need to wait for a tick
	if !dueNow && !pl.wheel.Add(wheel.Entry{ID: in.ID, Version: in.Version, At: at}) {
		return
	}
	p := &pend{at: at, version: in.Version, state: in.State, task: ti, runID: in.RunID,
		logical: in.LogicalTime, attempt: in.Attempt, counted: in.Counted, kind: pl.cache.kindOf(ctx, in.RunID)}
	p.manual = p.kind == axtype.RunManual
	pl.host.expect(in.ID, p, dueNow)
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
