package tracing_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/engine/tracing"
)

func TestEnabledFollowsTheOTELVariables(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "TRUE"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "false"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "ax"}, false},
	} {
		if got := tracing.Enabled(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("%v: enabled %v, want %v", c.env, got, c.want)
		}
	}
}

// The traceparent an attempt is handed depends on the run's identity
// alone: a new primary (another tracer) hands the same, and ends the span
// under the id the old one handed.
func TestTraceParentIsTheSameInEveryProcess(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	logical := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	ev := engine.Event{Kind: "started", Pipeline: "down", Task: "down.b", Run: 41, Logical: logical, Instance: 7, Attempt: 2}
	var got []string
	for range 2 {
		tr, err := tracing.New(context.Background(), slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tr.TraceParent(ev))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = tr.Shutdown(ctx)
		cancel()
	}
	tid := tracing.TraceID("down", 41, logical)
	if got[0] != got[1] || !strings.HasPrefix(got[0], "00-"+tid.String()+"-") || !strings.HasSuffix(got[0], "-01") {
		t.Errorf("traceparents %q, want one, of trace %s, sampled", got, tid)
	}
	other := ev
	other.Attempt = 3
	for _, o := range []engine.Event{other, {Pipeline: "down", Run: 42, Logical: logical, Instance: 7, Attempt: 2}} {
		tr, _ := tracing.New(context.Background(), slog.New(slog.DiscardHandler), nil)
		if tp := tr.TraceParent(o); tp == got[0] {
			t.Errorf("%+v has the same traceparent as another attempt: %s", o, tp)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = tr.Shutdown(ctx)
		cancel()
	}
	if tracing.TraceID("down", 41, logical) == tracing.TraceID("down", 41, logical.Add(time.Hour)) ||
		tracing.TraceID("down", 41, logical) == tracing.TraceID("up", 41, logical) {
		t.Error("runs of other identities share a trace id")
	}
}
