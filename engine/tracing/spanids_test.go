package tracing

import (
	"context"
	"log/slog"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/engine"
)

// traceOf feeds evs to a tracer of installation and returns the spans it
// ended.
func traceOf(t *testing.T, installation string, evs ...engine.Event) tracetest.SpanStubs {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr := newTracer(slog.New(slog.DiscardHandler), nil, []Option{WithInstallation(installation)}, sdktraceSyncer(exp))
	for _, ev := range evs {
		tr.Observe(ev)
	}
	close(tr.stop) // Shutdown's drain; the provider's shutdown would clear exp
	<-tr.done
	spans := exp.GetSpans()
	if err := tr.tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return spans
}

var (
	logical = time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	due     = logical.Add(time.Minute)
	retried = engine.Event{Kind: "ended", Pipeline: "p", Task: "p.a", Run: 3, Logical: logical, Instance: 9, Attempt: 1,
		Due: due, Started: due.Add(time.Second), At: due.Add(2 * time.Second), State: axtype.Retrying, Error: "exit status 1"}
	succeeded = engine.Event{Kind: "ended", Pipeline: "p", Task: "p.a", Run: 3, Logical: logical, Instance: 9, Attempt: 2,
		Due: due.Add(time.Minute), Started: due.Add(61 * time.Second), At: due.Add(62 * time.Second), State: axtype.Success}
	runEnded = engine.Event{Kind: "run_ended", Pipeline: "p", Run: 3, Logical: logical, Started: due, At: due.Add(63 * time.Second),
		State: axtype.Success}
)

// Every span of a run has an id of its own, and its parent is a span of
// the trace: each phase of an attempt is a child of the attempt.
func TestEverySpanHasItsOwnID(t *testing.T) {
	spans := traceOf(t, "inst", retried, succeeded, runEnded)
	if len(spans) != 10 { // run, instance, 2 × (attempt, queue wait, execution, result)
		t.Fatalf("%d spans, want 10", len(spans))
	}
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		id := s.SpanContext.SpanID()
		if o, ok := byID[id]; ok {
			t.Errorf("span %q and span %q share id %s", s.Name, o.Name, id)
		}
		byID[id] = s
	}
	for _, s := range spans {
		p := s.Parent.SpanID()
		if s.Name == "run p" {
			if s.Parent.IsValid() {
				t.Errorf("the run's span has parent %s", p)
			}
			continue
		}
		ps, ok := byID[p]
		if !ok || p == s.SpanContext.SpanID() {
			t.Errorf("span %q: parent %s is not another span of the trace", s.Name, p)
			continue
		}
		switch s.Name {
		case "queue wait", "execution", "result":
			if ps.Name != "attempt 1" && ps.Name != "attempt 2" {
				t.Errorf("span %q: parent %q, want its attempt", s.Name, ps.Name)
			}
		}
	}
}

// The trace ids of two installations differ for the same run identity;
// two tracers of one installation (two servers of one store) agree.
func TestTraceIDsOfInstallations(t *testing.T) {
	a1, a2, b := traceOf(t, "store-a", retried), traceOf(t, "store-a", retried), traceOf(t, "store-b", retried)
	if a1[0].SpanContext.TraceID() != a2[0].SpanContext.TraceID() || a1[0].SpanContext.SpanID() != a2[0].SpanContext.SpanID() {
		t.Errorf("one installation: trace %s and %s", a1[0].SpanContext.TraceID(), a2[0].SpanContext.TraceID())
	}
	if a1[0].SpanContext.TraceID() == b[0].SpanContext.TraceID() {
		t.Errorf("two installations share trace %s", b[0].SpanContext.TraceID())
	}
	if TraceIDIn("store-a", "p", 3, logical) == TraceIDIn("store-b", "p", 3, logical) {
		t.Error("TraceIDIn ignores the installation")
	}
}

func sdktraceSyncer(exp *tracetest.InMemoryExporter) sdktrace.TracerProviderOption {
	return sdktrace.WithSyncer(exp)
}

// A failed span's status names the state, and the error when there is one.
func TestFailedStatusMessage(t *testing.T) {
	failedRun := runEnded
	failedRun.State = axtype.Failed
	failedAttempt := succeeded
	failedAttempt.State, failedAttempt.Error = axtype.Failed, "exit status 3"
	want := map[string]string{"run p": "FAILED", "attempt 2": "FAILED: exit status 3", "p.a": "FAILED: exit status 3"}
	for _, s := range traceOf(t, "", failedAttempt, failedRun) {
		if w, ok := want[s.Name]; ok && s.Status.Description != w {
			t.Errorf("span %q: status %q, want %q", s.Name, s.Status.Description, w)
		}
	}
}
