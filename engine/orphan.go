package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// StatusAsker is implemented by executors that can ask a registered
// executor what it knows of tickets (runner.Routed): a primary that took
// over resolves the HTTP attempts it inherited in RUNNING by asking, not by
// their timeout.
type StatusAsker interface {
	Status(ctx context.Context, address string, tickets []string) (runner.StatusAnswer, error)
}

// Resolutions of an inherited ticket, carried to the loop as outcomes.
const (
	resolveRunning    = "running"    // an executor runs it: wait for its result
	resolveUnknown    = "unknown"    // every executor of its task answered and none knows it: it never started
	resolveUnanswered = "unanswered" // some executor of its task did not answer: ask again at the next sweep
)

// Resolutions of a ticket running on a silent executor (askSilent).
const (
	resolveSilentRunning    = "silent-running"    // the executor answered that it runs it: wait for its result
	resolveSilentUnknown    = "silent-unknown"    // the executor answered that it does not know it: judged at its deadline
	resolveSilentUnanswered = "silent-unanswered" // no answer: ask again at the next sweep, judged at its deadline
)

// statusTimeout bounds one status query.
const statusTimeout = 5 * time.Second

// resolveOrphans asks the registered executors of each HTTP task about the
// tickets this process inherited in RUNNING (left by a previous primary),
// off the loop. Done → the result is applied; running → it waits (and is
// asked again at the next sweep, in case its result cannot reach a
// scheduler); unknown to every executor of the task → it never started
// anywhere and is dispatched again with the same ticket, which the SDK's
// de-duplication makes safe, as the same attempt (nextAttempt: nothing of
// it reached an executor or the store's output). An executor that does not answer leaves the
// ticket to the next sweep, and in the end to the unknown-outcome rule: it
// fails at its deadline and is retried per its policy, never re-dispatched
// blindly.
func (c *completer) resolveOrphans(exs []store.Executor) {
	asker, ok := c.disp.execs[defs.ExecHTTP].(StatusAsker)
	if !ok {
		return
	}
	serving := map[string][]string{} // task → executor addresses
	for _, x := range exs {
		for _, t := range x.Tasks {
			serving[t] = append(serving[t], x.Address)
		}
	}
	type ask struct {
		id     int64
		ticket string
		execs  []string
	}
	var asks []ask
	perExec := map[string][]string{} // address → tickets
	for _, id := range c.disp.running.ids() {
		a := c.disp.running.get(id)
		if !a.orphan || a.task.def.Executor.Kind != defs.ExecHTTP || c.watch.asking[id] || len(serving[a.task.id]) == 0 {
			continue
		}
		c.watch.asking[id] = true
		asks = append(asks, ask{id: id, ticket: a.ticket, execs: serving[a.task.id]})
		for _, addr := range serving[a.task.id] {
			perExec[addr] = append(perExec[addr], a.ticket)
		}
	}
	if len(asks) == 0 {
		return
	}
	ctx, results := c.disp.execCtx, c.results
	c.disp.execWG.Add(1)
	go func() {
		defer c.disp.execWG.Done()
		answers := c.askStatuses(ctx, asker, perExec)
		for _, q := range asks {
			o := outcome{instance: q.id, res: runner.Result{Ticket: q.ticket}, resolve: resolveUnknown}
			for _, addr := range q.execs {
				st, answered := answers[addr][q.ticket]
				switch {
				case !answered:
					if o.resolve == resolveUnknown {
						o.resolve = resolveUnanswered
					}
				case st.State == runner.TicketDone:
					o = outcome{instance: q.id, res: reportResult(*st.Result)}
				case st.State == runner.TicketRunning && o.resolve != "":
					o.resolve, o.res.Error = resolveRunning, addr
				}
				if o.resolve == "" {
					break // done: its result
				}
			}
			select {
			case results <- o:
			case <-ctx.Done():
				return
			}
		}
	}()
}

// askSilent asks each executor in ask (lost: silent past runner.Silence)
// about the tickets this process dispatched to it, off the loop: a ticket
// done there is resolved by its result, under the same ticket; one it runs,
// or does not know, or that it does not answer for, stays RUNNING and is
// asked about again at the next sweep, and judged at its deadline
// (checkTimeouts) if nothing comes. It never retries one under a new
// ticket while the executor may still run it. It also sends again the kills
// that did not reach the executors in kills, heard from again.
func (c *completer) askSilent(ask map[string][]string, kills []string) {
	asker, ok := c.disp.execs[defs.ExecHTTP].(StatusAsker)
	sw, _ := c.disp.execs[defs.ExecHTTP].(silenceWatcher)
	if !ok || sw == nil {
		return
	}
	ids := map[string]int64{} // ticket → instance
	perExec := map[string][]string{}
	for _, addr := range slices.Sorted(mapKeys(ask)) {
		for _, t := range ask[addr] {
			id, ok := c.disp.running.byTicket(t)
			if !ok || c.watch.asking[id] {
				continue
			}
			c.watch.asking[id] = true
			ids[t] = id
			perExec[addr] = append(perExec[addr], t)
		}
	}
	if len(perExec) == 0 && len(kills) == 0 {
		return
	}
	ctx, results := c.disp.execCtx, c.results
	c.disp.execWG.Add(1)
	go func() {
		defer c.disp.execWG.Done()
		for _, addr := range kills {
			if sent := sw.RetryKills(addr); len(sent) > 0 {
				c.log.Warn("kill_delivered", "executor", addr, "tickets", sent, "why", "its kill did not reach it while it was silent")
			}
		}
		answers := c.askStatuses(ctx, asker, perExec)
		for _, addr := range slices.Sorted(mapKeys(perExec)) {
			ans, answered := answers[addr]
			for _, t := range perExec[addr] {
				o := silentOutcome(ids[t], t, addr, ans[t], answered)
				select {
				case results <- o:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
}

// askStatuses asks each executor of perExec (address → tickets), in address
// order, for the status of its tickets, off the loop; one that does not
// answer within statusTimeout is logged and left out of the answers
// (address → ticket → status).
func (c *completer) askStatuses(ctx context.Context, asker StatusAsker, perExec map[string][]string) map[string]map[string]runner.TicketStatus {
	answers := map[string]map[string]runner.TicketStatus{}
	for _, addr := range slices.Sorted(mapKeys(perExec)) {
		qctx, cancel := context.WithTimeout(ctx, statusTimeout)
		ans, err := asker.Status(qctx, addr, perExec[addr])
		cancel()
		if err != nil {
			c.log.Warn("status_query_failed", "executor", addr, "tickets", len(perExec[addr]), "err", err)
			continue
		}
		answers[addr] = ans.Tickets
	}
	return answers
}

// silentOutcome is what a silent executor's answer about ticket (st, when
// answered) makes of it: its result when done there, else a resolution.
func silentOutcome(id int64, ticket, addr string, st runner.TicketStatus, answered bool) outcome {
	o := outcome{instance: id, res: runner.Result{Ticket: ticket, Executor: addr}, resolve: resolveSilentUnanswered}
	switch {
	case !answered:
	case st.State == runner.TicketDone:
		o = outcome{instance: id, res: reportResult(*st.Result), silentDone: addr}
		o.res.Executor = addr
	case st.State == runner.TicketRunning:
		o.resolve = resolveSilentRunning
	default:
		o.resolve = resolveSilentUnknown
	}
	return o
}

// resolved takes the loop's side of a resolution: o.resolve says what the
// executors answered about an inherited ticket that has no result yet.
func (c *completer) resolved(ctx context.Context, o outcome, now time.Time) error {
	delete(c.watch.asking, o.instance)
	a := c.disp.running.get(o.instance)
	if strings.HasPrefix(o.resolve, "silent-") {
		// A ticket on a silent executor: it stays RUNNING (askSilent).
		if a == nil || a.ticket != o.res.Ticket {
			return nil
		}
		c.log.Info("silent_executor_ticket", "task", a.task.id, "run", a.runID, "ticket", a.ticket, "executor", o.res.Executor,
			"answer", o.resolve, "deadline", a.deadline.Format(time.RFC3339))
		return nil
	}
	if a == nil || a.ticket != o.res.Ticket || !a.orphan {
		return nil // its result came meanwhile
	}
	switch o.resolve {
	case resolveRunning:
		c.log.Info("inherited_ticket_running", "task", a.task.id, "run", a.runID, "ticket", a.ticket, "executor", o.res.Error)
	case resolveUnanswered:
		c.log.Info("inherited_ticket_unresolved", "task", a.task.id, "run", a.runID, "ticket", a.ticket)
	case resolveUnknown:
		if c.resultQueued(o.instance, a.ticket) {
			// Its timeout (the unknown-outcome rule) is queued already: it is
			// retried under a new ticket, and dispatching this one again would
			// run it beside that retry (seed 132 of the simulator).
			return nil
		}
		why := "inherited in RUNNING and unknown to every executor of the task: it never started; dispatched again with the same ticket"
		if err := c.host.w().AppendAction(ctx, store.Action{At: now, Actor: Actor, Action: "redispatch", Pipeline: a.task.def.Pipeline,
			TaskID: a.task.id, InstanceID: o.instance, Ticket: a.ticket, Reason: why}); err != nil {
			return err
		}
		c.log.Warn("inherited_ticket_redispatched", "task", a.task.id, "run", a.runID, "ticket", a.ticket)
		a.orphan = false
		a.deadline = deadlineAfter(now, a.task.def)
		c.disp.execute(o.instance, a, nil)
	}
	return nil
}

// resultQueued reports whether a result for instance's ticket waits to be
// recorded.
func (c *completer) resultQueued(instance int64, ticket string) bool {
	for _, o := range c.unapplied {
		if o.instance == instance && o.res.Ticket == ticket && o.resolve == "" {
			return true
		}
	}
	return false
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// groupCheckEvery is how often the primary checks the process groups of
// the command attempts it inherited: a group that ends is noticed within
// it, not at the attempt's timeout.
const groupCheckEvery = time.Second

// inheritProcs takes where the inherited local attempts run, as recorded
// by the process that handed them out (procs, by ticket), and checks them
// at once: a command's process group (written with its output, see
// liveLog.setProc), or, for a function or a command whose group was not
// recorded yet, the scheduler process that handed it out (written before
// it started, see claimRecords). An attempt with no record (a store
// written before version 11, or one on another host) keeps the
// unknown-outcome rule: it fails at its timeout.
func (c *completer) inheritProcs(procs map[string]store.ProcRecord, now time.Time) {
	for id, a := range c.disp.running.all() {
		r, ok := procs[a.ticket]
		if !ok || !a.orphan || !isLocal(a.task.def) {
			continue
		}
		if r.Kind == store.ProcGroup && a.task.def.Executor.Kind != defs.ExecCommand {
			continue
		}
		// A held row of an orphan was handed out (neverStarted): by the
		// scheduler process that claimed it, which it names.
		a.proc = &runner.Process{Host: r.Host, Boot: r.Boot, PidNS: r.PidNS, Pgid: r.Pgid, Start: r.Start, Server: r.Kind != store.ProcGroup}
		if a.proc.Local() {
			c.watch.groups[id] = a
		}
	}
	c.watch.groupsAt = time.Time{}
	c.checkGroups(now)
}

// checkGroups fails each inherited command attempt whose process group is
// gone, and each inherited function attempt (or command whose group was
// not recorded yet) whose scheduler process is gone, as an unknown
// outcome once the results inbox has had its chance to deliver the
// previous primary's result (goneJudged): its processes died with the
// previous primary (Pdeathsig kills the command), or it ended while that
// primary, fenced, was leaving its result in the inbox. A result that
// comes meanwhile is its outcome. The attempt counts, and runs again only
// if its retry policy allows.
// A group (or scheduler process) still alive
// keeps the attempt to its timeout (checkTimeouts), which kills the group;
// one recorded on another host, boot or PID namespace cannot be judged from
// here and times out as before.
func (c *completer) checkGroups(now time.Time) {
	if now.Sub(c.watch.groupsAt) < groupCheckEvery {
		return
	}
	c.watch.groupsAt = now
	var (
		ids   []int64
		procs []runner.Process
	)
	for _, id := range sortedIDs(c.watch.groups) {
		if a := c.disp.running.get(id); a == nil || a != c.watch.groups[id] || a.proc == nil {
			delete(c.watch.groups, id) // ended, or timed out
			delete(c.watch.goneAt, id)
			continue
		}
		ids, procs = append(ids, id), append(procs, *c.watch.groups[id].proc)
	}
	if len(ids) == 0 {
		return
	}
	for i, st := range runner.CheckGroups(procs) {
		if st != runner.GroupGone {
			continue
		}
		a := c.disp.running.get(ids[i])
		if _, seen := c.watch.goneAt[ids[i]]; !seen {
			c.watch.goneAt[ids[i]] = now
		}
		if c.resultQueued(ids[i], a.ticket) || !goneJudged(c.watch.goneAt[ids[i]], c.inboxRead, now) {
			continue // its result is in, or the inbox may still deliver it
		}
		msg := fmt.Sprintf("unknown outcome: its process group %d is gone (the primary that ran it died)", a.proc.Pgid)
		if a.proc.Server {
			msg = fmt.Sprintf("unknown outcome: the scheduler process that ran it (%s) is gone", a.proc)
		}
		c.log.Warn("orphan_group_gone", "task", a.task.id, "run", a.runID, "ticket", a.ticket, "pgid", a.proc.Pgid, "process", a.proc.String())
		c.gather(outcome{instance: ids[i], res: runner.Result{Ticket: a.ticket, Status: runner.StatusFailed, Error: msg}})
		a.proc, a.deadline = nil, now.Add(time.Hour) // not queued twice while the result waits to be recorded
		delete(c.watch.groups, ids[i])
		delete(c.watch.goneAt, ids[i])
	}
}
