package tracing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestCheckEnvRefusesBadSettings(t *testing.T) {
	on := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
	for set, want := range map[[2]string]string{
		{"OTEL_BSP_MAX_QUEUE_SIZE", "-1"}:                        `OTEL_BSP_MAX_QUEUE_SIZE="-1": give a whole number from 1 to 1000000, or unset it`,
		{"OTEL_BSP_MAX_QUEUE_SIZE", "99999999999"}:               `OTEL_BSP_MAX_QUEUE_SIZE="99999999999": give a whole number from 1 to 1000000`,
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "-1"}:                 `OTEL_BSP_MAX_EXPORT_BATCH_SIZE="-1": give a whole number from 1 to 16384`,
		{"OTEL_BSP_SCHEDULE_DELAY", "5s"}:                        `OTEL_BSP_SCHEDULE_DELAY="5s": give a whole number`,
		{"OTEL_BSP_EXPORT_TIMEOUT", "0"}:                         `OTEL_BSP_EXPORT_TIMEOUT="0": give a whole number from 1 to 3600000`,
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"}:        `OTEL_EXPORTER_OTLP_ENDPOINT="collector:4318": give the collector's URL, such as http://collector:4318`,
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://u:pw@c/x"}: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="ftp://xxxxx@c/x": give the collector's URL`,
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}:                  `OTEL_EXPORTER_OTLP_PROTOCOL="grpc": ax sends traces over OTLP/HTTP with protobuf only`,
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"}:      `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/json": ax sends traces over OTLP/HTTP`,
	} {
		env := map[string]string{set[0]: set[1]}
		for k, v := range on {
			if _, ok := env[k]; !ok {
				env[k] = v
			}
		}
		err := CheckEnv(func(k string) string { return env[k] })
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s=%s: error %v, want one line %q", set[0], set[1], err, want)
		}
	}
	for _, env := range []map[string]string{
		{}, // tracing off: nothing read
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://u:p@collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "100", "OTEL_BSP_SCHEDULE_DELAY": "100"},
	} {
		if err := CheckEnv(func(k string) string { return env[k] }); err != nil {
			t.Errorf("%v: %v", env, err)
		}
	}
}

// A queue size the SDK cannot allocate is refused by New, not a panic.
func TestNewRefusesANegativeQueue(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "-1")
	tr, err := New(context.Background(), slog.New(slog.DiscardHandler), nil)
	if err == nil || !strings.Contains(err.Error(), "OTEL_BSP_MAX_QUEUE_SIZE") {
		t.Errorf("tracer %v, error %v: want the variable named", tr, err)
	}
}

func TestRedactHidesTheUserInfo(t *testing.T) {
	for in, want := range map[string]string{
		"http://user:s3cret@collector:4318/v1": "http://xxxxx@collector:4318/v1",
		"http://collector:4318":                "http://collector:4318",
		"http://user:s3cret@coll%zz":           "http://xxxxx@coll%zz",
	} {
		if got := Redact(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// syncBuf is a buffer logs go to from several goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// stuck is an exporter whose collector does not answer until released.
type stuck struct{ release chan struct{} }

func (s stuck) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return nil
}
func (stuck) Shutdown(context.Context) error { return nil }

// Events dropped while the collector hangs are counted in the metric and
// logged as trace_spans_dropped with their count, not line by line.
func TestDroppedSpansCountedAndLogged(t *testing.T) {
	var buf syncBuf
	reg := prometheus.NewRegistry()
	exp := stuck{make(chan struct{})}
	tr := newTracer(slog.New(slog.NewTextHandler(&buf, nil)), nil, []Option{WithRegisterer(reg)},
		sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(10), sdktrace.WithMaxExportBatchSize(5), sdktrace.WithBlocking()))
	const sent = 3 * 4096
	for range sent {
		tr.Observe(succeeded)
	}
	close(exp.release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = tr.Shutdown(ctx)
	counted := testutil.ToFloat64(tr.droppedTotal)
	if counted < sent-4096-100 {
		t.Errorf("%v events counted dropped of %d, with a queue of 4096", counted, sent)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	total := 0
	for _, l := range lines {
		var n int
		if _, err := fmtSscanf(l, &n); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		total += n
	}
	if len(lines) > 2 || float64(total) != counted {
		t.Errorf("%d lines, counting %d (the metric: %v):\n%s", len(lines), total, counted, buf.String())
	}
}

// The SDK's errors go to ax's log, at most one line per logEvery with the
// count.
func TestSDKErrorsInTheLog(t *testing.T) {
	var buf syncBuf
	routeSDKLogs(slog.New(slog.NewTextHandler(&buf, nil)))
	defer otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	for range 5 {
		otel.Handle(errors.New("traces export: connection refused"))
	}
	got := buf.String()
	if strings.Count(got, "otel_error") != 1 || !strings.Contains(got, `err="traces export: connection refused" errors=1`) {
		t.Errorf("log:\n%s", got)
	}
}

// fmtSscanf reads the events count of a trace_spans_dropped line.
func fmtSscanf(line string, n *int) (int, error) {
	_, rest, ok := strings.Cut(line, "msg=trace_spans_dropped events=")
	if !ok {
		return 0, errors.New("not a trace_spans_dropped line")
	}
	return fmt.Sscanf(rest, "%d", n)
}
