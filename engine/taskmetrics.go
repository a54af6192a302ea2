package engine

import (
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// taskMetrics are the series people graph per pipeline and task: attempt
// durations, how long due instances waited to start, and outcomes. Their
// labels are names from the pipeline files only — never instance ids,
// tickets or run ids — so their number is bounded by the definitions; with
// Config.NoTaskLabels they carry the pipeline alone, for installations
// with very many tasks.
type taskMetrics struct {
	withTask  bool
	duration  *prometheus.HistogramVec
	queueWait *prometheus.HistogramVec
	outcomes  *prometheus.CounterVec
	delay     *prometheus.HistogramVec // fire time → start of what is not a live fire, by kind
}

// durationBuckets span a quick function to a long batch job.
var durationBuckets = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400}

// delayBuckets span a retry's seconds to a backfill's months.
var delayBuckets = []float64{.1, 1, 10, 60, 300, 900, 3600, 4 * 3600, 86400, 7 * 86400, 30 * 86400, 365 * 86400}

func newTaskMetrics(reg prometheus.Registerer, withTask bool) *taskMetrics {
	f := promauto.With(reg)
	labels := []string{"pipeline"}
	if withTask {
		labels = append(labels, "task")
	}
	return &taskMetrics{
		withTask: withTask,
		duration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "ax_task_duration_seconds",
			Help: "Duration of attempts, from start to the result recorded, by pipeline and task.", Buckets: durationBuckets}, labels),
		queueWait: f.NewHistogramVec(prometheus.HistogramOpts{Name: "ax_task_queue_wait_seconds",
			Help:    "Time from an instance's fire time (or retry time) to the start of its attempt, by pipeline and task: the rate limit, pools and the queue.",
			Buckets: latencyBuckets}, labels),
		outcomes: f.NewCounterVec(prometheus.CounterOpts{Name: "ax_task_outcomes_total",
			Help: "Attempt outcomes by pipeline, task and outcome (success, failed, timeout, killed, refused)."}, append(labels, "outcome")),
		delay: f.NewHistogramVec(prometheus.HistogramOpts{Name: "ax_dispatch_delay_seconds",
			Help:    "Time from fire time to start for what is not a live schedule fire, by kind: catchup (a fire missed while no scheduler ran), retry, manual, backfill. Live fires are in ax_dispatch_latency_seconds.",
			Buckets: delayBuckets}, []string{"kind"}),
	}
}

func (m *taskMetrics) labels(t *taskInfo, more ...string) []string {
	l := []string{t.def.Pipeline}
	if m.withTask {
		l = append(l, t.def.Name)
	}
	return append(l, more...)
}

// forget drops the series of a task removed by a reload; without task
// labels, the pipeline's series go when the pipeline went as a whole
// (pipelineGone).
func (m *taskMetrics) forget(pipeline, task string, pipelineGone bool) {
	match := prometheus.Labels{"pipeline": pipeline}
	if m.withTask {
		match["task"] = task
	} else if !pipelineGone {
		return // the pipeline's series still count its other tasks
	}
	m.duration.DeletePartialMatch(match)
	m.queueWait.DeletePartialMatch(match)
	m.outcomes.DeletePartialMatch(match)
}

// taskLabels returns the label values of task t's series, or false when
// its series were forgotten (see forget): an attempt of a removed task that
// was running at the reload, or that a restart found running, must not
// make them again.
func (e *Engine) taskLabels(t *taskInfo, more ...string) ([]string, bool) {
	if e.sched.tasks[t.id] == nil && (e.tm.withTask || e.Graph().Pipeline(t.def.Pipeline) == nil) {
		return nil, false
	}
	return e.tm.labels(t, more...), true
}

// fireKind classifies an attempt's start for the latency metrics: a live
// fire is the first attempt of a schedule run whose fire time came while
// this scheduler ran; anything else has a kind of its own.
func fireKind(a *attempt, termStart time.Time) string {
	switch {
	case a.kind == axtype.RunBackfill:
		return "backfill"
	case a.counted > 1:
		return "retry"
	case a.kind == axtype.RunManual:
		return "manual"
	case a.due.Before(termStart):
		return "catchup"
	}
	return "live"
}

// observeStart records an attempt handed to its executor at now.
func (e *Engine) observeStart(a *attempt, now time.Time) {
	wait := max(now.Sub(a.due).Seconds(), 0)
	if k := fireKind(a, e.leadership.termStart); k == "live" {
		e.m.latency.Observe(wait)
	} else {
		e.tm.delay.WithLabelValues(k).Observe(wait)
	}
	if a.queueWait != nil {
		a.queueWait.Observe(wait)
	}
}

// queueWaitOf returns the series of ax_task_queue_wait_seconds of task t,
// or nil when its series were forgotten. Called on the loop, which creates
// each task's series once a term: created by the attempts' goroutines,
// 10,000 tasks due at once queued behind the vector's lock, each creation
// under it (a fifth of the latency of BenchmarkFireToDispatch).
func (e *Engine) queueWaitOf(t *taskInfo) prometheus.Observer {
	if t.queueWait == nil {
		if l, ok := e.taskLabels(t); ok {
			t.queueWait = e.tm.queueWait.WithLabelValues(l...)
		}
	}
	return t.queueWait
}

// observeEnd records an attempt's outcome (an attempt's status) at now.
func (e *Engine) observeEnd(a *attempt, status string, now time.Time) {
	l, ok := e.taskLabels(a.task)
	if !ok {
		return
	}
	e.tm.outcomes.WithLabelValues(append(l, status)...).Inc()
	if status == "refused" {
		return // it never ran
	}
	started := a.startedFrom()
	e.tm.duration.WithLabelValues(l...).Observe(max(now.Sub(started).Seconds(), 0))
}
