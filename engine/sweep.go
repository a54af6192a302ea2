package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// AlertNoExecutor is raised once per task that has due work and no live
// executor to take it (every one silent, or every one refusing), until one
// is live again.
const AlertNoExecutor = "no_executor"

// sweepEvery is how often the primary looks at the executor registry on its
// own clock: not as a side effect of the next dispatch, so that a
// lost executor is noticed while nothing is due.
const sweepEvery = 5 * time.Second

// Failoverer is implemented by executors that run attempts on registered
// executors (runner.Routed): the attempts accepted by an earlier process of
// a restarted executor fail at once, with reason, to be retried per their
// policy (that work is gone).
type Failoverer interface {
	Failover(address, boot, reason string) int
}

// silenceWatcher is implemented by executors that run attempts on
// registered executors (runner.Routed): what runs on a silent executor,
// and the kills that did not reach it. Silent is not dead: those attempts
// stay RUNNING under their tickets until the executor's /status or their
// deadline resolves them, and their kills are sent again when it is heard
// from.
type silenceWatcher interface {
	InFlight(address string) []string
	Unkilled(address string) int
	RetryKills(address string) []string
}

// hearer is implemented by executors that hear from registered executors
// other than by heartbeat (runner.Routed: a dispatch accepted).
type hearer interface {
	LastHeard(address string, hb time.Time) time.Time
}

// lastHeard returns when the registered executor x was last heard from:
// its last heartbeat, or a later dispatch it accepted. The sweep, the
// queue (unrouted), the explanation and routing (runner.Routed) judge
// liveness by it.
func (d *dispatcher) lastHeard(x store.Executor) time.Time {
	if h, ok := d.execs[defs.ExecHTTP].(hearer); ok {
		return h.LastHeard(x.Address, x.LastHeartbeat)
	}
	return x.LastHeartbeat
}

// unrouted says why due work of task t waits in the queue rather than
// being dispatched: it is an HTTP task and every executor registered for it
// is excluded at now (not heard from within runner.Silence), or none is
// registered and its own URL is an excluded executor's; "" when it may go.
// It judges by the registry as the sweep last read it (routes); routing
// (runner.Routed) judges again at the moment of the dispatch.
func (d *dispatcher) unrouted(t *taskInfo, now time.Time) string {
	if t.def.Executor.Kind != defs.ExecHTTP || len(d.routes) == 0 {
		return ""
	}
	var out []string
	for _, x := range d.routes {
		if !slices.Contains(x.Tasks, t.id) {
			continue
		}
		if runner.Alive(d.lastHeard(x), now) {
			return ""
		}
		out = append(out, x.Address)
	}
	if len(out) > 0 {
		return runner.NoLiveExecutor(t.id, out)
	}
	for _, x := range d.routes {
		if runner.ServedBy(t.def.Executor.URL, x.Address) && !runner.Alive(d.lastHeard(x), now) {
			return runner.URLExcluded(t.def.Executor.URL, x.Address)
		}
	}
	return ""
}

// watch is what the sweep remembers between passes (and terms): alerts
// raised, so that each is raised once, and refusals.
type watch struct {
	at      time.Time
	lost    map[string]bool       // executors alerted as lost, until they heartbeat again
	silent  map[string]string     // tickets running on a lost executor, by ticket: its address (their timeouts say so), until they end or it is heard from
	kept    map[string]*keptTally // lost executors that ran attempts then, by address: how those were resolved
	noExec  map[string]bool       // tasks alerted for no live executor, until one is live
	refused map[int64]refusal     // instances every executor refused, since when
	asking  map[int64]bool        // inherited instances whose executors are being asked about their ticket
	// groupsAt is when the process groups of inherited command attempts
	// were last checked (see checkGroups).
	groupsAt time.Time
	groups   map[int64]*attempt  // inherited command attempts whose groups run on this host, by instance
	goneAt   map[int64]time.Time // when the group (or scheduler process) of one of groups was first seen gone
}

// refusal is an instance that no executor took: its attempt's deadline,
// counted from the first refusal, bounds the refusal back-off.
type refusal struct {
	task  string
	since time.Time
	last  string // the last refusal, for alerts and errors
}

func newWatch() *watch {
	return &watch{lost: map[string]bool{}, silent: map[string]string{}, kept: map[string]*keptTally{}, noExec: map[string]bool{}, refused: map[int64]refusal{}, asking: map[int64]bool{}, groups: map[int64]*attempt{}, goneAt: map[int64]time.Time{}}
}

// sweep excludes executors silent for longer than runner.Silence: it alerts
// executor_lost once per executor, keeps the attempts running on it RUNNING
// under their tickets (silent is not dead: it may still run them) and asks
// it for their /status at every sweep (askSilent), leaving those it does
// not answer for to their deadline; it sends again the kills that did not
// reach an executor heard from again; it fails over the attempts accepted
// by an earlier process of an executor that registered again with a new
// boot id (restarted: that work is gone); and it alerts no_executor once
// per task with due work that no live executor takes.
func (c *completer) sweep(ctx context.Context, now time.Time) error {
	w := c.watch
	if !c.hasHTTP || now.Sub(w.at) < sweepEvery {
		return nil
	}
	w.at = now
	exs, err := c.st.Executors(ctx, "")
	if err != nil {
		return fmt.Errorf("engine: sweep the executor registry: %w", err)
	}
	c.disp.routes = exs
	fo, _ := c.disp.execs[defs.ExecHTTP].(Failoverer)
	sw, _ := c.disp.execs[defs.ExecHTTP].(silenceWatcher)
	live, registered := map[string]int{}, map[string]int{}
	ask, kills := map[string][]string{}, []string{}
	for t, addr := range w.silent {
		if _, running := c.disp.running.byTicket(t); !running || !w.lost[addr] {
			delete(w.silent, t) // ended, or its executor heard from again
		}
	}
	for _, x := range exs {
		heard := c.disp.lastHeard(x)
		alive := runner.Alive(heard, now)
		for _, t := range x.Tasks {
			registered[t]++
			if alive {
				live[t]++
			}
		}
		if alive && x.Boot != "" && fo != nil {
			// Attempts accepted by an earlier process at this address are gone with it.
			if n := fo.Failover(x.Address, x.Boot, fmt.Sprintf("executor %s restarted (registered again as %s): the attempt it ran is gone", x.Address, x.Boot)); n > 0 {
				c.log.Warn("executor_restarted", "executor", x.Address, "boot", x.Boot, "attempts_failed_over", n)
			}
		}
		if alive {
			kills = append(kills, c.heardAgain(ctx, x.Address, sw, now)...)
			continue
		}
		ask[x.Address] = c.stillSilent(ctx, x.Address, sw, now.Sub(heard), now)
	}
	c.askSilent(ask, kills)
	c.resolveOrphans(exs)
	c.alertNoExecutor(ctx, live, registered, now)
	return nil
}

// alertNoExecutor alerts no_executor once per task with due work that no
// live executor takes (live and registered count each task's executors),
// until one is live again.
func (c *completer) alertNoExecutor(ctx context.Context, live, registered map[string]int, now time.Time) {
	w := c.watch
	due := map[string]string{} // task → why it has no executor
	for _, r := range w.refused {
		due[r.task] = "every executor refused or was unreachable: " + r.last
	}
	for _, p := range c.disp.pending {
		if p.task.def.Executor.Kind == defs.ExecHTTP && p.at <= now.UnixMilli() && registered[p.task.id] > 0 {
			if _, ok := due[p.task.id]; !ok {
				due[p.task.id] = fmt.Sprintf("none of its %d registered executor(s) sent a heartbeat within %s", registered[p.task.id], runner.Silence)
			}
		}
	}
	for task := range w.noExec {
		if live[task] > 0 {
			delete(w.noExec, task)
		}
	}
	tasks := make([]string, 0, len(due))
	for t := range due {
		tasks = append(tasks, t)
	}
	slices.Sort(tasks)
	for _, task := range tasks {
		if live[task] > 0 || w.noExec[task] {
			continue
		}
		w.noExec[task] = true
		ti := c.sched.tasks[task]
		c.host.Alert(ctx, Alert{Kind: AlertNoExecutor, At: now, Pipeline: ti.def.Pipeline, Task: task,
			Message: fmt.Sprintf("task %s has due work and no live executor: %s", task, due[task])})
	}
}

// keptTally counts what became of the attempts an executor ran when it
// was lost (silent past runner.Silence): resolved by its /status, judged
// at their deadline (how, by ticket), or the rest (their results came by
// themselves).
type keptTally struct {
	n       int
	tickets []string
	how     map[string]string // ticket → "status" or "deadline"
}

// over reports whether every kept attempt has ended (its result recorded).
func (k *keptTally) over(running *inflight) bool {
	for _, t := range k.tickets {
		if _, ok := running.byTicket(t); ok {
			return false
		}
	}
	return true
}

// count returns how many of the attempts were resolved in way how.
func (k *keptTally) count(how string) int {
	n := 0
	for _, h := range k.how {
		if h == how {
			n++
		}
	}
	return n
}

// stillSilent takes a lost executor at addr, silent for silent: the
// tickets it runs, to ask its /status about (returned); executor_lost once,
// saying what becomes of them; and, once none is left, an alert saying how
// each was resolved.
func (c *completer) stillSilent(ctx context.Context, addr string, sw silenceWatcher, silent time.Duration, now time.Time) []string {
	w := c.watch
	var tickets []string
	unkilled := 0
	if sw != nil {
		tickets, unkilled = sw.InFlight(addr), sw.Unkilled(addr)
	}
	for _, t := range tickets {
		w.silent[t] = addr
	}
	if !w.lost[addr] {
		w.lost[addr] = true
		c.host.Alert(ctx, Alert{Kind: AlertExecutorLost, At: now, Message: lostMessage(addr, silent, len(tickets), unkilled)})
		if len(tickets) > 0 {
			w.kept[addr] = &keptTally{n: len(tickets), tickets: tickets, how: map[string]string{}}
		}
	} else if k := w.kept[addr]; k != nil && k.over(&c.disp.running) {
		delete(w.kept, addr)
		c.host.Alert(ctx, Alert{Kind: AlertExecutorLost, At: now, Message: keptMessage(addr, k, false)})
	}
	return tickets
}

// heardAgain takes an executor at addr heard from within runner.Silence:
// no longer lost (an alert says how the attempts it ran while lost were
// resolved, and that the rest run on there); it returns addr when kills
// wait to be sent to it again.
func (c *completer) heardAgain(ctx context.Context, addr string, sw silenceWatcher, now time.Time) []string {
	w := c.watch
	if w.lost[addr] {
		for t, a := range w.silent {
			if a == addr {
				delete(w.silent, t)
			}
		}
		if k := w.kept[addr]; k != nil {
			delete(w.kept, addr)
			c.host.Alert(ctx, Alert{Kind: AlertExecutorLost, At: now, Message: keptMessage(addr, k, true)})
		}
	}
	delete(w.lost, addr)
	if sw != nil && sw.Unkilled(addr) > 0 {
		return []string{addr}
	}
	return nil
}

// keptMessage says how the attempts a lost executor ran were resolved:
// once none is left (back false), or when it is heard from again (back).
func keptMessage(addr string, k *keptTally, back bool) string {
	status, deadline := k.count("status"), k.count("deadline")
	rest := k.n - status - deadline
	if back {
		return fmt.Sprintf("executor %s is heard from again: of the %d attempt(s) it ran when it fell silent, %d were resolved by asking its /status (same ticket), %d judged at their deadline, %d run on or reported there under their tickets",
			addr, k.n, status, deadline, rest)
	}
	return fmt.Sprintf("executor %s, still silent: its %d attempt(s) kept RUNNING are resolved: %d by asking its /status (same ticket), %d judged at their deadline, %d by a result that reached the scheduler",
		addr, k.n, status, deadline, rest)
}

// lostMessage is the executor_lost alert: what the executor gets, and what
// becomes of the attempts it runs.
func lostMessage(addr string, silent time.Duration, running, unkilled int) string {
	msg := fmt.Sprintf("executor %s sent no heartbeat for %s: it gets no new work until it does", addr, silent.Round(time.Second))
	if running > 0 {
		msg += fmt.Sprintf("; its %d running attempt(s) stay RUNNING under their tickets, since it may still run them: each is resolved by asking its /status, or, if it does not answer, judged at its deadline", running)
	}
	if unkilled > 0 {
		msg += fmt.Sprintf("; %d kill(s) that did not reach it are sent again when it is heard from", unkilled)
	}
	return msg
}

// refusalLimit returns when an instance that every executor refuses stops
// being offered again and fails like any attempt: the deadline of the
// attempt that was first refused.
func (c *completer) refusalLimit(id int64, a *attempt, why string) time.Time {
	r, ok := c.watch.refused[id]
	if !ok {
		r = refusal{task: a.task.id, since: a.startedFrom()}
	}
	r.last = why
	c.watch.refused[id] = r
	// To the millisecond, as the store keeps the next offer's time: a limit
	// a fraction of a millisecond ahead would be offered again at once,
	// refused again at the same instant, for ever.
	return deadlineAfter(r.since, a.task.def).Truncate(time.Millisecond)
}
