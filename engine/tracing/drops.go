package tracing

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
)

// logEvery is how often at most a tracer logs the events it dropped, and
// the OpenTelemetry SDK's errors.
const logEvery = 10 * time.Second

// limited lets a line through at most once per logEvery and counts
// what it held back in between.
type limited struct {
	mu   sync.Mutex
	last time.Time
	held int
}

// add counts n more; when a line may go now, it returns the count since
// the last line (and resets it), else 0.
func (l *limited) add(n int, now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held += n
	if !l.last.IsZero() && now.Sub(l.last) < logEvery {
		return 0
	}
	out := l.held
	l.last, l.held = now, 0
	return out
}

// rest returns the count held back, and resets it.
func (l *limited) rest() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.held
	l.held = 0
	return out
}

// WithRegisterer counts the events the tracer drops in
// ax_trace_events_dropped_total, registered with reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(t *Tracer) {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "ax_trace_events_dropped_total",
			Help: "Events of runs whose spans were not sent: the tracer's queue was full (the collector slow or down)."})
		if err := reg.Register(c); err != nil {
			are := prometheus.AlreadyRegisteredError{}
			if errors.As(err, &are) {
				c = are.ExistingCollector.(prometheus.Counter)
			}
		}
		t.droppedTotal = c
	}
}

// dropped counts an event whose spans are lost, in the metric and in a
// trace_spans_dropped line at most every logEvery.
func (t *Tracer) dropped() {
	if t.droppedTotal != nil {
		t.droppedTotal.Inc()
	}
	if n := t.drops.add(1, time.Now()); n > 0 {
		t.log.Warn("trace_spans_dropped", "events", n, "why", "the tracer's queue is full: the collector is slow or down")
	}
}

// routeSDKLogs sends what the OpenTelemetry SDK reports (export failures,
// its own errors) to log, as otel_error lines at most every logEvery (with
// the count of those held back).
func routeSDKLogs(log *slog.Logger) {
	var l limited
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		if n := l.add(1, time.Now()); n > 0 {
			log.Warn("otel_error", "err", err.Error(), "errors", n)
		}
	}))
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
}
