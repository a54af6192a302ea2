package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// Deliverer is implemented by executors whose attempts wait for their result
// by callback (runner.Routed): a result read from the inbox is handed to the
// attempt waiting for it in this process.
type Deliverer interface {
	Deliver(rep runner.Report) bool
}

// inboxPoll is how often the primary reads the results inbox: results
// that reached a standby, or this server while nothing here waited for them
// (tickets inherited from a previous primary).
const inboxPoll = 200 * time.Millisecond

// pollInbox reads the results stored by any server and not applied yet. A
// result for an attempt running in this process goes to the goroutine
// waiting for it (which may have it already); any other one is applied by
// ticket: once when the ticket is current (an inherited attempt), recorded
// as stale otherwise. Entries are closed after their result is recorded.
func (c *completer) pollInbox(ctx context.Context, now time.Time) error {
	if now.Sub(c.inboxPolled) < inboxPoll {
		return nil
	}
	c.inboxPolled = now
	if !c.readsInbox() {
		return nil
	}
	entries, err := c.st.PendingResults(ctx, 500)
	if err != nil {
		return fmt.Errorf("engine: read the results inbox: %w", err)
	}
	c.inboxRead = now
	c.m.inboxDepth.Set(float64(len(entries)))
	var byTicket map[string]int64
	for _, en := range entries {
		if c.inboxSeen[en.Ticket] {
			continue // handed over already: closed once its result is recorded
		}
		c.inboxSeen[en.Ticket] = true
		rep, logs, err := parseInboxReport(en.Report)
		if err != nil { // checked when received: only a damaged row gets here
			c.log.Error("inbox_entry_unreadable", "ticket", en.Ticket, "err", err)
			rep = runner.Report{Ticket: en.Ticket, Status: runner.StatusFailed, Error: "result unreadable in the inbox: " + err.Error()}
		}
		if byTicket == nil {
			byTicket = make(map[string]int64, c.disp.running.len())
			for id, a := range c.disp.running.all() {
				byTicket[a.ticket] = id
			}
		}
		id := byTicket[en.Ticket]
		if a := c.disp.running.get(id); a != nil && !a.orphan {
			// Its goroutine waits for the result by callback here; when the
			// result reached this server it has it already.
			if d, ok := c.disp.execs[a.task.def.Executor.Kind].(Deliverer); ok {
				d.Deliver(rep)
			}
			continue
		}
		c.gather(outcome{instance: id, res: reportResult(rep), logs: logs})
	}
	return nil
}

// leftReport is what a scheduler leaves in the inbox for the next primary
// (leaveResults): the attempt's report, and its last output and record,
// which the next primary writes with the result. Only a scheduler writes
// one: an executor's report is parsed strictly when received
// (runner.ParseReport), so one carrying Left never gets in.
type leftReport struct {
	runner.Report
	Left *store.LogWrite `json:"left_by_scheduler,omitempty"`
}

// maxLeft bounds the output a left report carries, in bytes of chunks:
// beyond it the oldest chunks are dropped, and counted as such.
const maxLeft = 4 << 20

// parseInboxReport reads an inbox entry: a scheduler's left report (with
// the attempt's output and record), or an executor's report.
func parseInboxReport(text string) (runner.Report, *store.LogWrite, error) {
	if strings.Contains(text, `"left_by_scheduler"`) {
		var lr leftReport
		if err := json.Unmarshal([]byte(text), &lr); err == nil && lr.Left != nil && lr.Ticket != "" {
			return lr.Report, lr.Left, nil
		}
	}
	rep, err := runner.ParseReport([]byte(text))
	return rep, nil, err
}

// leftLogs is the output and record of o to leave with its result: at most
// maxLeft bytes of chunks, the newest, those dropped counted in the record.
func leftLogs(o outcome) *store.LogWrite {
	if o.logs == nil {
		return nil
	}
	w := *o.logs
	size := 0
	for _, c := range w.Chunks {
		size += len(c.Data)
	}
	var dropped int64
	for size > maxLeft && len(w.Chunks) > 0 {
		size -= len(w.Chunks[0].Data)
		dropped += w.Chunks[0].Text
		w.Chunks = w.Chunks[1:]
	}
	if dropped > 0 {
		w.Attempts = slices.Clone(w.Attempts)
		for i := range w.Attempts {
			w.Attempts[i].LogDropped += dropped
			w.Attempts[i].LogBytes -= dropped
		}
	}
	return &w
}

// readsInbox reports whether results may come through the inbox: those of
// HTTP tasks, and those of attempts a previous primary left running here,
// which it leaves in the inbox when its lease went (leaveResults).
func (c *completer) readsInbox() bool {
	if c.hasHTTP {
		return true
	}
	for _, a := range c.disp.running.all() {
		if a.orphan {
			return true
		}
	}
	return false
}

// leaveResults stores in the inbox the results this process can no longer
// record because its lease went to another process (it stopped and a
// standby took over during the grace period, or it stalled past its TTL),
// as an executor's result sent to a standby is stored: the primary applies
// each once by ticket, instead of letting a finished attempt time out as an
// unknown outcome and run again. Each carries the attempt's output
// not stored yet and its record (exit status, times, executor), which the
// primary writes with the result (leftReport). Only results of attempts that ended
// on their own are left; a timeout, a kill, an interruption or a refusal is
// for the primary to judge, and a give-back never started.
func (c *completer) leaveResults(ctx context.Context, now time.Time) {
	for _, o := range c.unapplied {
		a := c.disp.running.get(o.instance)
		if a == nil || a.givenBack(o) || o.resolve != "" || o.notStarted != "" || o.res.Refused || o.res.Ticket != a.ticket ||
			(o.res.Status != runner.StatusSuccess && o.res.Status != runner.StatusFailed) {
			continue
		}
		rep := leftReport{Report: runner.Report{Ticket: o.res.Ticket, Status: o.res.Status, DurationMS: o.res.Duration.Milliseconds(),
			Error: o.res.Error, Permanent: o.res.Permanent, InstanceID: o.instance}, Left: leftLogs(o)}
		data, err := json.Marshal(rep)
		if err == nil {
			_, err = c.st.ReceiveResult(ctx, store.InboxEntry{Ticket: rep.Ticket, InstanceID: o.instance, Report: string(data), ReceivedBy: c.cfg.Holder, ReceivedAt: now})
		}
		if err != nil {
			c.log.Error("result_lost", "instance", o.instance, "ticket", rep.Ticket, "status", rep.Status, "err", err)
			continue
		}
		c.log.Warn("result_left_in_inbox", "instance", o.instance, "ticket", rep.Ticket, "status", rep.Status)
	}
	c.unapplied = nil
}

// reportResult converts an executor's report into a result.
func reportResult(rep runner.Report) runner.Result { return safeResult(rep.Result()) }

// safeResult makes the error text of a result that an executor ran (an
// excerpt of the task's output, an executor's message) safe to show: control
// characters and bytes that are not UTF-8 are escaped (\xNN) before it is
// stored in the instance, its history, the attempt record and the alerts, so
// a task printing terminal escapes cannot drive the terminal of whoever runs
// ax history, status or explain. Every result enters the loop through here.
func safeResult(r runner.Result) runner.Result {
	r.Error = runner.SafeError(r.Error)
	return r
}

// closeInbox closes the inbox entries of recorded results: outcomes by
// ticket ("applied", "stale"). A failure leaves them open: the next read
// finds their tickets no longer current and records them as stale.
func (c *completer) closeInbox(ctx context.Context, outcomes map[string]string, now time.Time) {
	if len(outcomes) == 0 {
		return
	}
	if err := c.host.w().MarkResultsApplied(ctx, outcomes, now); err != nil {
		c.log.Warn("inbox_not_closed", "results", len(outcomes), "err", err)
	}
	for t := range outcomes {
		delete(c.inboxSeen, t)
	}
}

// hasHTTPTasks reports whether any task runs on HTTP executors: only their
// results come through the inbox.
func hasHTTPTasks(ts map[string]*taskInfo) bool {
	for _, t := range ts {
		if t.def.Executor.Kind == defs.ExecHTTP {
			return true
		}
	}
	return false
}
