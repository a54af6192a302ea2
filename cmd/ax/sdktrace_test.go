package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ax-sched/ax/cli"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is a collector's OTLP/HTTP traces endpoint: it takes
// protobuf (ax server's exporter) and JSON (the Python SDK's), each span
// kept with the encoding it came in.
type otlpReceiver struct {
	url   string
	mu    sync.Mutex
	spans []receivedSpan
	bad   []string // requests it could not decode
}

type receivedSpan struct {
	encoding string // "protobuf" or "json"
	span     *tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		enc, err := "protobuf", error(nil)
		if r.Header.Get("Content-Type") == "application/json" {
			enc = "json"
			err = unmarshalOTLPJSON(data, &req)
		} else {
			err = proto.Unmarshal(data, &req)
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err != nil || r.URL.Path != "/v1/traces" {
			rc.bad = append(rc.bad, fmt.Sprintf("%s %s (%s): %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), err))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					rc.spans = append(rc.spans, receivedSpan{enc, s})
				}
			}
		}
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if t.Failed() {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			for _, s := range rc.spans {
				t.Logf("span %q (%s) task %q trace %x span %x parent %x", s.span.Name, s.encoding, spanAttr(s.span, "ax.task"), s.span.TraceId, s.span.SpanId, s.span.ParentSpanId)
			}
			t.Logf("requests not decoded: %v", rc.bad)
		}
	})
	rc.url = srv.URL
	return rc
}

// unmarshalOTLPJSON decodes OTLP/JSON into the official types: it is
// protobuf's JSON mapping except that trace and span ids are hex, not
// base64, so they are rewritten before protojson reads them.
func unmarshalOTLPJSON(data []byte, req *coltracepb.ExportTraceServiceRequest) error {
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	rss, _ := doc["resourceSpans"].([]any)
	for _, rs := range rss {
		sss, _ := rs.(map[string]any)["scopeSpans"].([]any)
		for _, ss := range sss {
			spans, _ := ss.(map[string]any)["spans"].([]any)
			for _, s := range spans {
				m, _ := s.(map[string]any)
				for _, f := range []string{"traceId", "spanId", "parentSpanId"} {
					if h, ok := m[f].(string); ok {
						b, err := hex.DecodeString(h)
						if err != nil {
							return fmt.Errorf("%s %q is not hex: %v", f, h, err)
						}
						m[f] = base64.StdEncoding.EncodeToString(b)
					}
				}
			}
		}
	}
	b, _ := json.Marshal(doc)
	return protojson.Unmarshal(b, req)
}

// find returns the spans that match.
func (rc *otlpReceiver) find(match func(receivedSpan) bool) []receivedSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []receivedSpan
	for _, s := range rc.spans {
		if match(s) {
			out = append(out, s)
		}
	}
	return out
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.GetStringValue()
		}
	}
	return ""
}

// conformDownstreamTraced: on a real server with tracing on, a's outputs
// reach its downstream's template; a Python SDK attempt's span reaches the
// collector (OTLP/HTTP JSON, beside the server's protobuf) in the run's
// trace, a child of the scheduler's attempt span.
func conformDownstreamTraced(t *testing.T, s sdkUnderTest) {
	otlp := newOTLPReceiver(t)
	api, addr := freeAddr(t), freeAddr(t)
	dir, seen := t.TempDir(), filepath.Join(t.TempDir(), "seen")
	write(t, filepath.Join(dir, "flowsdk.yaml"), fmt.Sprintf(`pipeline: flowsdk
timezone: UTC
schedule: none
defaults: {timeout: 1m}
tasks:
  - {name: a, http: "http://127.0.0.1:1/dispatch", params: {outputs: {rows: 42, day: d1}, span: load}}
  - name: sink
    depends_on: [a]
    command: ["sh", "-c", "echo \"$LINE\" > %s"]
    env: {LINE: "rows={{ .Upstream.a.rows }} day={{ .Upstream.a.day }}"}
`, seen))
	db := filepath.Join(t.TempDir(), "ax.db")
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.url, "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SDK_DISABLED="}
	srv := startServerEnv(t, env, db, dir, "--listen", api)
	defer srv.stop(t)
	st := openStore(t, db)
	startSDK(t, s, addr, env, "-scheduler", "http://"+api, "-token-file", tokenFileOf(db), "-tasks", "a")
	waitFor(t, func() bool { exs, _ := st.Executors(context.Background(), "flowsdk.a"); return len(exs) == 1 })
	waitPrimary(t, api)
	if code, out, errOut := runAx(t, "trigger", "flowsdk.a", "--downstream", "--server", "http://"+api); code != cli.ExitOK {
		t.Fatalf("trigger: %d %s %s", code, out, errOut)
	}
	waitSuccesses(t, st, "flowsdk.sink", 1)
	if data, _ := os.ReadFile(seen); string(data) != "rows=42 day=d1\n" {
		t.Errorf("sink saw %q, want a's outputs through its template", data)
	}
	if s.name != "python" {
		return // the Go SDK leaves spans to the function (runner.TraceParent)
	}
	a := instancesOf(t, st, "flowsdk.a")[0]
	var py, attempt, run []receivedSpan
	waitFor(t, func() bool {
		py = otlp.find(func(r receivedSpan) bool { return r.span.Name == "execute a" })
		attempt = otlp.find(func(r receivedSpan) bool {
			return r.span.Name == "attempt 1" && spanAttr(r.span, "ax.task") == "flowsdk.a"
		})
		run = otlp.find(func(r receivedSpan) bool { return r.span.Name == "run flowsdk" })
		return len(py) > 0 && len(attempt) > 0 && len(run) > 0
	})
	p := py[0]
	if len(py) != 1 || p.encoding != "json" || attempt[0].encoding != "protobuf" {
		t.Errorf("%d Python spans, as %s; the server's attempt span as %s: want one, JSON, and protobuf", len(py), p.encoding, attempt[0].encoding)
	}
	if hex.EncodeToString(p.span.TraceId) != hex.EncodeToString(run[0].span.TraceId) ||
		hex.EncodeToString(p.span.ParentSpanId) != hex.EncodeToString(attempt[0].span.SpanId) {
		t.Errorf("Python span of trace %x, parent %x: want the run's trace %x and the attempt span %x as parent",
			p.span.TraceId, p.span.ParentSpanId, run[0].span.TraceId, attempt[0].span.SpanId)
	}
	if spanAttr(p.span, "ax.ticket") != a.Ticket || spanAttr(p.span, "ax.task") != "flowsdk.a" || spanAttr(p.span, "ax.status") != "success" ||
		p.span.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("Python span %v: want ticket %s, task flowsdk.a (as the server names it), status success", p.span, a.Ticket)
	}
	var load []receivedSpan
	waitFor(t, func() bool {
		load = otlp.find(func(r receivedSpan) bool { return r.span.Name == "load" })
		return len(load) > 0
	})
	want := fmt.Sprintf("00-%x-%x-01", run[0].span.TraceId, attempt[0].span.SpanId)
	if l := load[0].span; hex.EncodeToString(l.TraceId) != hex.EncodeToString(p.span.TraceId) ||
		hex.EncodeToString(l.ParentSpanId) != hex.EncodeToString(p.span.SpanId) || spanAttr(l, "traceparent_seen") != want {
		t.Errorf("the handler's span %v: want a child of the attempt's span %x, its ctx.traceparent %s", l, p.span.SpanId, want)
	}
	otlp.mu.Lock()
	defer otlp.mu.Unlock()
	if len(otlp.bad) > 0 {
		t.Errorf("the collector could not decode: %v", otlp.bad)
	}
}

// conformTraceparentMalformed: a dispatch's traceparent that is not W3C's
// leaves ctx.traceparent None, and the attempt's span (still exported, as
// JSON) starts a trace of its own; a failed attempt's span says so.
func conformTraceparentMalformed(t *testing.T, s sdkUnderTest) {
	if s.name != "python" {
		return // the Go SDK exports no spans of its own
	}
	otlp := newOTLPReceiver(t)
	addr := freeAddr(t)
	startSDK(t, s, addr, []string{"AX_EXECUTOR_TOKEN=" + conformanceToken, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + otlp.url + "/v1/traces",
		"OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SDK_DISABLED=", "OTEL_TRACES_EXPORTER="})
	sink := newResultSink(t)
	d := dispatchOf("a", "TP1", sink.url, map[string]any{"span": "load", "fail": "no rows"})
	d["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01" // an all-zero span id
	sdkPost(t, addr, "/dispatch", d)
	if rep := sink.wait(t, "TP1"); rep["status"] != "failed" {
		t.Fatalf("result %v, want failed", rep)
	}
	var ex, load []receivedSpan
	waitFor(t, func() bool {
		ex = otlp.find(func(r receivedSpan) bool { return r.span.Name == "execute a" })
		load = otlp.find(func(r receivedSpan) bool { return r.span.Name == "load" })
		return len(ex) > 0 && len(load) > 0
	})
	e := ex[0].span
	if len(e.ParentSpanId) != 0 || hex.EncodeToString(e.TraceId) == "0af7651916cd43dd8448eb211c80319c" ||
		e.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || e.Status.GetMessage() != "RuntimeError: no rows" || spanAttr(e, "ax.status") != "failed" {
		t.Errorf("attempt span %v: want a root of a new trace, error status with the attempt's error", e)
	}
	if got := spanAttr(load[0].span, "traceparent_seen"); got != "none" {
		t.Errorf("ctx.traceparent of a malformed traceparent: %q, want None", got)
	}
}
