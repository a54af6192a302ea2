package tracing

import (
	"context"
	crand "crypto/rand"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// idsKey is the context key of the ids a span is to be started with.
type idsKey struct{}

type forced struct {
	trace trace.TraceID
	span  trace.SpanID
}

// withIDs asks the span started with ctx to take ids tid and sid.
func withIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, forced{tid, sid})
}

// ids gives a span the ids its context asks for (withIDs), else random
// ones: the SDK's IDGenerator.
type ids struct{}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if f, ok := ctx.Value(idsKey{}).(forced); ok {
		return f.trace, f.span
	}
	var tid trace.TraceID
	_, _ = crand.Read(tid[:])
	return tid, randomSpan()
}

func (ids) NewSpanID(ctx context.Context, tid trace.TraceID) trace.SpanID {
	if f, ok := ctx.Value(idsKey{}).(forced); ok && f.trace == tid {
		return f.span
	}
	return randomSpan()
}

func randomSpan() trace.SpanID {
	var sid trace.SpanID
	_, _ = crand.Read(sid[:])
	return sid
}

// Format writes sc as a W3C traceparent.
func Format(sc trace.SpanContext) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c["traceparent"]
}
