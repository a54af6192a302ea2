package tracing

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The batch span processor's settings when the OTEL_BSP_* variables leave
// them unset: a queue that holds the spans of a few thousand attempts while
// the collector is slow (the SDK's 2048 holds about 400).
const (
	defaultQueue = 16384
	defaultBatch = 512
	// maxQueue bounds OTEL_BSP_MAX_QUEUE_SIZE: a queue is allocated whole.
	maxQueue = 1_000_000
	// maxMillis bounds the OTEL_BSP_* durations (milliseconds): an hour.
	maxMillis = 3_600_000
)

// batchOptions reads and checks the OTEL_BSP_* variables: sizes of 1 or
// more (the batch at most the queue), durations in milliseconds of 1 or
// more.
func batchOptions(getenv func(string) string) ([]sdktrace.BatchSpanProcessorOption, error) {
	queue, err := envInt(getenv, "OTEL_BSP_MAX_QUEUE_SIZE", defaultQueue, maxQueue)
	if err != nil {
		return nil, err
	}
	batch, err := envInt(getenv, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", min(defaultBatch, queue), queue)
	if err != nil {
		return nil, err
	}
	delay, err := envInt(getenv, "OTEL_BSP_SCHEDULE_DELAY", 5000, maxMillis)
	if err != nil {
		return nil, err
	}
	timeout, err := envInt(getenv, "OTEL_BSP_EXPORT_TIMEOUT", 30000, maxMillis)
	if err != nil {
		return nil, err
	}
	return []sdktrace.BatchSpanProcessorOption{sdktrace.WithMaxQueueSize(queue), sdktrace.WithMaxExportBatchSize(batch),
		sdktrace.WithBatchTimeout(time.Duration(delay) * time.Millisecond), sdktrace.WithExportTimeout(time.Duration(timeout) * time.Millisecond),
		sdktrace.WithBlocking()}, nil
}

// envInt reads the whole number of variable name, from 1 to most; def
// when it is unset.
func envInt(getenv func(string) string, name string, def, most int) (int, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, fmt.Errorf("%s=%q: give a whole number from 1 to %d, or unset it", name, v, most)
	}
	return n, nil
}

// checkExporterEnv refuses OTEL_EXPORTER_OTLP_* settings ax cannot send
// with: an endpoint that is not an http(s) URL, a protocol other than
// http/protobuf.
func checkExporterEnv(getenv func(string) string) error {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s=%q: give the collector's URL, such as http://collector:4318", name, Redact(v))
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if v := strings.TrimSpace(getenv(name)); v != "" && v != "http/protobuf" {
			return fmt.Errorf("%s=%q: ax sends traces over OTLP/HTTP with protobuf only: set http/protobuf (the collector's HTTP port, usually 4318) or unset it", name, v)
		}
	}
	return nil
}

// Redact is endpoint with its user and password hidden, for logs.
func Redact(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		if at := strings.LastIndex(endpoint, "@"); at >= 0 {
			scheme, _, _ := strings.Cut(endpoint, "://")
			return scheme + "://xxxxx" + endpoint[at:]
		}
		return endpoint
	}
	if u.User != nil {
		u.User = url.User("xxxxx")
	}
	return u.String()
}

// CheckEnv refuses OTEL_* settings tracing cannot start with (the batch
// processor's, the exporter's endpoint and protocol) when the environment
// (getenv) asks for traces; what ax server checks before it starts.
func CheckEnv(getenv func(string) string) error {
	if !Enabled(getenv) {
		return nil
	}
	if _, err := batchOptions(getenv); err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	if err := checkExporterEnv(getenv); err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	return nil
}
