package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics are the engine's Prometheus series, registered on the
// registry of Config.Registerer, never on the default one.
type metrics struct {
	dispatches     prometheus.Counter
	results        *prometheus.CounterVec // by status: success, failed, timeout, killed, refused
	retries        prometheus.Counter
	timeouts       prometheus.Counter
	alerts         *prometheus.CounterVec // by kind
	breakerOpen    *prometheus.GaugeVec   // by task: 1 open, 0 closed
	queueDepth     prometheus.Gauge
	wheelEntries   prometheus.Gauge
	running        prometheus.Gauge
	bufferDepth    prometheus.Gauge
	poolWaiting    prometheus.Gauge     // due instances held back by a concurrency cap
	poolRunning    *prometheus.GaugeVec // running attempts against their caps, by scope
	poolStarting   prometheus.Gauge     // local attempts recorded RUNNING, waiting in the start queue for a slot
	poolMax        *prometheus.GaugeVec // the caps, by scope (none: unlimited)
	bufferWait     prometheus.Histogram // how long instances held back by the token bucket waited
	latency        prometheus.Histogram // fire time → dispatched
	leader         prometheus.GaugeFunc // Engine.Primary, read at each scrape: never stale while the loop is busy
	renewLate      prometheus.Histogram // how late lease renewals ran past their due time
	backfillRuns   *prometheus.GaugeVec // by backfill and state: done, failed, total
	storeErrors    prometheus.Counter
	staleResults   prometheus.Counter
	inboxDepth     prometheus.Gauge // results stored in the inbox and not applied yet (counted up to 500)
	strandReleased prometheus.Counter
}

// latencyBuckets cover a dispatch on the tick (ms) up to one held for minutes.
var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		dispatches: f.NewCounter(prometheus.CounterOpts{Name: "ax_dispatches_total", Help: "Instances handed to an executor."}),
		results: f.NewCounterVec(prometheus.CounterOpts{Name: "ax_results_total",
			Help: "Attempt outcomes recorded, by status (success, failed, timeout, killed, refused)."}, []string{"status"}),
		retries:  f.NewCounter(prometheus.CounterOpts{Name: "ax_retries_total", Help: "Failed attempts sent back through the wheel to retry."}),
		timeouts: f.NewCounter(prometheus.CounterOpts{Name: "ax_timeouts_total", Help: "Attempts failed by the scheduler for lack of a result by their deadline."}),
		alerts:   f.NewCounterVec(prometheus.CounterOpts{Name: "ax_alerts_total", Help: "Alerts raised, by kind."}, []string{"kind"}),
		breakerOpen: f.NewGaugeVec(prometheus.GaugeOpts{Name: "ax_breaker_open",
			Help: "1 while the task's circuit breaker is open (its dispatch rate cut), 0 once it closed."}, []string{"task"}),
		queueDepth:   f.NewGauge(prometheus.GaugeOpts{Name: "ax_queue_depth", Help: "Due instances in the priority queue."}),
		wheelEntries: f.NewGauge(prometheus.GaugeOpts{Name: "ax_wheel_entries", Help: "Instances waiting in the time wheel."}),
		running:      f.NewGauge(prometheus.GaugeOpts{Name: "ax_running", Help: "Attempts dispatched and awaiting their result."}),
		bufferDepth:  f.NewGauge(prometheus.GaugeOpts{Name: "ax_buffer_depth", Help: "Due instances held back by the token bucket at the last dispatch."}),
		poolWaiting:  f.NewGauge(prometheus.GaugeOpts{Name: "ax_pool_waiting", Help: "Due instances held back by a concurrency cap (max_running) at the last dispatch."}),
		poolStarting: f.NewGauge(prometheus.GaugeOpts{Name: "ax_pool_starting", Help: "Local attempts recorded RUNNING and waiting in the start queue for a slot under --max-running."}),
		poolRunning: f.NewGaugeVec(prometheus.GaugeOpts{Name: "ax_pool_running",
			Help: "Attempts running now, against the concurrency caps: scope local (functions and commands, --max-running) or group:NAME."}, []string{"scope"}),
		poolMax: f.NewGaugeVec(prometheus.GaugeOpts{Name: "ax_pool_max_running",
			Help: "The concurrency cap of each scope of ax_pool_running (no series: unlimited); occupancy is ax_pool_running / ax_pool_max_running."}, []string{"scope"}),
		bufferWait: f.NewHistogram(prometheus.HistogramOpts{Name: "ax_buffer_wait_seconds",
			Help: "Time an instance held back by the token bucket waited past its fire time before dispatch.", Buckets: latencyBuckets}),
		latency: f.NewHistogram(prometheus.HistogramOpts{Name: "ax_dispatch_latency_seconds",
			Help: "Time from an instance's fire time to its dispatch.", Buckets: latencyBuckets}),
		renewLate: f.NewHistogram(prometheus.HistogramOpts{Name: "ax_lease_renew_late_seconds",
			Help: "How late each lease renewal started past its due time (it runs on its own timer; late means a starved process).", Buckets: latencyBuckets}),
		backfillRuns: f.NewGaugeVec(prometheus.GaugeOpts{Name: "ax_backfill_runs",
			Help: "Runs of each active backfill, by state (done, failed, total)."}, []string{"backfill", "state"}),
		storeErrors:    f.NewCounter(prometheus.CounterOpts{Name: "ax_store_errors_total", Help: "Loop turns that failed on a store error (retried with backoff)."}),
		inboxDepth:     f.NewGauge(prometheus.GaugeOpts{Name: "ax_inbox_depth", Help: "Results stored in the inbox by any server and not applied yet, as the primary last read it (counted up to 500)."}),
		staleResults:   f.NewCounter(prometheus.CounterOpts{Name: "ax_stale_results_total", Help: "Results for a ticket that was not the instance's current one: recorded and ignored."}),
		strandReleased: f.NewCounter(prometheus.CounterOpts{Name: "ax_stranded_released_total", Help: "Waiting instances found with their upstreams succeeded and released late (after a crash or store error)."}),
	}
}
