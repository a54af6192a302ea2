package executor

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/ax-sched/ax/runner"
)

// A dispatch's traceparent is the remote parent of the function's context,
// and the attempt's TraceParent; a malformed one is ignored: the function's
// spans start a fresh trace.
func TestDispatchTraceParentJoinsTheRunsTrace(t *testing.T) {
	t.Parallel()
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	got := make(chan trace.SpanContext, 4)
	handed := make(chan string, 4)
	s := newSetup(t, Config{}, map[string]runner.Func{"sync": func(ctx context.Context, a runner.Attempt) error {
		got <- trace.SpanContextFromContext(ctx)
		handed <- a.TraceParent
		return nil
	}})
	for _, c := range []struct {
		traceparent, trace, span string
	}{
		{good, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "", ""},          // no flags
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", ""},       // an all-zero trace id
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01-extra", "", ""}, // upper case, too many fields
		{"garbage", "", ""},
	} {
		d := disp("sync", "tk-"+c.traceparent)
		d.TraceParent = c.traceparent
		if code, body := dispatch(t, s.url, d); code != 200 {
			t.Fatalf("%q: dispatch answered %d %s", c.traceparent, code, body)
		}
		sc, tp := <-got, <-handed
		if tp != c.traceparent {
			t.Errorf("%q: the attempt's TraceParent is %q", c.traceparent, tp)
		}
		if c.trace == "" {
			if sc.IsValid() {
				t.Errorf("%q: malformed, yet the function's context has span %v: want none (a fresh trace)", c.traceparent, sc)
			}
			continue
		}
		if !sc.IsRemote() || sc.TraceID().String() != c.trace || sc.SpanID().String() != c.span || !sc.IsSampled() {
			t.Errorf("%q: the function's context has %v, want remote parent %s/%s sampled", c.traceparent, sc, c.trace, c.span)
		}
	}
}
