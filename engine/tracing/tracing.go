// Package tracing sends the engine's runs as OpenTelemetry traces over
// OTLP/HTTP: a trace per run, a span per instance and per attempt (with
// its queue wait, execution and result), links from an instance to the
// runs of other pipelines it waited for, and the W3C traceparent handed to
// each attempt. It is off unless an OTLP endpoint is configured by the
// standard OTEL_* variables.
//
// Every id is derived from the run's identity (pipeline, run id, logical
// time) and the store's installation id: a new primary continues the
// traces of the runs it inherits, the span of an attempt started by one
// process is ended by another under the same id, and two stores never
// share a trace.
package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/engine"
)

// Enabled reports whether the environment (getenv: os.Getenv) asks for
// traces: an OTLP endpoint is set, the SDK is not disabled and the traces
// exporter is not "none".
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e != "" && e != "otlp" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Upstreams returns the runs of other pipelines the instance of task in a
// run at logical matched (engine.Engine.UpstreamRuns).
type Upstreams func(ctx context.Context, task string, logical time.Time) ([]engine.RunRef, error)

// maxFirstDue bounds the instances whose first start a tracer remembers.
const maxFirstDue = 100_000

// Tracer turns engine events into spans. It is an engine.Observer.
type Tracer struct {
	tp        *sdktrace.TracerProvider
	tr        trace.Tracer
	log       *slog.Logger
	upstreams Upstreams
	events    chan engine.Event
	stop      chan struct{}       // closed by Shutdown: the queue is drained and run returns
	done      chan struct{}       // closed when run returned
	firstDue  map[int64]time.Time // instance → its first attempt's fire time, as this process saw it (run's goroutine)
	// installation is mixed into every trace id (WithInstallation).
	installation string
	drops        limited            // the events dropped, for trace_spans_dropped
	droppedTotal prometheus.Counter // nil: not counted
}

// Option is a setting of New.
type Option func(*Tracer)

// WithInstallation mixes id, a value unique to the store (every server
// of one store reads the same), into every trace id: the runs of two
// installations never share a trace even when their pipelines, run ids
// and logical times agree.
func WithInstallation(id string) Option { return func(t *Tracer) { t.installation = id } }

// New returns a tracer that exports with the OTLP/HTTP exporter configured
// by the OTEL_EXPORTER_OTLP_* variables, the service named by
// OTEL_SERVICE_NAME ("ax" by default) and OTEL_RESOURCE_ATTRIBUTES. Call
// Shutdown to flush it.
func New(ctx context.Context, log *slog.Logger, upstreams Upstreams, opts ...Option) (*Tracer, error) {
	if err := CheckEnv(os.Getenv); err != nil {
		return nil, err
	}
	bopts, _ := batchOptions(os.Getenv) // checked above
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "ax")), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: the resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP/HTTP exporter: %w (check the OTEL_EXPORTER_OTLP_* variables)", err)
	}
	routeSDKLogs(log)
	return newTracer(log, upstreams, opts, sdktrace.WithBatcher(exp, bopts...), sdktrace.WithResource(res)), nil
}

// newTracer starts a tracer whose provider has the options popts besides
// ax's ids and sampler.
func newTracer(log *slog.Logger, upstreams Upstreams, opts []Option, popts ...sdktrace.TracerProviderOption) *Tracer {
	// Every run is traced whole: a sampler deciding span by span would
	// leave holes in a run that several processes trace.
	tp := sdktrace.NewTracerProvider(append(popts, sdktrace.WithIDGenerator(ids{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))...)
	t := &Tracer{tp: tp, tr: tp.Tracer("github.com/ax-sched/ax/engine"), log: log, upstreams: upstreams,
		events: make(chan engine.Event, 4096), stop: make(chan struct{}), done: make(chan struct{}), firstDue: map[int64]time.Time{}}
	for _, o := range opts {
		o(t)
	}
	go t.run()
	return t
}

// Observe queues ev for its spans; it never blocks: when the queue is
// full (the batch processor's queue is full in turn, the collector slow
// or down), or the tracer was shut down, the event is dropped (counted,
// logged as trace_spans_dropped at most every logEvery).
func (t *Tracer) Observe(ev engine.Event) {
	select {
	case <-t.stop:
		return
	default:
	}
	select {
	case t.events <- ev:
	default:
		t.dropped()
	}
}

// TraceParent is the W3C traceparent of the span of the attempt ev
// starts.
func (t *Tracer) TraceParent(ev engine.Event) string {
	tid := t.traceID(ev)
	return Format(trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: attemptSpan(tid, ev.Instance, ev.Attempt),
		TraceFlags: trace.FlagsSampled}))
}

// Shutdown turns the events queued into spans, exports them and stops
// the exporter, within ctx. Events observed after it are dropped.
func (t *Tracer) Shutdown(ctx context.Context) error {
	close(t.stop)
	select {
	case <-t.done:
	case <-ctx.Done():
	}
	err := t.tp.Shutdown(ctx)
	if n := t.drops.rest(); n > 0 {
		t.log.Warn("trace_spans_dropped", "events", n, "why", "the tracer's queue is full: the collector is slow or down")
	}
	return err
}

func (t *Tracer) run() {
	defer close(t.done)
	for {
		select {
		case ev := <-t.events:
			t.take(ev)
		case <-t.stop:
			for {
				select {
				case ev := <-t.events:
					t.take(ev)
				default:
					return
				}
			}
		}
	}
}

// take turns ev into the spans it ends.
func (t *Tracer) take(ev engine.Event) {
	switch ev.Kind {
	case "started":
		if len(t.firstDue) >= maxFirstDue {
			clear(t.firstDue) // ends seen by another primary: their spans start at their last attempt
		}
		if _, ok := t.firstDue[ev.Instance]; !ok {
			t.firstDue[ev.Instance] = ev.Due
		}
	case "ended":
		t.attempt(ev)
		if ev.State != axtype.Retrying {
			t.instance(ev)
		}
	case "run_ended":
		t.runSpan(ev)
	}
}

// TraceID is the trace id of a run of a tracer without an installation
// id (TraceIDIn).
func TraceID(pipeline string, run int64, logical time.Time) trace.TraceID {
	return TraceIDIn("", pipeline, run, logical)
}

// TraceIDIn is the trace id of a run of installation: derived from its
// identity, the same in every process of the installation, other in
// another installation.
func TraceIDIn(installation, pipeline string, run int64, logical time.Time) trace.TraceID {
	key := "ax run\x00" + pipeline + "\x00" + strconv.FormatInt(run, 10) + "\x00" + logical.UTC().Format(time.RFC3339Nano)
	if installation != "" {
		key += "\x00" + installation
	}
	h := sha256.Sum256([]byte(key))
	var id trace.TraceID
	copy(id[:], h[:16])
	return id
}

// spanID derives a span id from the trace id and what the span is of.
func spanID(tid trace.TraceID, what string, n ...int64) trace.SpanID {
	b := append([]byte(what), tid[:]...)
	for _, v := range n {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	h := sha256.Sum256(b)
	var id trace.SpanID
	copy(id[:], h[:8])
	return id
}

// traceID is the trace id of the run of ev.
func (t *Tracer) traceID(ev engine.Event) trace.TraceID {
	return TraceIDIn(t.installation, ev.Pipeline, ev.Run, ev.Logical)
}

// RunSpan, InstanceSpan and attemptSpan are the span ids of a run, of
// one of its instances and of one of its attempts.
func RunSpan(tid trace.TraceID) trace.SpanID { return spanID(tid, "run") }

func instanceSpan(tid trace.TraceID, instance int64) trace.SpanID {
	return spanID(tid, "instance", instance)
}

func attemptSpan(tid trace.TraceID, instance int64, attempt int) trace.SpanID {
	return spanID(tid, "attempt", instance, int64(attempt))
}

// phaseSpan is the span id of a phase of an attempt ("queue wait",
// "execution", "result").
func phaseSpan(tid trace.TraceID, phase string, instance int64, attempt int) trace.SpanID {
	return spanID(tid, "phase "+phase, instance, int64(attempt))
}

// parent is a context whose span is the remote span (tid, sid).
func parent(tid trace.TraceID, sid trace.SpanID) context.Context {
	return trace.ContextWithRemoteSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
}

// attempt sends the span of the attempt ev ended, with its phases.
func (t *Tracer) attempt(ev engine.Event) {
	tid := t.traceID(ev)
	ctx := withIDs(parent(tid, instanceSpan(tid, ev.Instance)), tid, attemptSpan(tid, ev.Instance, ev.Attempt))
	start := earliest(ev.Due, ev.Started, ev.At)
	ctx, span := t.tr.Start(ctx, "attempt "+strconv.Itoa(ev.Attempt), trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs(ev)...), trace.WithAttributes(attribute.Int("ax.attempt", ev.Attempt), attribute.String("ax.ticket", ev.Ticket),
			attribute.String("ax.state", string(ev.State))))
	started := ev.Started
	if started.IsZero() || started.After(ev.At) {
		started = ev.At
	}
	phase := func(name string) context.Context {
		return withIDs(ctx, tid, phaseSpan(tid, name, ev.Instance, ev.Attempt))
	}
	t.phase(phase("queue wait"), "queue wait", start, started)
	span.AddEvent("dispatch", trace.WithTimestamp(started))
	t.phase(phase("execution"), "execution", started, ev.At)
	_, res := t.tr.Start(phase("result"), "result", trace.WithTimestamp(ev.At), trace.WithAttributes(attribute.String("ax.state", string(ev.State))))
	if ev.Error != "" {
		res.SetAttributes(attribute.String("ax.error", ev.Error))
	}
	res.End(trace.WithTimestamp(ev.At))
	failed(span, ev)
	span.End(trace.WithTimestamp(ev.At))
}

func (t *Tracer) phase(ctx context.Context, name string, from, to time.Time) {
	_, s := t.tr.Start(ctx, name, trace.WithTimestamp(from))
	s.End(trace.WithTimestamp(to))
}

// instance sends the span of the instance whose last attempt ev ended,
// linked to the runs of other pipelines it waited for.
func (t *Tracer) instance(ev engine.Event) {
	tid := t.traceID(ev)
	start, ok := t.firstDue[ev.Instance]
	delete(t.firstDue, ev.Instance)
	if !ok || start.IsZero() {
		start = earliest(ev.Due, ev.Started, ev.At)
	}
	var links []trace.Link
	if t.upstreams != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ups, err := t.upstreams(ctx, ev.Task, ev.Logical)
		cancel()
		if err != nil {
			t.log.Warn("trace_links_not_read", "task", ev.Task, "run", ev.Run, "err", err)
		}
		for _, u := range ups {
			utid := TraceIDIn(t.installation, u.Pipeline, u.Run, u.Logical)
			links = append(links, trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: utid, SpanID: RunSpan(utid),
				TraceFlags: trace.FlagsSampled, Remote: true}),
				Attributes: []attribute.KeyValue{attribute.String("ax.pipeline", u.Pipeline), attribute.Int64("ax.run_id", u.Run)}})
		}
	}
	ctx := withIDs(parent(tid, RunSpan(tid)), tid, instanceSpan(tid, ev.Instance))
	_, span := t.tr.Start(ctx, ev.Task, trace.WithTimestamp(start), trace.WithLinks(links...),
		trace.WithAttributes(attrs(ev)...), trace.WithAttributes(attribute.Int("ax.attempts", ev.Attempt), attribute.String("ax.state", string(ev.State))))
	failed(span, ev)
	span.End(trace.WithTimestamp(ev.At))
}

// runSpan sends the root span of the run ev ended.
func (t *Tracer) runSpan(ev engine.Event) {
	tid := t.traceID(ev)
	ctx := withIDs(context.Background(), tid, RunSpan(tid))
	_, span := t.tr.Start(ctx, "run "+ev.Pipeline, trace.WithNewRoot(), trace.WithTimestamp(earliest(ev.Started, ev.At)),
		trace.WithAttributes(attrs(ev)...), trace.WithAttributes(attribute.String("ax.state", string(ev.State))))
	failed(span, ev)
	span.End(trace.WithTimestamp(ev.At))
}

func attrs(ev engine.Event) []attribute.KeyValue {
	out := []attribute.KeyValue{attribute.String("ax.pipeline", ev.Pipeline), attribute.Int64("ax.run_id", ev.Run),
		attribute.String("ax.logical_time", ev.Logical.UTC().Format(time.RFC3339))}
	if ev.Task != "" {
		out = append(out, attribute.String("ax.task", ev.Task), attribute.Int64("ax.instance_id", ev.Instance))
	}
	return out
}

func failed(span trace.Span, ev engine.Event) {
	if ev.State == axtype.Success {
		span.SetStatus(codes.Ok, "")
		return
	}
	msg := string(ev.State)
	if ev.Error != "" {
		msg += ": " + ev.Error
	}
	span.SetStatus(codes.Error, msg)
}

// earliest is the earliest of ts that is set.
func earliest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if !t.IsZero() && (out.IsZero() || t.Before(out)) {
			out = t
		}
	}
	return out
}

// ForceFlush exports the spans ended so far, within ctx.
func (t *Tracer) ForceFlush(ctx context.Context) error { return t.tp.ForceFlush(ctx) }
