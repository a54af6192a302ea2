package engine

import (
	"context"
	"time"

	"github.com/ax-sched/ax/store"
)

// Alert kinds: what an operator must hear about.
const (
	AlertBreakerOpen   = "breaker_open"   // a task failed more than the threshold: its rate is cut
	AlertBreakerClosed = "breaker_closed" // it recovered
	AlertExecutorLost  = "executor_lost"  // an executor stopped sending heartbeats
	AlertTaskFailed    = "task_failed"    // retries exhausted (or a permanent error)
	AlertMisfire       = "misfire_skipped"
	AlertLeaderChange  = "leader_change"
	AlertStoreGone     = "store_gone" // the SQLite file was deleted or replaced under the server
)

// AlertKinds lists every kind of alert, for routes and docs.
func AlertKinds() []string {
	return []string{AlertBreakerOpen, AlertBreakerClosed, AlertExecutorLost, AlertNoExecutor, AlertTaskFailed, AlertMisfire,
		AlertLeaderChange, AlertSLAMissed, AlertStoreGone}
}

// Alert is one alert, as recorded in the action log and sent to sinks
// (Config.OnAlert: a webhook, say).
type Alert struct {
	Kind      string    `json:"kind"`
	At        time.Time `json:"at"`
	Pipeline  string    `json:"pipeline,omitempty"`
	Task      string    `json:"task,omitempty"`  // pipeline.task
	Group     string    `json:"group,omitempty"` // the task's group, for routing
	Run       int64     `json:"run_id,omitempty"`
	Logical   time.Time `json:"logical_time,omitzero"` // of its run, when it is of one
	Instance  int64     `json:"instance_id,omitempty"`
	Ticket    string    `json:"ticket,omitempty"`
	Message   string    `json:"message"`
	Scheduler string    `json:"scheduler"` // the holder name of the process that raised it
}

// Alert records a in the action log, logs it, counts it and hands it to
// Config.OnAlert. It is safe for concurrent use, so executors' callbacks
// (an executor gone silent) raise alerts through it too.
func (e *Engine) Alert(ctx context.Context, a Alert) {
	if a.At.IsZero() {
		a.At = e.cfg.Now()
	}
	reason := "alert"
	if a.Kind == AlertBreakerClosed {
		reason = "recovered"
	}
	if err := e.w().AppendAction(ctx, store.Action{At: a.At, Actor: Actor, Action: a.Kind, Pipeline: a.Pipeline, TaskID: a.Task,
		InstanceID: a.Instance, Ticket: a.Ticket, Reason: reason, Detail: a.Message}); err != nil {
		e.log.Error("action_not_recorded", "action", a.Kind, "task", a.Task, "err", err)
	}
	e.notify(a)
}

// notify is Alert for an alert already in the action log (written in the
// transaction of the transition that caused it).
func (e *Engine) notify(a Alert) {
	if a.At.IsZero() {
		a.At = e.cfg.Now()
	}
	a.Scheduler = e.cfg.Holder
	if a.Group == "" && a.Task != "" {
		if t := e.Graph().Task(a.Task); t != nil { // the graph in force: safe from any goroutine
			a.Group = t.Group
		}
	}
	e.m.alerts.WithLabelValues(a.Kind).Inc()
	e.log.Warn("alert", "kind", a.Kind, "task", a.Task, "run", a.Run, "instance", a.Instance, "ticket", a.Ticket, "message", a.Message)
	if e.cfg.OnAlert != nil {
		e.cfg.OnAlert(a)
	}
}
