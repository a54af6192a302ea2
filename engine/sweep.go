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
// own clock (R21, R43): not as a side effect of the next dispatch, so that a
// lost executor is noticed while nothing is due.
const sweepEvery = 5 * time.Second

// Failoverer is implemented by executors that run attempts on registered
// executors (runner.Routed): the attempts running on a lost or restarted
// executor fail at once, with reason, to be retried per their policy.
type Failoverer interface {
	Failover(address, boot, reason string) int
}

// hearer is implemented by executors that hear from registered executors
// other than by heartbeat (runner.Routed: a dispatch accepted).
type hearer interface {
	LastHeard(address string, hb time.Time) time.Time
}

// lastHeard returns when the registered executor x was last heard from:
// its last heartbeat, or a later dispatch it accepted. The sweep, the
// explanation and routing (runner.Routed.Live) judge liveness by it.
func (c *completer) lastHeard(x store.Executor) time.Time {
	if h, ok := c.disp.execs[defs.ExecHTTP].(hearer); ok {
		return h.LastHeard(x.Address, x.LastHeartbeat)
	}
	return x.LastHeartbeat
}

// watch is what the sweep remembers between passes (and terms): alerts
// raised, so that each is raised once, and refusals.
type watch struct {
	at      time.Time
	lost    map[string]bool   // executors alerted as lost, until they heartbeat again
	noExec  map[string]bool   // tasks alerted for no live executor, until one is live
	refused map[int64]refusal // instances every executor refused, since when
	asking  map[int64]bool    // inherited instances whose executors are being asked about their ticket
	// groupsAt is when the process groups of inherited command attempts
	// were last checked (see checkGroups).
	groupsAt time.Time
	groups   map[int64]*attempt // inherited command attempts whose groups run on this host, by instance
}

// refusal is an instance that no executor took: its attempt's deadline,
// counted from the first refusal, bounds the refusal back-off.
type refusal struct {
	task  string
	since time.Time
	last  string // the last refusal, for alerts and errors
}

func newWatch() *watch {
	return &watch{lost: map[string]bool{}, noExec: map[string]bool{}, refused: map[int64]refusal{}, asking: map[int64]bool{}, groups: map[int64]*attempt{}}
}

// sweep excludes executors silent for longer than runner.Silence: it alerts
// executor_lost once per executor and fails over the attempts running on
// it; it fails over the attempts accepted by an earlier process of an
// executor that registered again with a new boot id (restarted: that work
// is gone); and it alerts no_executor once per task with due work that no
// live executor takes.
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
	fo, _ := c.disp.execs[defs.ExecHTTP].(Failoverer)
	live, registered := map[string]int{}, map[string]int{}
	for _, x := range exs {
		heard := c.lastHeard(x)
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
			delete(w.lost, x.Address)
			continue
		}
		if w.lost[x.Address] {
			continue
		}
		w.lost[x.Address] = true
		silent := now.Sub(heard).Round(time.Second)
		n := 0
		if fo != nil {
			n = fo.Failover(x.Address, "", fmt.Sprintf("executor %s lost: no heartbeat for %s", x.Address, silent))
		}
		c.host.Alert(ctx, Alert{Kind: AlertExecutorLost, At: now,
			Message: fmt.Sprintf("executor %s sent no heartbeat for %s: it gets no new work until it does (%d running attempt(s) failed over)", x.Address, silent, n)})
	}

	c.resolveOrphans(exs)

	due := map[string]string{} // task → why it has no executor
	for _, r := range w.refused {
		due[r.task] = "every executor refused or was unreachable: " + r.last
	}
	for _, p := range c.disp.planned.pending {
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
		ti := c.tasks[task]
		c.host.Alert(ctx, Alert{Kind: AlertNoExecutor, At: now, Pipeline: ti.def.Pipeline, Task: task,
			Message: fmt.Sprintf("task %s has due work and no live executor: %s", task, due[task])})
	}
	return nil
}

// refusalLimit returns when an instance that every executor refuses stops
// being offered again and fails like any attempt: the deadline of the
// attempt that was first refused.
func (c *completer) refusalLimit(id int64, a *attempt, why string) time.Time {
	r, ok := c.watch.refused[id]
	if !ok {
		r = refusal{task: a.task.id, since: a.deadline.Add(-a.task.def.Timeout)}
	}
	r.last = why
	c.watch.refused[id] = r
	return r.since.Add(a.task.def.Timeout)
}
