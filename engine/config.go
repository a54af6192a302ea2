package engine

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/engine/breaker"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// Config tunes an Engine. A zero field means its documented default.
type Config struct {
	// Window is how far ahead runs are created and the wheel is loaded. Default 5 m.
	Window time.Duration
	// AheadPerSchedule bounds the fires of one schedule whose runs are
	// created ahead of now (within Window). Default 300: the whole default
	// window of an every-second schedule. At least 2.
	AheadPerSchedule int
	// AheadTotal bounds the runs created ahead of now over all schedules
	// together; beyond it the runs are created as fires pass, earliest
	// first, and one window_bounded line is logged. Default
	// DefaultAheadTotal. At least AheadPerSchedule.
	AheadTotal int
	// CreateChunk is how many instances of a run (store.CreateRun), or
	// definitions of a reload (store.SyncDefinitions), one store
	// transaction writes at most. Default store.DefaultCreateChunk.
	CreateChunk int
	// TopUp is how often the window is created and loaded again. Default 30 s.
	TopUp time.Duration
	// DispatchRate is the global limit in dispatches per second. Zero means unlimited.
	DispatchRate float64
	// GroupRates limits dispatches per second per pipeline group.
	GroupRates map[string]float64
	// MaxRunning caps the local attempts (functions and commands) running at
	// once; work over it waits in the queue in priority order. Zero means
	// DefaultMaxRunning() (8 per CPU); negative means unlimited. HTTP
	// attempts are not counted: their executors bound their own work.
	MaxRunning int
	// GroupMaxRunning caps the attempts of each pipeline group running at
	// once, of every kind. A task's own cap is its max_running.
	GroupMaxRunning map[string]int
	// LeaseTTL is the lifetime of the leader lease. Default 15 s.
	LeaseTTL time.Duration
	// LeaseRenew is how often the lease is renewed. Default 5 s. The engine
	// stops dispatching when a renewal is this close to the lease's expiry.
	LeaseRenew time.Duration
	// Holder names this process in the lease. Default host:pid.
	Holder string
	// Grace is how long shutdown waits for running attempts before
	// cancelling them and giving them back (RETRYING, the attempt not
	// counted). Default 30 s.
	Grace time.Duration
	// TurnBudget bounds how long one turn of the loop dispatches before it
	// serves results, operator requests and timers again; the rest goes out
	// in the next turn, in priority order. Default 100 ms.
	TurnBudget time.Duration
	// BackoffCap caps retry waits. Default 10 m.
	BackoffCap time.Duration
	// ClaimAhead is how long before its fire time an instance due in the
	// wheel is claimed: recorded SCHEDULED → RUNNING with its ticket, its
	// attempt held and handed to its executor at the fire time, so that a
	// burst of fires starts on time instead of waiting for the store. A
	// held attempt starts only while the lease is safely held. Default 1 s;
	// negative claims nothing ahead (dispatch at the fire time).
	ClaimAhead time.Duration
	// NoTaskLabels drops the task label from the per-task metrics
	// (ax_task_*), leaving the pipeline, for installations with very many
	// tasks. Default: labelled by pipeline and task.
	NoTaskLabels bool
	// SLACheck is how often instances are checked against their task's
	// `sla` (an sla_missed alert comes at most this late). Default 5 s.
	SLACheck time.Duration
	// MisfireLimit bounds the runs fire_all creates for missed times. Default 100.
	MisfireLimit int
	// MisfireAfter is how late a fire must be, when a scheduler starts or a
	// task is resumed, to count as missed and follow its misfire policy.
	// Default DefaultMisfireAfter (5 s); fires less late than that run late.
	MisfireAfter time.Duration
	// Breaker tunes the per-task circuit breaker.
	Breaker breaker.Config
	// NoSchedules keeps the schedules from creating runs: a standalone
	// engine that only runs backfills or one run (ax backfill --standalone, ax run).
	NoSchedules bool
	// FailIfHeld makes Run fail with store.ErrLeaseHeld instead of waiting as
	// a standby when another process holds the lease.
	FailIfHeld bool
	// OnEvent, when set, is called as attempts start and end: from the loop,
	// and, for the start of a local attempt, from the attempt's own
	// goroutine. It must be safe for concurrent use.
	OnEvent func(Event)
	// Observer, when set, follows runs (tracing): see [Observer].
	Observer Observer
	// OnAlert, when set, receives every alert after it was recorded (a
	// webhook sink, say). It is called from the loop and from executors'
	// goroutines and must not block: queue the work.
	OnAlert func(Alert)
	// Registerer takes the engine's Prometheus metrics. Nil: a registry of
	// the engine's own (never the default one), so engines never collide.
	Registerer prometheus.Registerer
	// LogMax bounds the output kept per attempt, in bytes of stored records
	// (a line's bytes and its 5-byte header), in memory and in the store
	// alike: the last lines are kept and what was dropped is counted.
	// Default 1 MiB.
	LogMax int
	// LogFlush is how often the output of running attempts is written to
	// the store (what a crash can lose). Default 1 s.
	LogFlush time.Duration
	// Retain is how long finished runs are kept: runs whose instances
	// all ended before now − Retain are pruned with their rows by the
	// primary. Zero keeps everything (ax server's --retain defaults to 30 days).
	Retain time.Duration
	// RetainEvery is how often a retention pass runs. Default 10 m.
	RetainEvery time.Duration
	// RetainBatch is how many runs one pruning transaction deletes. Default 2:
	// on SQLite a batch holds the one write lock, and batches of 10 runs
	// (1,000 history rows) raised dispatch p99 by a third while pruning
	// (make bench row 12: 1.33x); batches of 2 measured 0.91x, pruning about
	// 50 runs a second, far more than any schedule makes.
	RetainBatch int
	// RetainPause is the least pause between two pruning transactions, so
	// that dispatch always gets the write lock in between. Default 50 ms.
	// The pause is also at least pruneShare times the batch's own duration,
	// so that on a slow or busy store pruning slows down with it.
	RetainPause time.Duration
	// Now reads the wall clock. Default time.Now.
	Now func() time.Time
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
}

// DefaultAheadTotal is how many runs are created ahead of now over all
// schedules unless Config.AheadTotal says otherwise: 1,000 every-second
// schedules get 20 s of runs ahead, and the store and the loop's memory
// hold about as many runs as 20,000 fires, whatever the schedule set.
const DefaultAheadTotal = 20_000

// DefaultLeaseTTL is the lifetime of the leader lease unless
// Config.LeaseTTL says otherwise.
const DefaultLeaseTTL = 15 * time.Second

func (c Config) withDefaults() (Config, error) {
	orDefault(&c.Window, 5*time.Minute)
	orDefault(&c.CreateChunk, store.DefaultCreateChunk)
	orDefault(&c.AheadPerSchedule, 300)
	orDefault(&c.AheadTotal, DefaultAheadTotal)
	orDefault(&c.TopUp, 30*time.Second)
	orDefault(&c.LeaseTTL, DefaultLeaseTTL)
	orDefault(&c.LeaseRenew, 5*time.Second)
	orDefault(&c.Grace, 30*time.Second)
	orDefault(&c.MaxRunning, DefaultMaxRunning())
	if c.MaxRunning < 0 {
		c.MaxRunning = 0 // unlimited
	}
	orDefault(&c.TurnBudget, 100*time.Millisecond)
	orDefault(&c.ClaimAhead, time.Second)
	c.ClaimAhead = max(c.ClaimAhead, 0)
	if c.SLACheck <= 0 {
		c.SLACheck = 5 * time.Second
	}
	orDefault(&c.MisfireLimit, 100)
	orDefault(&c.MisfireAfter, DefaultMisfireAfter)
	orDefault(&c.LogMax, runner.DefaultLogMax)
	orDefault(&c.LogFlush, time.Second)
	orDefault(&c.RetainEvery, 10*time.Minute)
	orDefault(&c.RetainBatch, 2)
	orDefault(&c.RetainPause, 50*time.Millisecond)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Holder == "" {
		host, _ := os.Hostname()
		c.Holder = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	return c, c.validate()
}

// orDefault sets *p to def when it is zero (the documented meaning of a
// zero field).
func orDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// validate names the first field of a defaulted Config that no engine can
// run with.
func (c Config) validate() error {
	switch {
	case c.Window < 10*time.Second:
		return fmt.Errorf("engine: config: Window %s is below 10 s", c.Window)
	case c.AheadPerSchedule < 2 || c.AheadTotal < c.AheadPerSchedule:
		return fmt.Errorf("engine: config: AheadPerSchedule %d must be at least 2 and AheadTotal %d at least AheadPerSchedule", c.AheadPerSchedule, c.AheadTotal)
	case c.TopUp <= 0 || c.TopUp > c.Window:
		return fmt.Errorf("engine: config: TopUp %s must be positive and at most Window %s", c.TopUp, c.Window)
	case c.LeaseRenew <= 0 || c.LeaseRenew*2 > c.LeaseTTL:
		return fmt.Errorf("engine: config: LeaseRenew %s must be positive and at most half of LeaseTTL %s", c.LeaseRenew, c.LeaseTTL)
	case c.LogMax < 4<<10:
		return fmt.Errorf("engine: config: LogMax %d is below 4 KiB", c.LogMax)
	case c.Retain < 0 || c.RetainEvery < 0 || c.RetainBatch < 0 || c.RetainPause < 0:
		return fmt.Errorf("engine: config: Retain %s, RetainEvery %s, RetainBatch %d and RetainPause %s must not be negative",
			c.Retain, c.RetainEvery, c.RetainBatch, c.RetainPause)
	case c.LogFlush < 0:
		return fmt.Errorf("engine: config: LogFlush %s is negative", c.LogFlush)
	case c.MaxRunning > MaxRunningBound:
		return fmt.Errorf("engine: config: MaxRunning %d is above %d", c.MaxRunning, MaxRunningBound)
	case checkRate(c.DispatchRate) != nil:
		return fmt.Errorf("engine: config: DispatchRate %v: %w", c.DispatchRate, checkRate(c.DispatchRate))
	}
	for _, g := range slices.Sorted(maps.Keys(c.GroupRates)) {
		if err := checkRate(c.GroupRates[g]); err != nil {
			return fmt.Errorf("engine: config: GroupRates %s %v: %w", g, c.GroupRates[g], err)
		}
	}
	return nil
}
