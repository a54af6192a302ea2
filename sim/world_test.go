package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// Options tunes one simulated run. The zero value is what `make test` runs.
type Options struct {
	// Steps is how many driver steps the run takes. Zero means 60.
	Steps int
	// Restrict narrows the generator; see restrictions.
	Restrict Restrictions
	// Logger receives the engines' logs. Nil discards them.
	Logger *slog.Logger
	// Classic draws neither concurrency caps (drawCaps) nor backfills
	// (backfillStep): the worlds of seeds recorded before they were.
	Classic bool

	// scenario, when set, replaces the generated world and the random
	// steps with a hand-built one (the regression cases).
	scenario *scenario
}

// scenario is a hand-built world: its pipelines, start, the driver's steps
// and what executors do with each task's attempts.
type scenario struct {
	pipelines []*genPipeline
	start     time.Time
	steps     []step
	behave    map[string]behaviour     // by pipeline.task; others succeed
	latency   map[string]time.Duration // by pipeline.task; others 10 ms
}

// step is one scripted driver step: let time pass, or send a request.
type step struct {
	advance time.Duration
	op      engine.Request
	jump    time.Duration // every engine down for this long, then a new one
	restart bool          // the primary stops gracefully; a new process starts
}

// Restrictions keep the generator away from a behaviour while the fix for a
// bug the simulator found is not on main yet. Each names its issue.
type Restrictions struct {
	// NoManual: no manual gates (issue 14 items 1-2: a released gate runs
	// before its upstream; a run waiting on an unreleased gate never ends).
	NoManual bool
	// NoRefuse: executors never refuse attempts.
	NoRefuse bool
	// WaitBehindFailed tolerates instances left WAITING behind a FAILED or
	// KILLED upstream when checking that runs end (issue 14 item 3).
	WaitBehindFailed bool
	// WaitBehindUnattempted tolerates instances left WAITING behind an
	// upstream that failed without an attempt: by its wait_timeout, or by
	// propagation from its own upstream (issue 14 items 3 and 4: failure
	// propagates transitively, and "its downstream follow rule 1").
	WaitBehindUnattempted bool
	// NoRerunUnattemptedSuccess: operators never rerun an instance marked
	// SUCCESS without an attempt: such a rerun goes SUCCESS → SCHEDULED and
	// starts before its upstreams succeeded (the state table has no
	// SUCCESS → WAITING edge to send it back to wait). A rerun of one that
	// failed or was killed without an attempt waits for its upstreams.
	NoRerunUnattemptedSuccess bool
	// FallBackWildcard tolerates wildcard fires lost in the repeated hour
	// of a fall-back day (issue 13 item 5).
	FallBackWildcard bool
	// FirstFireLost tolerates a trigger that had no run yet when every
	// scheduler went down losing the fires of the outage (issue 13 item 4:
	// misfire policies exact across an outage of any length).
	FirstFireLost bool
	// NoGateRelease: operators never trigger a manual task (issue 14 item
	// 1: the released gate runs before its upstream succeeded).
	NoGateRelease bool
}

type restrictions struct{ noManual, noRefuse bool }

// Report is the outcome of one seed.
type Report struct {
	Seed       int64
	Steps      int
	Violations []Violation
	Tally      map[string]int // invariant → checks made
	Notes      map[string]int // findings that break no invariant, by kind
	Trace      []string       // the driver's actions, one a line
	Stats      Stats
	Spec       string // the generated pipeline files
}

// Stats counts what a seed did.
type Stats struct {
	Pipelines, Tasks, Runs, Instances, Executions, Transitions int
	Crashes, Stalls, Takeovers, Faults, Verbs, BadVerbs, Jumps int
	ExecutorCrashes, ExecutorSilences                          int // of SDK executor processes
	Backfills                                                  int // created (backfillStep)
	HTTPExecutions, SyncExecutions                             int // attempts run by SDK executors; of them, in synchronous-form worlds
	Forged                                                     int // results forged by a revoked executor (rogueProbe)
	Simulated                                                  time.Duration
}

func (s *Stats) add(o Stats) {
	s.Pipelines += o.Pipelines
	s.Tasks += o.Tasks
	s.Runs += o.Runs
	s.Instances += o.Instances
	s.Executions += o.Executions
	s.Transitions += o.Transitions
	s.Crashes += o.Crashes
	s.Stalls += o.Stalls
	s.Takeovers += o.Takeovers
	s.Faults += o.Faults
	s.Verbs += o.Verbs
	s.BadVerbs += o.BadVerbs
	s.Jumps += o.Jumps
	s.ExecutorCrashes += o.ExecutorCrashes
	s.Backfills += o.Backfills
	s.HTTPExecutions += o.HTTPExecutions
	s.SyncExecutions += o.SyncExecutions
	s.ExecutorSilences += o.ExecutorSilences
	s.Forged += o.Forged
	s.Simulated += o.Simulated
}

// Violation is a broken invariant.
type Violation struct {
	Invariant string
	Step      int
	At        time.Time
	Msg       string
}

func (v Violation) String() string {
	return fmt.Sprintf("step %d at %s: %s: %s", v.Step, v.At.UTC().Format(time.RFC3339), v.Invariant, v.Msg)
}

// node is one engine process of the world.
type node struct {
	name   string
	eng    *engine.Engine
	cancel context.CancelFunc
	done   chan error
	dead   chan struct{} // closed when the process dies (crash)
	ended  atomic.Bool   // Run returned (or was abandoned)
	exited atomic.Bool   // Run returned on its own
	wanted bool          // the world asked it to stop

	mu     sync.Mutex
	frozen chan struct{} // non-nil while the process is stopped (stall, crash)
}

// now is the engine's clock: it blocks while the process is frozen, which is
// how a stall (GC pause, SIGSTOP) and a crash (frozen for good) are made.
func (n *node) now() time.Time {
	n.mu.Lock()
	ch := n.frozen
	n.mu.Unlock()
	if ch != nil {
		<-ch
	}
	return time.Now()
}

func (n *node) freeze() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.frozen == nil {
		n.frozen = make(chan struct{})
	}
}

func (n *node) thaw() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.frozen != nil {
		close(n.frozen)
		n.frozen = nil
	}
}

func (n *node) isFrozen() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.frozen != nil
}

// alive reports whether the process runs (it may be stalled).
func (n *node) alive() bool {
	select {
	case <-n.dead:
		return false
	default:
		return !n.ended.Load()
	}
}

// world is one seed's simulated universe, inside one synctest bubble.
type world struct {
	t        *testing.T
	seed     int64
	rng      *rand.Rand
	opts     Options
	restrict restrictions
	spec     *spec
	g        *dag.Graph
	st       *store.Store
	ex       executions
	wg       sync.WaitGroup

	mu    sync.Mutex // guards nodes for executor goroutines
	nodes []*node
	seq   int
	tmpl  []byte // a new store's file (storeTemplate)

	step     int
	trace    []string
	viol     []Violation
	tally    map[string]int
	stats    Stats
	chk      *checker
	faultP   float64 // probability that a write transaction fails, while faulting
	faultRng *rand.Rand
	faultMu  sync.Mutex
	quiet    bool
	limited  bool // an operator set a dispatch rate
	longJump bool // one jump of a day or more per seed: catch-ups are costly
	notes    map[string]int
	lateErr  error // a duplicate result the inbox refused

	// The HTTP side (sdk.go).
	net    *memnet
	sdks   map[string]*sdkProc // the live process at each executor address
	dead   []*sdkProc          // processes killed, waited for at the end
	sdkSeq int
	sdkDir string
	// syncHTTP: the engines dispatch HTTP tasks in the synchronous form
	// (no callback), in one world in three (drawn apart from the rest).
	syncHTTP bool
	over     chan struct{}            // closed at the end: the work of killed processes returns
	xrng     *rand.Rand               // the executors' faults, apart from the driver's draws
	capRng   *rand.Rand               // the concurrency caps (drawCaps), apart from the generator's draws
	bfRng    *rand.Rand               // the backfill steps (backfillStep), apart from the driver's draws
	tokRng   *rand.Rand               // the revoked executor and its probes (rogueProbe), apart from the rest
	pauseRng *rand.Rand               // what operators aim at under a pause (underPause), apart from the driver's draws
	schedRng *rand.Rand               // the schedule changes (reschedule), apart from the driver's draws
	changes  map[string][]schedChange // by trigger, in order: the changes of its schedule
	rogue    bool                     // the world has an executor whose token was revoked
}

// Run simulates one seed inside a synctest bubble and returns its report.
// It never fails t itself: the caller decides what a violation means.
func Run(t *testing.T, seed int64, opts Options) Report {
	if opts.Steps == 0 {
		opts.Steps = 60
	}
	var rep Report
	tmpl, err := storeTemplate()
	if err != nil {
		t.Fatalf("sim: a new store to copy for each seed: %v", err)
	}
	synctest.Test(t, func(t *testing.T) {
		w := &world{t: t, seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 0xa11ce)), opts: opts, tally: map[string]int{}, notes: map[string]int{},
			restrict: restrictions{noManual: opts.Restrict.NoManual, noRefuse: opts.Restrict.NoRefuse},
			faultRng: rand.New(rand.NewPCG(uint64(seed), 0xfa17)), xrng: rand.New(rand.NewPCG(uint64(seed), 0x5d4)),
			capRng: rand.New(rand.NewPCG(uint64(seed), 0xca95)), bfRng: rand.New(rand.NewPCG(uint64(seed), 0xbf)),
			tokRng: rand.New(rand.NewPCG(uint64(seed), 0x70c)), pauseRng: rand.New(rand.NewPCG(uint64(seed), 0x9a05e)), over: make(chan struct{}),
			schedRng: rand.New(rand.NewPCG(uint64(seed), 0x5c4e)), changes: map[string][]schedChange{}}
		w.ex.n = map[int64]int{}
		w.tmpl = tmpl
		rep = w.run()
	})
	return rep
}

func (w *world) logf(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("%4d %s ", w.step, time.Now().UTC().Format("01-02 15:04:05.000"))+fmt.Sprintf(format, args...))
}

func (w *world) violate(inv, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for _, v := range w.viol {
		if v.Invariant == inv && v.Msg == msg {
			return
		}
	}
	w.viol = append(w.viol, Violation{Invariant: inv, Step: w.step, At: time.Now(), Msg: msg})
	w.logf("VIOLATION %s: %s", inv, msg)
}

func (w *world) run() Report {
	// The bubble starts in 2000: move to the generated start, shortly
	// before a DST change.
	var files []string
	var err error
	for try := 0; ; try++ {
		if sc := w.opts.scenario; sc != nil {
			w.spec = &spec{pipelines: sc.pipelines, start: sc.start}
		} else {
			w.spec = generate(w.rng, w.restrict)
			if !w.opts.Classic {
				drawCaps(w.capRng, w.spec)
				w.syncHTTP = w.capRng.IntN(3) == 0
				drawMatches(rand.New(rand.NewPCG(uint64(w.seed), 0x3a7c)), w.spec)
				drawSlow(rand.New(rand.NewPCG(uint64(w.seed), 0x510e)), w.spec)
				drawDelay(rand.New(rand.NewPCG(uint64(w.seed), 0xde1a)), w.spec)
			}
		}
		files, err = w.compile()
		if err == nil && w.opts.scenario == nil && w.perHour() > instancesPerHour {
			err = fmt.Errorf("%d instances an hour, over the budget of %d", w.perHour(), instancesPerHour)
		}
		if err == nil {
			break
		}
		if try == 50 {
			w.violate("generator", "no valid pipelines after 20 draws: %v", err)
			return w.report(files)
		}
	}
	time.Sleep(time.Until(w.spec.start))
	path := filepath.Join(w.dir(), "ax.db")
	if err = os.WriteFile(path, w.tmpl, 0o600); err == nil {
		w.st, err = store.Open(context.Background(), path, store.Options{})
	}
	if err != nil {
		w.violate("setup", "open store: %v", err)
		return w.report(files)
	}
	store.SetFault(w.st, w.fault)
	w.chk = newChecker(w)
	w.startHTTP()
	w.start()
	if w.spec.standby {
		w.start()
	}
	w.settle()
	if sc := w.opts.scenario; sc != nil {
		w.opts.Steps = len(sc.steps)
	}
	for w.step = 1; w.step <= w.opts.Steps && len(w.viol) == 0; w.step++ {
		if sc := w.opts.scenario; sc != nil {
			w.scripted(sc.steps[w.step-1])
		} else {
			w.act()
			w.sdkFault()
			w.rogueProbe()
		}
		w.settle()
		w.reap()
		w.notePauses()
		w.chk.check(false)
	}
	if len(w.viol) == 0 {
		w.calm()
		w.chk.check(true)
	}
	w.stats.Simulated = time.Since(w.spec.start)
	w.teardown()
	return w.report(files)
}

func (w *world) report(files []string) Report {
	w.stats.Executions = len(w.ex.list)
	for _, e := range w.ex.list {
		if strings.HasPrefix(e.node, "x") { // an SDK executor process (x1#3), not an engine
			w.stats.HTTPExecutions++
			if w.syncHTTP {
				w.stats.SyncExecutions++
			}
		}
	}
	return Report{Seed: w.seed, Steps: w.step, Violations: w.viol, Tally: w.tally, Notes: w.notes, Trace: w.trace, Stats: w.stats,
		Spec: strings.Join(files, "---\n")}
}

// instancesPerHour bounds the instances a seed's schedules create in an
// hour, so that a seed takes a fraction of a second.
const instancesPerHour = 2500

// perHour estimates the instances the schedules create in an hour.
func (w *world) perHour() int {
	n := 0.0
	for _, tr := range w.g.Triggers() {
		c := w.cronOf(tr.Name())
		if c == nil {
			continue
		}
		var fires float64
		switch {
		case c.every > 0:
			fires = float64(time.Hour / c.every)
		case strings.HasPrefix(c.sec, "*/"):
			fires = 3600 / float64(num(c.sec[2:]))
		case strings.HasPrefix(c.min, "*/"):
			fires = 60 / float64(num(c.min[2:]))
		case c.hour == "*":
			fires = 1
		default:
			fires = 1.0 / 24
		}
		n += fires * float64(len(tr.Tasks))
	}
	return int(n)
}

// storeTemplate returns a new store's file, made once (outside any bubble)
// and copied for each seed: its schema is the same for all, and creating
// it took a seed's worth of statements.
var storeTemplate = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "axsim-template-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ax.db")
	st, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		return nil, err
	}
	if err := st.Close(); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
})

// dir is where the seed's SQLite file lives: in memory (/dev/shm) when the
// machine has it, since a seed writes thousands of transactions.
func (w *world) dir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "axsim-"); err == nil {
			w.t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return w.t.TempDir()
}

// compile parses and compiles the generated files.
func (w *world) compile() ([]string, error) {
	var pls []*defs.Pipeline
	var files []string
	for _, p := range w.spec.pipelines {
		src := p.yaml()
		files = append(files, src)
		pl, errs := defs.Parse(p.name+".yaml", []byte(src), defs.Options{Now: w.spec.start})
		if errs.Err() != nil {
			return files, fmt.Errorf("%s: %w", src, errs.Err())
		}
		pls = append(pls, pl)
	}
	g, errs := dag.Compile(pls, dag.Options{Now: w.spec.start, DispatchRate: -1})
	if errs.Err() != nil {
		return files, errs.Err()
	}
	w.g = g
	w.stats.Pipelines = len(pls)
	w.stats.Tasks = len(g.Order())
	return files, nil
}

// fault is the store's fault hook: while faulting, each write transaction
// fails with probability faultP (the lease's too).
func (w *world) fault(what string) error {
	w.faultMu.Lock()
	defer w.faultMu.Unlock()
	if w.faultP > 0 && w.faultRng.Float64() < w.faultP {
		w.stats.Faults++
		return fmt.Errorf("sim: injected fault in %q", what)
	}
	return nil
}

func (w *world) setFault(p float64) {
	w.faultMu.Lock()
	w.faultP = p
	w.faultMu.Unlock()
}

// simMaxRunning is every engine's configured cap on local attempts, fixed
// so that a seed does not depend on the machine's CPUs (the default).
const simMaxRunning = 16

// start runs a new engine process on the store.
func (w *world) start() *node {
	w.seq++
	n := &node{name: fmt.Sprintf("e%d", w.seq), done: make(chan error, 1), dead: make(chan struct{})}
	cfg := engine.Config{Holder: n.name, MisfireLimit: 10, MaxRunning: simMaxRunning, LeaseTTL: 6 * time.Second, LeaseRenew: 2 * time.Second, Now: n.now, Logger: w.opts.Logger,
		DispatchRate: w.spec.rate, GroupRates: w.spec.groups, GroupMaxRunning: w.spec.groupCaps, Grace: 3 * time.Second}
	x := &simExec{w: w, node: n}
	execs := engine.Executors{defs.ExecFunction: x, defs.ExecHTTP: x}
	if w.sdkDir != "" {
		execs[defs.ExecHTTP] = w.routed(n)
	}
	eng, err := engine.New(cfg, w.st, w.g, execs)
	if err != nil {
		w.violate("setup", "engine.New: %v", err)
		return n
	}
	n.eng = eng
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() {
		err := eng.Run(ctx)
		n.exited.Store(true)
		n.done <- err
	}()
	w.mu.Lock()
	w.nodes = append(w.nodes, n)
	w.mu.Unlock()
	w.logf("start %s", n.name)
	// Let it run until it blocks (its first lease attempt done) before
	// anything else happens: two processes started at one instant would
	// race for the lease in goroutine order, and a seed would not replay.
	w.settle()
	return n
}

// reap notices engines whose Run returned on their own (a fatal error),
// notes why, and starts a new process as a supervisor would.
func (w *world) reap() {
	for _, n := range w.nodes {
		if n.ended.Load() || n.wanted || !n.exited.Load() {
			continue
		}
		err := <-n.done
		n.ended.Store(true)
		w.chk.down(n, time.Now())
		w.note("engine exits", "%s: Run returned: %v", n.name, err)
		if len(w.live()) == 0 {
			w.advance(time.Second)
			w.start()
		}
	}
}

// note records a finding that is not an invariant's violation.
func (w *world) note(kind, format string, args ...any) {
	w.notes[kind]++
	w.logf("NOTE %s: "+format, append([]any{kind}, args...)...)
}

// settle lets everything that can run at this instant run.
func (w *world) settle() { synctest.Wait() }

// advance lets simulated time pass.
func (w *world) advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// live returns the engines whose process runs, in start order.
func (w *world) live() []*node {
	var out []*node
	for _, n := range w.nodes {
		if n.alive() {
			out = append(out, n)
		}
	}
	return out
}

// primary returns the live, unfrozen engine that says it leads, if any.
func (w *world) primary() *node {
	for _, n := range w.live() {
		if !n.isFrozen() && n.eng.Stats().Leader {
			return n
		}
	}
	return nil
}

// scripted takes one step of a scenario.
func (w *world) scripted(s step) {
	if s.op != nil {
		p := w.primary()
		if p == nil {
			w.violate("scenario", "no primary for %s", opString(s.op))
			return
		}
		msg, err := w.do(p, s.op, engine.By{Actor: "sim"})
		w.logf("verb %s on %s: %q err=%v", opString(s.op), p.name, msg, err)
		w.settle()
		w.notePauses()
	}
	if s.advance > 0 {
		w.logf("advance %s", s.advance)
		w.advance(s.advance)
	}
	if s.jump > 0 {
		w.outage(s.jump)
	}
	if s.restart {
		w.restart()
	}
}

// act takes one random driver step.
func (w *world) act() {
	if !w.opts.Classic && w.bfRng.IntN(20) == 0 {
		w.backfillStep() // drawn apart, so that a seed without one draws as before
		return
	}
	if !w.opts.Classic && w.schedRng.IntN(30) == 0 {
		w.reschedule() // drawn apart, as the backfills
		return
	}
	r := w.rng
	switch v := r.IntN(100); {
	case v < 55:
		d := time.Duration(50+r.IntN(3000)) * time.Millisecond
		if r.IntN(5) == 0 {
			d = time.Duration(5+r.IntN(90)) * time.Second
		}
		w.logf("advance %s", d)
		w.advance(d)
	case v < 60:
		w.crash()
	case v < 64:
		w.stall()
	case v < 66:
		w.restart()
	case v < 70:
		p := []float64{0.1, 0.3, 1}[r.IntN(3)]
		d := time.Duration(1+r.IntN(20)) * time.Second
		w.logf("store faults p=%.1f for %s", p, d)
		w.setFault(p)
		w.chk.faulty(time.Now(), time.Now().Add(d))
		w.advance(d)
		w.setFault(0)
	case v < 72:
		w.jump()
	case v < 86:
		w.verb()
	default:
		w.badVerb()
	}
}

// backfillStep stores a backfill of a pipeline over the last hours, as
// `ax backfill --store` and the API do, for the primary to run; or cancels
// one in progress, or resumes a cancelled one, through the engine.
func (w *world) backfillStep() {
	r, ctx := w.bfRng, context.Background()
	bfs, err := w.st.Backfills(ctx, 0)
	if err != nil {
		w.logf("backfill: %v", err)
		return
	}
	var active, cancelled []int64
	for _, b := range bfs {
		switch b.State {
		case engine.BackfillPending, engine.BackfillRunning:
			active = append(active, b.ID)
		case engine.BackfillCancelled:
			cancelled = append(cancelled, b.ID)
		}
	}
	if p := w.primary(); p != nil && (len(active) > 0 && r.IntN(4) == 0 || len(cancelled) > 0 && r.IntN(4) == 0) {
		var op engine.Request
		if len(active) > 0 {
			op = engine.CancelBackfill{Backfill: pick(r, active)}
		} else {
			op = engine.ResumeBackfill{Backfill: pick(r, cancelled)}
		}
		msg, err := w.do(p, op, engine.By{Actor: "sim", Reason: "random backfill verb"})
		w.logf("backfill verb %s on %s: %q err=%v", opString(op), p.name, msg, err)
		w.settle()
		return
	}
	pls := w.g.Pipelines()
	pl := pls[r.IntN(len(pls))]
	tasks := pl.Tasks
	if len(tasks) > 30 {
		w.logf("backfill: %s has %d tasks, too many for a seed's budget", pl.Name, len(tasks))
		return
	}
	now := time.Now()
	params := engine.BackfillParams{Pipeline: pl.Name, From: now.Add(-time.Duration(30+r.IntN(210)) * time.Minute), To: now.Add(-time.Minute),
		MaxActiveRuns: 1 + r.IntN(3), Rerun: pick(r, []string{engine.RerunNone, engine.RerunFailed, engine.RerunAll}),
		StopOnFailure: r.IntN(4) == 0, ApproveManual: r.IntN(2) == 0}
	params.WaitCross = params.MaxActiveRuns == 2 // from a draw made already: the seeds keep their meaning
	if r.IntN(2) == 0 {
		params.Select = pick(r, []string{"", "+"}) + pick(r, tasks).Name + pick(r, []string{"", "+"})
	}
	spec, err := engine.PlanBackfill(w.g, params)
	if err != nil {
		w.logf("backfill of %s: %v", pl.Name, err)
		return
	}
	if len(spec.Times) > 8 {
		spec.Times = spec.Times[len(spec.Times)-8:] // the latest 8: a seed's budget
	}
	spec.Hold = w.pauseRng.IntN(2) == 0 // under a pause: refused, or held (I13)
	id, err := engine.CreateBackfill(ctx, w.st, w.g, spec, "sim-cli", now)
	if err == nil {
		w.stats.Backfills++
	}
	w.logf("backfill %d of %s select %q, %d times, max active %d, rerun %s, stop on failure %v, approve manual %v, wait cross %v: err=%v",
		id, pl.Name, params.Select, len(spec.Times), spec.MaxActiveRuns, spec.Rerun, spec.StopOnFailure, spec.ApproveManual, spec.WaitCross, err)
}

// crash freezes the primary for good, as kill -9: its attempts die with it,
// its lease stays until it expires. A new process starts after a downtime
// unless a standby runs.
func (w *world) crash() {
	n := w.primary()
	if n == nil {
		w.logf("crash: no primary")
		w.advance(time.Second)
		return
	}
	n.freeze()
	close(n.dead)
	w.stats.Crashes++
	w.chk.down(n, time.Now())
	w.logf("crash %s", n.name)
	if len(w.live()) == 0 {
		d := time.Duration(1+w.rng.IntN(120)) * time.Second
		w.advance(d)
		w.start()
	}
}

// stall stops the primary's loop for a while: sometimes past its lease, so
// that a standby (if any) takes over and the stalled one wakes fenced.
func (w *world) stall() {
	n := w.primary()
	if n == nil {
		w.logf("stall: no primary")
		w.advance(time.Second)
		return
	}
	d := time.Duration(500+w.rng.IntN(15000)) * time.Millisecond
	if w.rng.IntN(4) == 0 && len(w.live()) == 1 {
		w.start() // a standby that takes over during the stall
		w.stats.Takeovers++
	}
	w.stats.Stalls++
	w.logf("stall %s for %s", n.name, d)
	n.freeze()
	w.chk.down(n, time.Now())
	w.advance(d)
	n.thaw()
	w.chk.up(n, time.Now())
	w.logf("wake %s", n.name)
}

// restart stops the primary gracefully and starts a new process.
func (w *world) restart() {
	n := w.primary()
	if n == nil {
		w.logf("restart: no primary")
		w.advance(time.Second)
		return
	}
	w.logf("stop %s", n.name)
	w.chk.down(n, time.Now())
	n.wanted = true
	n.cancel()
	if err := <-n.done; err != nil {
		w.note("engine exits", "%s: Run: %v", n.name, err)
	}
	n.ended.Store(true)
	w.start()
}

// jump crashes every engine, lets the clock run across the next DST change
// of a pipeline's zone (or hours), and starts a new process.
func (w *world) jump() {
	d := time.Duration(2+w.rng.IntN(60)) * time.Minute
	if !w.longJump && w.rng.IntN(3) == 0 {
		d = time.Duration(20+w.rng.IntN(30)) * time.Hour // across a DST day
		w.longJump = true
	}
	w.outage(d)
}

// outage crashes every engine, lets d pass and starts a new process.
func (w *world) outage(d time.Duration) {
	w.notePauses() // a queued pause may have been applied since the last look (seed 5612)
	for _, n := range w.live() {
		n.freeze()
		close(n.dead)
		w.chk.down(n, time.Now())
	}
	w.stats.Jumps++
	w.logf("all down; clock jumps %s", d)
	down, split := time.Now(), false
	if last := w.chk.lastOutage; !last.up.IsZero() && down.Before(last.up.Add(5*time.Second)) {
		// The engine between ran only briefly: it may or may not have taken
		// the lease and decided the first backlog (goroutine order), so
		// neither outage's misfire count is exact. (Counting both as one
		// backlog flagged a correct second decision: seed 763.)
		down, split = last.down, true
		for i := range w.chk.misfires {
			if w.chk.misfires[i].down.Equal(last.down) && w.chk.misfires[i].up.Equal(last.up) {
				w.chk.misfires[i].split = true
			}
		}
	}
	w.sdkOutage(d, func() { w.advance(d) })
	w.start()
	w.chk.lastOutage = outage{down: down, up: time.Now(), split: split}
	w.chk.misfires = append(w.chk.misfires, w.chk.lastOutage)
}

// calm ends the faults: frozen engines wake, pauses are lifted, and time
// runs long enough for every attempt, retry and timeout to end.
func (w *world) calm() {
	w.quiet = true
	w.setFault(0)
	if len(w.live()) == 0 {
		w.start()
	}
	w.logf("calm")
	w.advance(10 * time.Second)
	if p := w.primary(); p != nil {
		ps, err := w.st.Pauses(context.Background())
		if err == nil {
			for _, x := range ps {
				_, err := w.do(p, engine.Resume{Scope: x.Scope, Target: x.Name}, engine.By{Actor: "sim"})
				w.logf("calm: resume %s %s: %v", x.Scope, x.Name, err)
			}
		}
		w.notePauses()
	}
	w.advance(w.longestAttempts())
}

// longestAttempts is how long the slowest task of the world may take with
// every attempt timing out and every backoff: after that long, an instance
// that is not over must be waiting on something it can name.
func (w *world) longestAttempts() time.Duration {
	var longest time.Duration
	for _, t := range w.g.Order() {
		d, iv := time.Duration(0), t.Retry.Interval
		for k := 0; k <= t.Retry.Count; k++ {
			d += t.Timeout + 2*time.Second
			if k >= 2 {
				iv *= 2
			}
			if k < t.Retry.Count {
				d += iv
			}
		}
		longest = max(longest, d)
	}
	return longest + time.Minute
}

// teardown stops every engine, wakes the crashed ones (their late writes
// must be fenced; they are not checked any more) and waits for them all.
func (w *world) teardown() {
	w.setFault(0)
	for _, n := range w.nodes {
		if n.cancel != nil {
			n.cancel()
		}
	}
	for _, n := range w.nodes {
		n.thaw()
	}
	for _, n := range w.nodes {
		if n.eng != nil && !n.ended.Load() {
			if err := <-n.done; err != nil && !n.exited.Load() {
				w.note("engine exits", "%s: Run: %v", n.name, err)
			}
			n.ended.Store(true)
		}
	}
	w.stopHTTP()
	w.wg.Wait()
	w.st.Close()
}

// do sends an operator request to n, giving up when n does not answer
// within a second (it may be frozen).
func (w *world) do(n *node, op engine.Request, by engine.By) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	w.stats.Verbs++
	return n.eng.Do(ctx, op, by)
}

// randomInstance returns a random instance in one of states, if any.
func (w *world) randomInstance(states ...axtype.State) (axtype.Instance, bool) {
	return w.randomInstanceOf(w.rng, func(*defs.Task) bool { return true }, states...)
}

// randomInstanceOf picks, with r, an instance in one of states of a task
// that match.
func (w *world) randomInstanceOf(r *rand.Rand, match func(*defs.Task) bool, states ...axtype.State) (axtype.Instance, bool) {
	ins, err := w.st.Instances(context.Background(), store.InstanceFilter{States: states, Limit: 200})
	if err != nil {
		return axtype.Instance{}, false
	}
	ins = slices.DeleteFunc(ins, func(in axtype.Instance) bool { t := w.g.Task(in.TaskID); return t == nil || !match(t) })
	if len(ins) == 0 {
		return axtype.Instance{}, false
	}
	slices.SortFunc(ins, func(a, b axtype.Instance) int { return int(a.ID - b.ID) })
	return ins[r.IntN(len(ins))], true
}

func (w *world) randomTask() *defs.Task {
	ts := w.g.Order()
	return ts[w.rng.IntN(len(ts))]
}

// capsVerb is a limits request on running attempts: a group's cap (in the
// worlds that draw caps, one in two), else the server's.
func (w *world) capsVerb() engine.Request {
	if g, ok := w.capGroup(); ok {
		return engine.SetLimits{GroupMaxRunning: map[string]int{g: pick(w.capRng, []int{0, 1, 2, 4})}}
	}
	m := pick(w.rng, []int{0, 2, 8})
	return engine.SetLimits{MaxRunning: &m}
}

// capGroup picks, one limits verb in two, the group whose cap it sets at
// run time, from the caps' own source (a Classic world never does): the
// group with a configured cap or any group of a task.
func (w *world) capGroup() (string, bool) {
	if w.opts.Classic || w.capRng.IntN(2) == 0 {
		return "", false
	}
	var groups []string
	for _, t := range w.g.Order() {
		groups = append(groups, t.Group)
	}
	for g := range w.spec.groupCaps {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	groups = slices.Compact(groups)
	return pick(w.capRng, groups), true
}

// verb sends a valid operator request to the primary.
func (w *world) verb() {
	p := w.primary()
	if p == nil {
		w.logf("verb: no primary")
		w.advance(time.Second)
		return
	}
	r := w.rng
	var op engine.Request
	switch r.IntN(11) {
	case 8:
		in, ok := w.randomInstance(axtype.Waiting, axtype.Failed, axtype.Killed)
		if !ok {
			w.advance(time.Second)
			return
		}
		op = engine.Mark{Instance: in.ID, State: pick(r, []axtype.State{axtype.Success, axtype.Failed})}
	case 9:
		in, ok := w.randomInstance(axtype.Waiting, axtype.Scheduled, axtype.Running, axtype.Retrying)
		if !ok {
			w.advance(time.Second)
			return
		}
		op = engine.Cancel{Run: in.RunID}
	case 10:
		op = w.capsVerb()
	case 0:
		t := w.randomTask()
		pause := engine.Pause{Scope: store.ScopeTask, Target: t.ID()}
		if r.IntN(2) == 0 {
			pause.Scope, pause.Target = store.ScopePipeline, t.Pipeline
		}
		if !w.opts.Classic && w.pauseRng.IntN(3) == 0 {
			pause.Scope, pause.Target = store.ScopeGroup, t.Group
		}
		op = pause
	case 1:
		ps, _ := w.st.Pauses(context.Background())
		if len(ps) == 0 {
			w.advance(time.Second)
			return
		}
		x := ps[r.IntN(len(ps))]
		op = engine.Resume{Scope: x.Scope, Target: x.Name}
	case 2, 3:
		t := w.randomTask()
		if t.Manual && w.opts.Restrict.NoGateRelease {
			w.advance(time.Second)
			return
		}
		op = w.triggerVerb(t, r.IntN(2) == 0)
	case 4:
		in, ok := w.randomInstance(axtype.Running)
		if !ok {
			w.advance(time.Second)
			return
		}
		op = engine.Kill{Instance: in.ID}
	case 5, 6:
		in, ok := w.randomInstance(axtype.Failed, axtype.Killed, axtype.Success)
		if !ok || w.opts.Restrict.NoRerunUnattemptedSuccess && in.Attempt == 0 && in.State == axtype.Success {
			w.advance(time.Second)
			return
		}
		op = w.rerunVerb(in)
	default:
		g := float64(pick(r, []int{0, 50, 100, 200}))
		op = engine.SetLimits{Global: &g}
		w.limited = w.limited || g > 0
	}
	by := engine.By{Actor: "sim", Reason: "random verb"}
	if r.IntN(4) == 0 {
		w.queueVerb(op, engine.By{Actor: "sim-cli", Reason: by.Reason})
		return
	}
	msg, err := w.do(p, op, by)
	w.logf("verb %s on %s: %q err=%v", opString(op), p.name, msg, err)
	w.settle()
	w.notePauses()
}

// triggerVerb is a trigger of task t (with downstream), or of a task a
// pause covers (underPause).
func (w *world) triggerVerb(t *defs.Task, downstream bool) engine.Trigger {
	tr := engine.Trigger{Target: t.ID(), Downstream: downstream}
	if u, hold, ok := w.underPause(); ok && (!u.Manual || !w.opts.Restrict.NoGateRelease) {
		tr.Target, tr.Hold = u.ID(), hold
	}
	return tr
}

// rerunVerb is a rerun of instance in, or of a failed or killed instance of
// a task a pause covers (underPause).
func (w *world) rerunVerb(in axtype.Instance) engine.Rerun {
	rr := engine.Rerun{Instance: in.ID}
	if _, hold, ok := w.underPause(); ok {
		paused := func(t *defs.Task) bool { _, ok := w.pausedTask(t); return ok }
		if in, ok := w.randomInstanceOf(w.pauseRng, paused, axtype.Failed, axtype.Killed); ok {
			rr.Instance, rr.Hold = in.ID, hold
		}
	}
	return rr
}

// underPause picks, in one of two trigger and rerun verbs while a pause is
// in force (never in a Classic world), a task the pause covers to aim at
// instead, and whether to ask to hold it (one in three): the pause rule
// must hold what an operator makes, whoever made it (I13).
func (w *world) underPause() (t *defs.Task, hold, ok bool) {
	if w.opts.Classic || w.pauseRng.IntN(2) == 0 {
		return nil, false, false
	}
	var covered []*defs.Task
	for _, t := range w.g.Order() {
		if _, ok := w.pausedTask(t); ok {
			covered = append(covered, t)
		}
	}
	if len(covered) == 0 {
		return nil, false, false
	}
	return pick(w.pauseRng, covered), w.pauseRng.IntN(3) == 0, true
}

// pausedTask returns the stored pause that covers task t, if any.
func (w *world) pausedTask(t *defs.Task) (store.Pause, bool) {
	ps, err := w.st.Pauses(context.Background())
	if err != nil {
		return store.Pause{}, false
	}
	set := store.NewPauseSet(ps)
	return set.Covering(t.ID(), t.Group, t.Pipeline)
}

// queueVerb queues op as `ax … --store` does: in the store, for the
// primary to apply.
func (w *world) queueVerb(op engine.Request, by engine.By) {
	verb, args, _ := engine.EncodeRequest(op, by)
	id, err := w.st.EnqueueOp(context.Background(), store.Op{Kind: verb, Target: opString(op), Args: string(args), Actor: by.Actor,
		Reason: by.Reason}, time.Now())
	w.logf("queued verb %s as request %d: err=%v", opString(op), id, err)
	w.stats.Verbs++
	w.advance(time.Second)
	w.notePauses()
}

// notePauses tracks when any pause was in force, for I4.
func (w *world) notePauses() {
	ps, err := w.st.Pauses(context.Background())
	if err != nil {
		return
	}
	c := w.chk
	switch {
	case len(ps) > 0 && c.pausedSince.IsZero():
		c.pausedSince = time.Now()
	case len(ps) == 0 && !c.pausedSince.IsZero():
		c.pauses = append(c.pauses, span{c.pausedSince, time.Now()})
		c.pausedSince = time.Time{}
	}
}

// badVerb sends a request that must be refused, and checks that it was and
// that nothing changed.
func (w *world) badVerb() {
	p := w.primary()
	if p == nil {
		w.advance(time.Second)
		return
	}
	r := w.rng
	if v := r.IntN(12); v >= 9 {
		w.staleVerb(v == 9)
		return
	}
	var op engine.Request
	switch r.IntN(12) {
	case 0:
		op = engine.Pause{Scope: store.ScopeTask, Target: "nosuch.task"}
	case 1:
		op = engine.Trigger{Target: w.randomTask().Pipeline + ".missing"}
	case 2:
		w.queuedBadVerb(w.randomTask().ID())
		return
	case 3:
		in, ok := w.randomInstance(axtype.Success, axtype.Failed, axtype.Waiting)
		if !ok {
			return
		}
		op = engine.Kill{Instance: in.ID}
	case 4:
		in, ok := w.randomInstance(axtype.Running, axtype.Waiting, axtype.Scheduled)
		if !ok {
			return
		}
		op = engine.Rerun{Instance: in.ID}
	case 5:
		op = engine.Kill{Instance: 1 << 40}
	case 6:
		g := -5.0
		op = engine.SetLimits{Global: &g}
	case 7:
		op = engine.SetLimits{Groups: map[string]float64{"nosuchgroup": 3}}
	case 9:
		in, ok := w.randomInstance(axtype.Running, axtype.Success)
		if !ok {
			return
		}
		op = engine.Mark{Instance: in.ID, State: axtype.Success}
	case 10:
		in, ok := w.randomInstance(axtype.Failed)
		if !ok {
			return
		}
		op = engine.Mark{Instance: in.ID, State: axtype.Running}
	case 11:
		op = engine.Cancel{Run: 1 << 40}
	default:
		op = engine.Pause{Scope: "galaxy", Target: w.randomTask().Pipeline}
	}
	by := engine.By{Actor: "sim", Reason: "bad verb"}
	if ops, err := w.st.PendingOps(context.Background(), 1); err != nil || len(ops) > 0 {
		return // a queued request may be applied meanwhile and change pauses or limits
	}
	before := w.chk.snapshot()
	msg, err := w.do(p, op, by)
	w.settle()
	after := w.chk.snapshot()
	w.stats.BadVerbs++
	w.logf("bad verb %s on %s: %q err=%v", opString(op), p.name, msg, err)
	w.tally[invBadVerb]++
	switch {
	case err == nil:
		w.violate(invBadVerb, "%s was accepted: %q", opString(op), msg)
	case errors.Is(err, context.DeadlineExceeded):
		// the loop did not answer (busy or frozen): nothing to judge
	default:
		if diff := w.chk.changedBy(before, after, by.Actor); diff != "" {
			w.violate(invBadVerb, "%s was refused (%v) but it changed the store: %s", opString(op), err, diff)
		}
	}
}

// opString renders an operator request for traces: its queued form.
func opString(op engine.Request) string {
	_, args, err := engine.EncodeRequest(op, engine.By{})
	if err != nil {
		return fmt.Sprintf("%s (%v)", op.Verb(), err)
	}
	return string(args)
}

// queuedBadVerb queues a request of an unknown verb, as an `ax … --store`
// of another build might: only the queue can carry one (the engine's
// requests are a sealed set of types). The primary must refuse it, with
// nothing changed.
func (w *world) queuedBadVerb(target string) {
	ctx := context.Background()
	if ops, err := w.st.PendingOps(ctx, 1); err != nil || len(ops) > 0 {
		return // a queued request may be applied meanwhile and change pauses or limits
	}
	before := w.chk.snapshot()
	id, err := w.st.EnqueueOp(ctx, store.Op{Kind: "explode", Target: target, Args: `{"kind":"explode","target":"` + target + `"}`,
		Actor: "sim", Reason: "bad verb"}, time.Now())
	if err != nil {
		return
	}
	w.advance(time.Second)
	o, err := w.st.GetOp(ctx, id)
	w.stats.BadVerbs++
	w.logf("bad verb explode %s queued as request %d: state %s %s", target, id, o.State, o.Error)
	if err != nil || o.State == store.OpPending || o.State == store.OpApplying {
		return // no primary read the queue within the second, or recorded its outcome yet: nothing to judge
	}
	w.tally[invBadVerb]++
	if o.State != store.OpFailed {
		w.violate(invBadVerb, "queued verb explode %s was applied: %q", target, o.Result)
	}
	if diff := w.chk.changedBy(before, w.chk.snapshot(), "sim"); diff != "" {
		w.violate(invBadVerb, "queued verb explode %s was refused (%s) but changed the store: %s", target, o.Error, diff)
	}
}

// staleVerb sends a valid request where it must be refused: to an engine
// that is not the primary (a standby, or a demoted primary awake again),
// or straight to the store under a lease epoch that is no longer current.
// Either way nothing may change (I8).
func (w *world) staleVerb(toEngine bool) {
	ctx := context.Background()
	t := w.randomTask()
	w.tally[invBadVerb]++
	w.stats.BadVerbs++
	before := w.chk.snapshot()
	if toEngine {
		var stale *node
		for _, n := range w.live() {
			if !n.isFrozen() && !n.eng.Stats().Leader {
				stale = n
			}
		}
		if stale == nil {
			return
		}
		op, by := engine.Pause{Scope: store.ScopeTask, Target: t.ID()}, engine.By{Actor: "sim", Reason: "stale engine"}
		msg, err := w.do(stale, op, by)
		w.settle()
		w.logf("stale verb %s on %s (not primary): %q err=%v", opString(op), stale.name, msg, err)
		if err == nil {
			w.violate(invBadVerb, "%s was accepted by %s, which is not the primary: %q", opString(op), stale.name, msg)
		} else if diff := w.chk.changedBy(before, w.chk.snapshot(), by.Actor); diff != "" {
			w.violate(invBadVerb, "%s on %s (not primary) was refused (%v) but changed the store: %s", opString(op), stale.name, err, diff)
		}
		return
	}
	l, err := w.st.GetLease(ctx, store.LeaseName)
	if err != nil || l.Epoch < 2 {
		return
	}
	f := w.st.Fence(l.Epoch - 1)
	perr := f.SetPause(ctx, store.Pause{Scope: store.ScopeTask, Name: t.ID(), Actor: "sim", Reason: "stale epoch", At: time.Now()})
	in, ok := w.randomInstance(axtype.Waiting)
	var terr error = store.ErrNotLeader
	if ok {
		_, terr = f.Transition(ctx, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Waiting, To: axtype.Paused,
			Epoch: l.Epoch - 1, Now: time.Now(), Actor: "sim", Reason: "stale epoch"})
	}
	w.settle()
	w.logf("stale writes under epoch %d (current %d): pause %s: %v; transition: %v", l.Epoch-1, l.Epoch, t.ID(), perr, terr)
	switch {
	case perr == nil:
		w.violate(invBadVerb, "a pause written under stale epoch %d (current %d) was accepted", l.Epoch-1, l.Epoch)
	case terr == nil:
		w.violate(invBadVerb, "a transition under stale epoch %d (current %d) was accepted", l.Epoch-1, l.Epoch)
	default:
		if diff := w.chk.changedBy(before, w.chk.snapshot(), "sim"); diff != "" {
			w.violate(invBadVerb, "writes under stale epoch %d were refused but changed the store: %s", l.Epoch-1, diff)
		}
	}
}
