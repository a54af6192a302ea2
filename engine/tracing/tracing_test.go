package tracing_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/engine/tracing"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/runner/executor"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/taskexec"
)

// receiver is an OTLP/HTTP traces endpoint: it decodes what the exporter
// sends with the protocol's own types.
type receiver struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP/HTTP protobuf traces request", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(data, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				rc.services = append(rc.services, kv.Value.GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			rc.spans = append(rc.spans, ss.Spans...)
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

const upYAML = `pipeline: up
tasks:
  - name: extract
    command: ["true"]
`

// down: a waits for up.extract, b fails its first attempt, c follows b.
const downYAML = `pipeline: down
tasks:
  - name: a
    depends_on: [{task: up.extract}]
    command: ["true"]
  - name: b
    depends_on: [a]
    retry: {count: 2, interval: 1s}
    command: ["sh", "-c", "echo \"$TRACEPARENT\" >> \"$OUT/traceparents\"; test -f \"$OUT/flag\" || { touch \"$OUT/flag\"; exit 3; }"]
    env: {OUT: "%s"}
  - name: c
    depends_on: [b]
    command: ["true"]
`

// traced is an engine on the pipelines of dir, traced to an OTLP/HTTP
// receiver, the primary.
type traced struct {
	rc   *receiver
	st   *store.Store
	eng  *engine.Engine
	tr   *tracing.Tracer
	stop func() // stops the engine and flushes the tracer
	// kinds are the kinds of Event OnEvent heard of.
	kinds sync.Map
}

func startTraced(t *testing.T, dir string) *traced {
	t.Helper()
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "ax-test")
	t.Setenv("OTEL_SDK_DISABLED", "")
	if !tracing.Enabled(os.Getenv) {
		t.Fatal("an OTLP endpoint is set: tracing should be on")
	}
	g, errs, err := dag.Load([]string{dir}, defs.Options{}, dag.Options{})
	if err != nil || g == nil {
		t.Fatalf("load: %v %v", err, errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := store.Open(ctx, filepath.Join(dir, "ax.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	x := &traced{rc: rc, st: st}
	execs, err := taskexec.Executors(g, st, taskexec.AlertVia(&x.eng), runner.NewSecrets(""))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	x.tr, err = tracing.New(ctx, log, func(ctx context.Context, task string, logical time.Time) ([]engine.RunRef, error) {
		return x.eng.UpstreamRuns(ctx, task, logical)
	})
	if err != nil {
		t.Fatal(err)
	}
	x.eng, err = engine.New(engine.Config{Holder: "trace-test", Grace: time.Millisecond, Observer: x.tr, Logger: log,
		OnEvent: func(ev engine.Event) { x.kinds.Store(ev.Kind, true) }}, st, g, execs)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- x.eng.Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); !x.eng.Primary(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the engine did not take the lease in 10s")
		}
	}
	x.stop = func() {
		cancel()
		<-done
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := x.tr.Shutdown(sctx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}
	return x
}

func (x *traced) trigger(t *testing.T, at time.Time, pipelines ...string) {
	t.Helper()
	for _, p := range pipelines {
		if _, err := x.eng.Do(context.Background(), engine.Trigger{Target: p, At: at}, engine.By{Actor: "test"}); err != nil {
			t.Fatalf("trigger %s: %v", p, err)
		}
	}
}

func TestTraceOfARunWithARetryAndACrossPipelineUpstream(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "up.yaml"), upYAML)
	write(t, filepath.Join(dir, "down.yaml"), strings.Replace(downYAML, "%s", dir, 1))
	x := startTraced(t, dir)
	x.trigger(t, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), "up", "down")
	ins := waitFor(t, x.st, "down.c", axtype.Success)
	x.stop()
	upIns := waitFor(t, x.st, "up.extract", axtype.Success)
	checkTrace(t, x.rc, dir, ins, upIns)
}

// A run whose last instances fail without running (their upstream failed)
// still ends its trace: its root span, in error, with no span for them.
func TestTraceOfARunThatFails(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "f.yaml"), "pipeline: f\ntasks:\n  - {name: x, command: [\"false\"], retry: {count: 0}}\n  - {name: y, depends_on: [x], command: [\"true\"]}\n")
	x := startTraced(t, dir)
	x.trigger(t, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), "f")
	y := waitFor(t, x.st, "f.y", axtype.Failed)
	tid := tracing.TraceID("f", y.RunID, y.LogicalTime)
	want := tracing.RunSpan(tid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		x.rc.mu.Lock()
		var run *tracepb.Span
		for _, s := range x.rc.spans {
			if s.Name == "run f" {
				run = s
			}
		}
		names := []string{}
		for _, s := range x.rc.spans {
			names = append(names, s.Name)
		}
		x.rc.mu.Unlock()
		if run != nil {
			if string(run.SpanId) != string(want[:]) || run.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || slices.Contains(names, "f.y") {
				t.Errorf("run span %x status %v, spans %v: want %x in error, no span for f.y", run.SpanId, run.Status, names, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run span after 10s: spans %v", names)
		}
		x.tr.ForceFlush(context.Background())
		time.Sleep(20 * time.Millisecond)
	}
	x.stop()
	// OnEvent hears of attempts only (ax run counts the failures it
	// reports): a run's end goes to the observer alone.
	x.kinds.Range(func(k, _ any) bool {
		if k != "started" && k != "ended" {
			t.Errorf("OnEvent heard of a %q event", k)
		}
		return true
	})
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls the store until task's latest instance is in state, and
// returns it.
func waitFor(t *testing.T, st *store.Store, task string, state axtype.State) axtype.Instance {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ins, err := st.Instances(context.Background(), store.InstanceFilter{TaskID: task, Limit: 1})
		if err == nil && len(ins) == 1 && ins[0].State == state {
			return ins[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %s after 30s: %v %v", task, state, ins, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func byName(spans []*tracepb.Span, name string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func one(t *testing.T, spans []*tracepb.Span, name string, parent []byte) *tracepb.Span {
	t.Helper()
	var out []*tracepb.Span
	for _, s := range byName(spans, name) {
		if string(s.ParentSpanId) == string(parent) {
			out = append(out, s)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d spans %q under %x, want 1 (of %d spans)", len(out), name, parent, len(spans))
	}
	return out[0]
}

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
				return strconv.FormatInt(v.IntValue, 10)
			}
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// checkTrace checks the spans received, span by span: the run of down
// (whose last instance is last), its three instances, b's two attempts
// with their phases, a's link to up's run, and the traceparents b's
// attempts were handed.
func checkTrace(t *testing.T, rc *receiver, dir string, last, up axtype.Instance) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.services) == 0 || slices.ContainsFunc(rc.services, func(s string) bool { return s != "ax-test" }) {
		t.Errorf("service names %v, want ax-test (OTEL_SERVICE_NAME)", rc.services)
	}
	tid := tracing.TraceID("down", last.RunID, last.LogicalTime)
	var spans []*tracepb.Span
	for _, s := range rc.spans {
		if string(s.TraceId) == string(tid[:]) {
			spans = append(spans, s)
		}
	}
	runSpan := tracing.RunSpan(tid)
	run := one(t, spans, "run down", nil)
	if string(run.SpanId) != string(runSpan[:]) || run.Status.GetCode() != tracepb.Status_STATUS_CODE_OK {
		t.Errorf("run span %x status %v, want %x ok", run.SpanId, run.Status, runSpan)
	}
	insts := map[string]*tracepb.Span{}
	for _, task := range []string{"down.a", "down.b", "down.c"} {
		insts[task] = one(t, spans, task, run.SpanId)
		if s := insts[task]; s.StartTimeUnixNano < run.StartTimeUnixNano || s.EndTimeUnixNano > run.EndTimeUnixNano {
			t.Errorf("%s [%d, %d] outside its run [%d, %d]", task, s.StartTimeUnixNano, s.EndTimeUnixNano, run.StartTimeUnixNano, run.EndTimeUnixNano)
		}
	}
	if got := attr(insts["down.b"], "ax.attempts"); got != "2" {
		t.Errorf("down.b attempts %q, want 2", got)
	}
	// a waited for up's run: its span links to up's run span.
	utid := tracing.TraceID("up", up.RunID, up.LogicalTime)
	usid := tracing.RunSpan(utid)
	if l := insts["down.a"].Links; len(l) != 1 || string(l[0].TraceId) != string(utid[:]) || string(l[0].SpanId) != string(usid[:]) {
		t.Errorf("down.a links %v, want one to up's run %x/%x", l, utid, usid)
	}
	if l := insts["down.c"].Links; len(l) != 0 {
		t.Errorf("down.c links %v, want none (no upstream in another pipeline)", l)
	}
	upRun := one(t, rc.spans, "run up", nil)
	if string(upRun.TraceId) != string(utid[:]) || string(upRun.SpanId) != string(usid[:]) {
		t.Errorf("up's run span %x/%x, want %x/%x", upRun.TraceId, upRun.SpanId, utid, usid)
	}
	one(t, rc.spans, "up.extract", upRun.SpanId)
	// b: two attempts, the first RETRYING, each with its phases.
	var handed []string
	for n, state := range map[string]string{"attempt 1": "RETRYING", "attempt 2": "SUCCESS"} {
		a := one(t, spans, n, insts["down.b"].SpanId)
		if got := attr(a, "ax.state"); got != state {
			t.Errorf("down.b %s state %q, want %s", n, got, state)
		}
		if failed := a.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR; failed != (state == "RETRYING") {
			t.Errorf("down.b %s status %v: a failed attempt's is an error, a successful one's not", n, a.Status)
		}
		for _, phase := range []string{"queue wait", "execution", "result"} {
			p := one(t, spans, phase, a.SpanId)
			if p.StartTimeUnixNano < a.StartTimeUnixNano || p.EndTimeUnixNano > a.EndTimeUnixNano {
				t.Errorf("down.b %s: %s outside the attempt", n, phase)
			}
		}
		if len(a.Events) != 1 || a.Events[0].Name != "dispatch" {
			t.Errorf("down.b %s events %v, want dispatch", n, a.Events)
		}
		handed = append(handed, "00-"+hex.EncodeToString(tid[:])+"-"+hex.EncodeToString(a.SpanId)+"-01")
	}
	data, err := os.ReadFile(filepath.Join(dir, "traceparents"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(data))
	slices.Sort(got)
	slices.Sort(handed)
	if !slices.Equal(got, handed) {
		t.Errorf("TRACEPARENT of b's attempts %q, want their spans %q", got, handed)
	}
}

// An HTTP task's executor built on the Go SDK gets its attempt's span as
// the parent of the function's context: the spans the function starts
// (with a tracer of its own process) join the run's trace under it.
func TestTraceJoinedByTheExecutorSDK(t *testing.T) {
	x, err := executor.New(executor.Config{Client: http.DefaultClient}, map[string]runner.Func{"call": func(ctx context.Context, _ runner.Attempt) error {
		_, span := otel.GetTracerProvider().Tracer("the task").Start(ctx, "load rows")
		span.End()
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = x.Run(ctx) }()
	exec := httptest.NewServer(x.Handler())
	defer exec.Close()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "h.yaml"), "pipeline: h\ntasks:\n  - {name: call, http: \""+exec.URL+"/dispatch\"}\n")
	tr := startTraced(t, dir)
	// The task's process: a tracer provider of its own, to the same receiver.
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	taskTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	otel.SetTracerProvider(taskTP)
	defer func() { _ = taskTP.Shutdown(context.Background()) }()
	tr.trigger(t, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), "h")
	in := waitFor(t, tr.st, "h.call", axtype.Success)
	tr.stop()
	tid := tracing.TraceID("h", in.RunID, in.LogicalTime)
	tr.rc.mu.Lock()
	defer tr.rc.mu.Unlock()
	var spans []*tracepb.Span
	for _, s := range tr.rc.spans {
		if string(s.TraceId) == string(tid[:]) {
			spans = append(spans, s)
		}
	}
	run := one(t, spans, "run h", nil)
	call := one(t, spans, "h.call", run.SpanId)
	attempt := one(t, spans, "attempt 1", call.SpanId)
	one(t, spans, "load rows", attempt.SpanId)
}
