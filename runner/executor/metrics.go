package executor

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/ax-sched/ax/runner"
)

// Reasons a dispatch is refused, as /metrics counts them.
const (
	refusedFull     = "pool_full"     // the queue is full (503)
	refusedRunning  = "task_running"  // the task is queued or running here already (409)
	refusedStopping = "shutting_down" // the executor is stopping (503)
)

// Pool returns the worker pool's figures now, as the heartbeat sends them.
func (x *Executor) Pool() runner.PoolStats {
	x.mu.Lock()
	defer x.mu.Unlock()
	var refused int64
	for _, n := range x.refused {
		refused += n
	}
	return runner.PoolStats{Workers: x.workers, Active: x.active, Max: x.cfg.Max, Queued: len(x.queue), Queue: cap(x.queue), Refused: refused}
}

// serveMetrics answers GET /metrics in the Prometheus text format: the
// pool's workers, the queue's depth and the refusals by reason. The Python
// SDK serves the same names.
func (x *Executor) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	p := x.Pool()
	x.mu.Lock()
	refused := map[string]int64{refusedFull: 0, refusedRunning: 0, refusedStopping: 0}
	for r, n := range x.refused {
		refused[r] = n
	}
	x.mu.Unlock()
	var b strings.Builder
	gauge := func(name, help string, v int) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", name, help, name, name, v)
	}
	gauge("ax_executor_workers", "Worker threads of the pool (core are always there, up to max).", p.Workers)
	gauge("ax_executor_workers_active", "Workers running a task now.", p.Active)
	gauge("ax_executor_workers_max", "The most workers the pool starts.", p.Max)
	gauge("ax_executor_queue_depth", "Dispatches waiting for a worker.", p.Queued)
	gauge("ax_executor_queue_capacity", "Dispatches the queue holds; past it dispatches are refused.", p.Queue)
	b.WriteString("# HELP ax_executor_refused_total Dispatches refused, by reason.\n# TYPE ax_executor_refused_total counter\n")
	for _, r := range slices.Sorted(maps.Keys(refused)) {
		fmt.Fprintf(&b, "ax_executor_refused_total{reason=%q} %d\n", r, refused[r])
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}
