package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// behaviour is what a simulated executor does with one attempt.
type behaviour int

const (
	bSucceed   behaviour = iota
	bFail                // fails after its latency (retried per policy)
	bPermanent           // fails, not worth a retry
	bHang                // never answers: only the deadline ends it
	bLost                // does the work, but its result never reaches the scheduler
	bDuplicate           // succeeds and reports the result a second time
	bRefuse              // refuses the attempt (busy): offered again later
)

var behaviourNames = [...]string{"succeed", "fail", "permanent", "hang", "lost", "duplicate", "refuse"}

func (b behaviour) String() string { return behaviourNames[b] }

// execution is one attempt as an executor saw it.
type execution struct {
	node     string // the engine that dispatched it
	instance int64
	task     string
	logical  time.Time
	ticket   string
	start    time.Time
	end      time.Time // zero while it runs
	what     behaviour
	success  bool // it returned (or reported) success
	// seq and endSeq order its start and end among all starts and ends:
	// in the bubble many happen at one instant, one after another.
	seq, endSeq uint64
}

// executions is the world's record of every attempt executors saw; the
// first invariants are checked against it.
type executions struct {
	mu   sync.Mutex
	list []*execution
	n    map[int64]int // attempts seen per instance, for deterministic behaviour
	seq  uint64        // the last start or end
}

// simExec is the in-process executor of one engine: a runner.Executor that
// draws each attempt's behaviour from the seed, the instance and how many
// attempts of it came before, so that a seed replays the same world.
type simExec struct {
	w    *world
	node *node
}

// attemptLine is the message every attempt logs first, with its ticket.
const attemptLine = "sim attempt"

// errDied is the cause of attempts that die with their engine's process.
var errDied = errors.New("sim: the scheduler process died")

// Execute runs one attempt in the engine's process (see perform).
func (x *simExec) Execute(ctx context.Context, a runner.Attempt) (runner.Result, error) {
	return x.w.perform(ctx, x.node.name, x.node.dead, a, nil), nil
}

// perform runs one attempt for the executor who: it waits its latency on the
// bubble's clock and answers as its behaviour says. It honours the
// attempt's deadline and the death of its process (dead). An SDK process
// (sdk not nil) cannot refuse from inside a task function, loses and
// duplicates its results on the network rather than in the engine, and
// when it dies its work never returns: a killed process reports nothing.
func (w *world) perform(ctx context.Context, who string, dead <-chan struct{}, a runner.Attempt, sdk *sdkProc) runner.Result {
	start := time.Now()
	h, b, latency := w.draw(a, sdk != nil)
	if b == bRefuse {
		return runner.Result{Ticket: a.Ticket, Status: runner.StatusFailed, Refused: true, Error: "sim: executor busy"}
	}
	// Its output names its ticket: the checker finds whose output each
	// stored attempt holds (invAttempts).
	runner.Logger(ctx).Info(attemptLine, "ticket", a.Ticket)
	rec := &execution{node: who, instance: a.InstanceID, task: a.Pipeline + "." + a.Task, logical: a.LogicalTime.UTC(),
		ticket: a.Ticket, start: start, what: b}
	w.ex.mu.Lock()
	w.ex.seq++
	rec.seq = w.ex.seq
	w.ex.list = append(w.ex.list, rec)
	w.ex.mu.Unlock()
	finish := func(ok bool) {
		w.ex.mu.Lock()
		w.ex.seq++
		rec.end, rec.success, rec.endSeq = time.Now(), ok, w.ex.seq
		w.ex.mu.Unlock()
	}
	if !a.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, a.Deadline)
		defer cancel()
	}
	timer := time.NewTimer(latency)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		finish(false)
		return ended(ctx, a, start)
	case <-dead:
		finish(false)
		if sdk != nil {
			<-w.over // a killed process: its work never returns
		}
		return runner.Result{Ticket: a.Ticket, Status: runner.StatusKilled, Error: errDied.Error()}
	}
	switch b {
	case bFail:
		finish(false)
		return runner.Result{Ticket: a.Ticket, Status: runner.StatusFailed, Error: "sim: task failed", Duration: latency}
	case bPermanent:
		finish(false)
		return runner.Result{Ticket: a.Ticket, Status: runner.StatusFailed, Error: "sim: bad input", Permanent: true, Duration: latency}
	case bLost:
		finish(true) // the work is done; the answer is lost on the way
		if sdk != nil {
			w.net.lose(a.Ticket, 1+int(h>>50%3)) // the first deliveries of the result are lost; the SDK retries
			break
		}
		select {
		case <-ctx.Done():
		case <-dead:
		}
		return runner.Result{Ticket: a.Ticket, Status: runner.StatusTimeout, Error: "sim: result lost"}
	case bDuplicate:
		finish(true)
		if sdk != nil {
			w.net.twice(a.Ticket) // the result reaches the scheduler twice
			break
		}
		w.duplicate(a.Ticket, a.InstanceID, latency)
	default:
		finish(true)
	}
	return runner.Result{Ticket: a.Ticket, Status: runner.StatusSuccess, Duration: latency}
}

// draw picks an attempt's behaviour and latency from the seed, the
// instance and how many attempts of it came before (h is the hash they come
// from), or from the scenario. An SDK executor never refuses from inside a
// task function (the SDK refuses for it: busy, re-entrant).
func (w *world) draw(a runner.Attempt, sdk bool) (h uint64, b behaviour, latency time.Duration) {
	w.ex.mu.Lock()
	k := w.ex.n[a.InstanceID]
	w.ex.n[a.InstanceID]++
	w.ex.mu.Unlock()
	h = mix(uint64(w.seed), uint64(a.InstanceID), uint64(k))
	b = pickBehaviour(h)
	sc := w.opts.scenario
	if sc != nil {
		b = sc.behave[a.Pipeline+"."+a.Task]
	}
	if (w.restrict.noRefuse || sdk) && b == bRefuse {
		b = bSucceed
	}
	latency = time.Duration(h>>20%2000) * time.Millisecond
	if h>>40%10 == 0 { // now and then slow, sometimes past the timeout
		latency = time.Duration(h>>8%uint64(max(time.Until(a.Deadline)/time.Millisecond*5/4, 1))) * time.Millisecond
	}
	if left := time.Until(a.Deadline); sdk && left > runner.Silence && h>>44%3 == 0 {
		// A task with a timeout past runner.Silence (drawSlow) now and then
		// works most of it: long enough to outlast a silence of its executor.
		latency = left/2 + time.Duration(h>>12%uint64(left/2/time.Millisecond))*time.Millisecond
	}
	if sc != nil {
		latency = 10 * time.Millisecond
		if d, ok := sc.latency[a.Pipeline+"."+a.Task]; ok {
			latency = d
		}
	}
	if b == bHang {
		latency = 1000 * time.Hour
	}
	return h, b, latency
}

// ended is the result of an attempt whose context ended first.
func ended(ctx context.Context, a runner.Attempt, start time.Time) runner.Result {
	r := runner.Result{Ticket: a.Ticket, Duration: time.Since(start), Status: runner.StatusTimeout, Error: "sim: deadline exceeded"}
	if errors.Is(context.Cause(ctx), runner.ErrKilled) {
		r.Status, r.Error = runner.StatusKilled, runner.ErrKilled.Error()
	}
	return r
}

// duplicate reports a success a second time, a little later, as an HTTP
// executor that retried its POST would: into the results inbox, which any
// server writes and the primary reads.
func (w *world) duplicate(ticket string, instance int64, after time.Duration) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		time.Sleep(after/2 + time.Millisecond)
		rep, _ := json.Marshal(runner.Report{Ticket: ticket, Status: runner.StatusSuccess, DurationMS: 1})
		_, err := w.st.ReceiveResult(context.Background(), store.InboxEntry{Ticket: ticket, InstanceID: instance, Report: string(rep),
			ReceivedBy: "sim", ReceivedAt: time.Now()})
		if err != nil && !errors.Is(err, store.ErrUnavailable) {
			w.mu.Lock()
			w.lateErr = err
			w.mu.Unlock()
		}
	}()
}

// pickBehaviour draws a behaviour from a hash: mostly successes.
func pickBehaviour(h uint64) behaviour {
	switch v := h % 100; {
	case v < 68:
		return bSucceed
	case v < 80:
		return bFail
	case v < 83:
		return bPermanent
	case v < 87:
		return bHang
	case v < 91:
		return bLost
	case v < 96:
		return bDuplicate
	default:
		return bRefuse
	}
}

// mix hashes a few numbers into one (splitmix64 steps).
func mix(xs ...uint64) uint64 {
	var h uint64 = 0x9e3779b97f4a7c15
	for _, x := range xs {
		h ^= x + 0x9e3779b97f4a7c15 + h<<6 + h>>2
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

func (e *execution) String() string {
	return fmt.Sprintf("%s instance %d ticket %.8s on %s %s..%s (%s)", e.task, e.instance, e.ticket, e.node,
		e.start.Format("15:04:05.000"), e.end.Format("15:04:05.000"), e.what)
}
