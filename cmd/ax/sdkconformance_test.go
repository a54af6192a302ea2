package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// The SDK conformance suite: protocol v1 as each executor SDK speaks it,
// the Go SDK (runner/executor, through sdk/conformance/goexec) and the
// Python SDK (sdk/python, through sdk/conformance/pyexec.py), each in a
// process of its own, driven by the same cases: some pose as the scheduler
// and check the answers, the others run a real ax server (this package's
// binary). Both SDKs must give the same status codes and answer shapes.

// sdkUnderTest starts an SDK's conformance executor with args.
type sdkUnderTest struct {
	name string
	argv []string // the command, before the flags
}

var (
	goexecOnce sync.Once
	goexecBin  string
	goexecErr  error
)

// sdksUnderTest are the SDKs to check: Go always; Python when python3 is
// installed, and in CI (CI set) a missing python3 is a failure.
func sdksUnderTest(t *testing.T) []sdkUnderTest {
	t.Helper()
	goexecOnce.Do(func() {
		goexecBin = filepath.Join(filepath.Dir(axBinary), "goexec")
		if out, err := exec.Command("go", "build", "-o", goexecBin, "../../sdk/conformance/goexec").CombinedOutput(); err != nil {
			goexecErr = fmt.Errorf("build goexec: %v\n%s", err, out)
		}
	})
	if goexecErr != nil {
		t.Fatal(goexecErr)
	}
	sdks := []sdkUnderTest{{name: "go", argv: []string{goexecBin}}}
	py, err := exec.LookPath("python3")
	switch {
	case err == nil:
		script, _ := filepath.Abs("../../sdk/conformance/pyexec.py")
		sdks = append(sdks, sdkUnderTest{name: "python", argv: []string{py, "-u", script}})
	case os.Getenv("CI") != "":
		t.Fatalf("python3 is not installed: the Python SDK's conformance cannot run, and in CI that is a failure (install python3 >= 3.9)")
	default:
		t.Logf("python3 is not installed: the Python SDK's conformance is left out (in CI it fails)")
	}
	return sdks
}

// conformanceToken is the executor credential of the cases that pose as the scheduler.
const conformanceToken = "conformance-token"

// sdkProc is a conformance executor in its own process.
type sdkProc struct {
	cmd  *exec.Cmd
	addr string
	log  string
}

// startSDK starts s's executor on addr with the extra flags and waits
// until it answers /healthz.
func startSDK(t *testing.T, s sdkUnderTest, addr string, env []string, flags ...string) *sdkProc {
	t.Helper()
	log, err := os.CreateTemp(t.TempDir(), "executor-*.log")
	if err != nil {
		t.Fatal(err)
	}
	args := append(append(append([]string{}, s.argv[1:]...), "-listen", addr), flags...)
	cmd := exec.Command(s.argv[0], args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &sdkProc{cmd: cmd, addr: addr, log: log.Name()}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
		if t.Failed() {
			out, _ := os.ReadFile(p.log)
			t.Logf("%s executor log:\n%s", s.name, out)
		}
	})
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	return p
}

// crash kills the executor with SIGKILL.
func (p *sdkProc) crash() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// sdkCall POSTs body to the executor as the scheduler does (token and all,
// unless token is empty) and decodes the JSON answer.
func sdkCall(t *testing.T, addr, path, token, ctype string, body []byte) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("X-Ax-Protocol", "1")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var ans map[string]any
	if err := json.Unmarshal(data, &ans); err != nil {
		t.Fatalf("POST %s: %d answer is not a JSON object: %q", path, resp.StatusCode, data)
	}
	return resp.StatusCode, ans
}

func sdkPost(t *testing.T, addr, path string, v any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(v)
	return sdkCall(t, addr, path, conformanceToken, "application/json", b)
}

// dispatchOf is a dispatch of task under ticket, its result to callback.
func dispatchOf(task, ticket, callback string, params map[string]any) map[string]any {
	return map[string]any{"version": 1, "pipeline": "conf", "task": task, "instance_id": 7, "ticket": ticket,
		"logical_time": "2026-01-02T03:00:00Z", "deadline": time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano),
		"params": params, "callback": callback, "ticket_ttl_ms": 600000}
}

// resultSink is a callback that takes every result posted to it.
type resultSink struct {
	url string
	mu  sync.Mutex
	got []map[string]any
}

func newResultSink(t *testing.T) *resultSink {
	s := &resultSink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep map[string]any
		_ = json.NewDecoder(r.Body).Decode(&rep)
		s.mu.Lock()
		s.got = append(s.got, rep)
		s.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL + "/api/v1/results"
	return s
}

// wait returns the first result of ticket, waiting for it.
func (s *resultSink) wait(t *testing.T, ticket string) map[string]any {
	t.Helper()
	var rep map[string]any
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, r := range s.got {
			if r["ticket"] == ticket {
				rep = r
				return true
			}
		}
		return false
	})
	return rep
}

// recorded counts the lines of the executor's record file.
func recorded(t *testing.T, record string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(record)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l != "" {
			n[l]++
		}
	}
	return n
}

func metricsOf(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("/metrics Content-Type %q, want Prometheus text", ct)
	}
	return string(b)
}

// TestSDKConformance runs every case against every SDK.
func TestSDKConformance(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		run  func(t *testing.T, s sdkUnderTest)
	}{
		{"dedupe", conformDedupe},
		{"kill", conformKill},
		{"status", conformStatus},
		{"full", conformFull},
		{"bad_input", conformBadInput},
		{"methods", conformMethods},
		{"outputs", conformOutputs},
		{"downstream_traced", conformDownstreamTraced},
		{"traceparent_malformed", conformTraceparentMalformed},
		{"env_secrets", conformEnvSecrets},
		{"synchronous", conformSynchronous},
		{"journal_restart", conformJournalRestart},
		{"failover", conformFailover},
	}
	for _, s := range sdksUnderTest(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, s)
				})
			}
		})
	}
}

// directSDK starts s's executor with no scheduler, the conformance token,
// a record file and flags.
func directSDK(t *testing.T, s sdkUnderTest, flags ...string) (addr, record string) {
	t.Helper()
	addr, record = freeAddr(t), filepath.Join(t.TempDir(), "record")
	startSDK(t, s, addr, []string{"AX_EXECUTOR_TOKEN=" + conformanceToken}, append([]string{"-record", record}, flags...)...)
	return addr, record
}

// conformDedupe: a repeated ticket never runs twice. Repeated while it
// runs, it is accepted and runs once; repeated after, it is answered with
// its result. Another ticket of a task that runs is refused (409).
func conformDedupe(t *testing.T, s sdkUnderTest) {
	addr, record := directSDK(t, s)
	sink := newResultSink(t)
	d := dispatchOf("a", "T1", sink.url, map[string]any{"sleep_ms": 1500})
	code, ans := sdkPost(t, addr, "/dispatch", d)
	if code != 202 || ans["accepted"] != true || ans["boot"] == "" || ans["boot"] == nil {
		t.Fatalf("dispatch: %d %v, want 202 accepted with a boot", code, ans)
	}
	if code, ans := sdkPost(t, addr, "/dispatch", d); code != 202 || ans["accepted"] != true || ans["result"] != nil {
		t.Errorf("repeated while running: %d %v, want 202 accepted without a result", code, ans)
	}
	code, ans = sdkPost(t, addr, "/dispatch", dispatchOf("a", "T2", sink.url, nil))
	if reason, _ := ans["reason"].(string); code != 409 || !strings.Contains(reason, "task a is already running here (ticket T1)") {
		t.Errorf("another ticket of the running task: %d %v, want 409 with the reason", code, ans)
	}
	if rep := sink.wait(t, "T1"); rep["status"] != "success" || rep["instance_id"] != float64(7) {
		t.Errorf("result %v", rep)
	}
	code, ans = sdkPost(t, addr, "/dispatch", d)
	res, _ := ans["result"].(map[string]any)
	if code != 202 || res == nil || res["status"] != "success" || res["ticket"] != "T1" {
		t.Errorf("repeated after: %d %v, want 202 with its result", code, ans)
	}
	if n := recorded(t, record); n["start a T1"] != 1 || n["end a T1"] != 1 || len(n) != 2 {
		t.Errorf("record %v: want T1 run exactly once, T2 never", n)
	}
}

// conformKill: a kill stops the work, whose result says killed; a kill of
// an unknown ticket is refused (404).
func conformKill(t *testing.T, s sdkUnderTest) {
	addr, record := directSDK(t, s)
	sink := newResultSink(t)
	if code, ans := sdkPost(t, addr, "/dispatch", dispatchOf("a", "K1", sink.url, map[string]any{"sleep_ms": 60000})); code != 202 {
		t.Fatalf("dispatch: %d %v", code, ans)
	}
	waitFor(t, func() bool { return recorded(t, record)["start a K1"] == 1 })
	start := time.Now()
	if code, ans := sdkPost(t, addr, "/kill", map[string]any{"ticket": "K1"}); code != 200 || ans["accepted"] != true {
		t.Errorf("kill: %d %v, want 200 accepted", code, ans)
	}
	rep := sink.wait(t, "K1")
	if rep["status"] != "failed" || rep["error"] != "killed" {
		t.Errorf("result of the killed work %v: want failed, killed", rep)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the killed work ended %s after the kill", took)
	}
	if n := recorded(t, record); n["end a K1"] != 0 {
		t.Errorf("record %v: the killed work ran to its end", n)
	}
}

// conformStatus: /status answers done (with the result), running and
// unknown, with the boot of the dispatch's answer.
func conformStatus(t *testing.T, s sdkUnderTest) {
	addr, record := directSDK(t, s)
	sink := newResultSink(t)
	_, first := sdkPost(t, addr, "/dispatch", dispatchOf("a", "S1", sink.url, nil))
	sink.wait(t, "S1")
	sdkPost(t, addr, "/dispatch", dispatchOf("b", "S2", sink.url, map[string]any{"sleep_ms": 60000}))
	waitFor(t, func() bool { return recorded(t, record)["start b S2"] == 1 })
	code, ans := sdkPost(t, addr, "/status", map[string]any{"tickets": []string{"S1", "S2", "S3"}})
	tks, _ := ans["tickets"].(map[string]any)
	state := func(tk string) string { m, _ := tks[tk].(map[string]any); s, _ := m["state"].(string); return s }
	s1, _ := tks["S1"].(map[string]any)
	res, _ := s1["result"].(map[string]any)
	if code != 200 || ans["boot"] != first["boot"] || state("S1") != "done" || res["status"] != "success" ||
		state("S2") != "running" || state("S3") != "unknown" {
		t.Errorf("status: %d %v: want the dispatch's boot %v, S1 done with its result, S2 running, S3 unknown", code, ans, first["boot"])
	}
	sdkPost(t, addr, "/kill", map[string]any{"ticket": "S2"})
}

// conformFull: with one worker and a queue of one, a third task is refused
// (503) with the reason, and /metrics shows the busy worker, the queue and
// the refusal.
func conformFull(t *testing.T, s sdkUnderTest) {
	addr, record := directSDK(t, s, "-core", "1", "-max", "1", "-queue", "1")
	sink := newResultSink(t)
	sdkPost(t, addr, "/dispatch", dispatchOf("a", "F1", sink.url, map[string]any{"sleep_ms": 60000}))
	waitFor(t, func() bool { return recorded(t, record)["start a F1"] == 1 })
	if code, ans := sdkPost(t, addr, "/dispatch", dispatchOf("b", "F2", sink.url, map[string]any{"sleep_ms": 60000})); code != 202 {
		t.Errorf("second dispatch (queued): %d %v, want 202", code, ans)
	}
	code, ans := sdkPost(t, addr, "/dispatch", dispatchOf("c", "F3", sink.url, nil))
	if reason, _ := ans["reason"].(string); code != 503 || ans["accepted"] != false || !strings.HasPrefix(reason, "worker pool full (1 workers busy, 1 of 1 queued)") {
		t.Errorf("third dispatch: %d %v, want 503 worker pool full", code, ans)
	}
	m := metricsOf(t, addr)
	for _, want := range []string{"\nax_executor_workers_active 1\n", "\nax_executor_queue_depth 1\n", "\nax_executor_queue_capacity 1\n",
		"\nax_executor_workers_max 1\n", "\nax_executor_refused_total{reason=\"pool_full\"} 1\n", "# TYPE ax_executor_refused_total counter\n"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q:\n%s", strings.TrimSpace(want), m)
		}
	}
	sdkPost(t, addr, "/kill", map[string]any{"ticket": "F2"})
	sdkPost(t, addr, "/kill", map[string]any{"ticket": "F1"})
	if rep := sink.wait(t, "F2"); !strings.HasPrefix(fmt.Sprint(rep["error"]), "killed before the work started") {
		t.Errorf("the queued work killed: %v, want killed before it started", rep)
	}
	if n := recorded(t, record); n["start b F2"] != 0 || n["start c F3"] != 0 {
		t.Errorf("record %v: refused or killed-in-queue work ran", n)
	}
}

// conformBadInput: each bad request gets the same status, answer shape and
// reason from both SDKs, and nothing runs.
func conformBadInput(t *testing.T, s sdkUnderTest) {
	addr, record := directSDK(t, s)
	good, _ := json.Marshal(dispatchOf("a", "B1", "", nil))
	big, _ := json.Marshal(dispatchOf("a", "B2", "", map[string]any{"pad": strings.Repeat("x", 1<<20)}))
	refusal := []string{"accepted", "reason"}
	for _, c := range []struct {
		name, path, token, ctype, body string
		code                           int
		keys                           []string
		reason                         string // the answer's reason (or error) starts so
	}{
		{"dispatch not JSON", "/dispatch", conformanceToken, "application/json", "{not json", 400, refusal, "malformed dispatch: "},
		{"dispatch empty", "/dispatch", conformanceToken, "application/json", "", 400, refusal, "malformed dispatch: "},
		{"dispatch unknown field", "/dispatch", conformanceToken, "application/json", `{"version":1,"task":"a","ticket":"B3","extra":1}`, 400, refusal, `malformed dispatch: json: unknown field "extra"`},
		{"dispatch wrong type", "/dispatch", conformanceToken, "application/json", `{"version":1,"task":"a","ticket":5}`, 400, refusal, "malformed dispatch: json: cannot unmarshal number into Go struct field Dispatch.ticket"},
		{"dispatch no ticket", "/dispatch", conformanceToken, "application/json", `{"version":1,"task":"a"}`, 400, refusal, "malformed dispatch: ticket and task are required"},
		{"dispatch version 2", "/dispatch", conformanceToken, "application/json", `{"version":2,"task":"a","ticket":"B4"}`, 400, refusal, "protocol version 2: this executor speaks 1"},
		{"dispatch unknown task", "/dispatch", conformanceToken, "application/json", `{"version":1,"task":"zz","ticket":"B5"}`, 404, refusal, `task "zz" is not served here (serving [`},
		{"dispatch file callback", "/dispatch", conformanceToken, "application/json", `{"version":1,"task":"a","ticket":"B6","callback":"file:///etc/passwd"}`, 400, refusal, `malformed dispatch: callback "file:///etc/passwd" is not an http:// or https:// URL`},
		{"dispatch data callback", "/dispatch", conformanceToken, "application/json", `{"version":1,"task":"a","ticket":"B7","callback":"data:,hello"}`, 400, refusal, `malformed dispatch: callback "data:,hello" is not an http:// or https:// URL`},
		{"dispatch nested deep", "/dispatch", conformanceToken, "application/json", strings.Repeat("[", 100000), 400, refusal, "malformed dispatch: "},
		{"dispatch oversized", "/dispatch", conformanceToken, "application/json", string(big), 400, refusal, "malformed dispatch: http: request body too large"},
		{"dispatch without token", "/dispatch", "", "application/json", string(good), 401, refusal, "missing or wrong bearer token"},
		{"dispatch wrong token", "/dispatch", "not-it", "application/json", string(good), 401, refusal, "missing or wrong bearer token"},
		{"dispatch not JSON content", "/dispatch", conformanceToken, "text/plain", string(good), 415, []string{"error"}, "POST /dispatch needs Content-Type: application/json"},
		{"kill unknown ticket", "/kill", conformanceToken, "application/json", `{"ticket":"nope"}`, 404, refusal, "ticket nope is not known here"},
		{"kill malformed", "/kill", conformanceToken, "application/json", `{"tiket":"nope"}`, 400, refusal, "malformed kill"},
		{"kill without token", "/kill", "", "application/json", `{"ticket":"nope"}`, 401, refusal, "missing or wrong bearer token"},
		{"status malformed", "/status", conformanceToken, "application/json", `{"tickets":[]}`, 400, refusal, "malformed status query"},
		{"status without token", "/status", "", "application/json", `{"tickets":["nope"]}`, 401, refusal, "missing or wrong bearer token"},
		{"status unknown ticket", "/status", conformanceToken, "application/json", `{"tickets":["nope"]}`, 200, []string{"boot", "tickets"}, ""},
	} {
		code, ans := sdkCall(t, addr, c.path, c.token, c.ctype, []byte(c.body))
		var keys []string
		for k := range ans {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		msg, _ := ans["reason"].(string)
		if e, ok := ans["error"].(string); ok {
			msg = e
		}
		if code != c.code || strings.Join(keys, ",") != strings.Join(c.keys, ",") || !strings.HasPrefix(msg, c.reason) || (c.code != 200 && ans["accepted"] == true) {
			t.Errorf("%s: %d %v, want %d with keys %v and a reason starting %q", c.name, code, ans, c.code, c.keys, c.reason)
		}
	}
	if _, ans := sdkPost(t, addr, "/status", map[string]any{"tickets": []string{"B1", "B2", "B3", "B4", "B5", "B6", "B7"}}); fmt.Sprint(ans["tickets"]) !=
		"map[B1:map[state:unknown] B2:map[state:unknown] B3:map[state:unknown] B4:map[state:unknown] B5:map[state:unknown] B6:map[state:unknown] B7:map[state:unknown]]" {
		t.Errorf("after the refusals the executor knows tickets: %v", ans)
	}
	if n := recorded(t, record); len(n) != 0 {
		t.Errorf("record %v: a refused dispatch ran", n)
	}
}

// conformMethods: another method on a route is answered 405 with the
// methods it takes (HEAD is GET's), behind the same door; nothing runs.
func conformMethods(t *testing.T, s sdkUnderTest) {
	addr, record := directSDK(t, s)
	good, _ := json.Marshal(dispatchOf("a", "M1", "", nil))
	for _, c := range []struct {
		method, path, ctype string
		code                int
		allow, body         string
	}{
		{"PUT", "/dispatch", "application/json", 405, "POST", "Method Not Allowed\n"},
		{"HEAD", "/dispatch", "", 405, "POST", ""},
		{"GET", "/dispatch", "", 405, "POST", "Method Not Allowed\n"},
		{"DELETE", "/kill", "application/json", 405, "POST", "Method Not Allowed\n"},
		{"PATCH", "/status", "application/json", 405, "POST", "Method Not Allowed\n"},
		{"PUT", "/healthz", "application/json", 405, "GET, HEAD", "Method Not Allowed\n"},
		{"HEAD", "/healthz", "", 200, "", ""},
		{"HEAD", "/metrics", "", 200, "", ""},
		{"PUT", "/dispatch", "text/plain", 415, "", `{"error":`},
		{"PUT", "/nope", "application/json", 404, "", "404 page not found\n"},
	} {
		req, _ := http.NewRequest(c.method, "http://"+addr+c.path, bytes.NewReader(good))
		req.Header.Set("Authorization", "Bearer "+conformanceToken)
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || resp.Header.Get("Allow") != c.allow || !strings.HasPrefix(string(body), c.body) {
			t.Errorf("%s %s: %d Allow %q %q, want %d Allow %q %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), body, c.code, c.allow, c.body)
		}
	}
	if _, ans := sdkPost(t, addr, "/status", map[string]any{"tickets": []string{"M1"}}); fmt.Sprint(ans["tickets"]) != "map[M1:map[state:unknown]]" {
		t.Errorf("after the refusals the executor knows M1: %v", ans)
	}
	if n := recorded(t, record); len(n) != 0 {
		t.Errorf("record %v: a refused request ran", n)
	}
}

// conformOutputs: the outputs a handler gives go back with its result as
// strings (other values as their JSON), a secret's value masked; an output
// the protocol refuses fails the attempt with the rule's words and gives
// nothing.
func conformOutputs(t *testing.T, s sdkUnderTest) {
	addr, record := directSDK(t, s)
	sink := newResultSink(t)
	d := dispatchOf("a", "O1", sink.url, map[string]any{"outputs": map[string]any{
		"rows": 42, "day": "2026-01-02", "meta": map[string]any{"ok": true}, "dsn": "db://u:s3cr3t@h"}})
	d["env"], d["secret_env"] = map[string]string{"PW": "s3cr3t"}, []string{"PW"}
	sdkPost(t, addr, "/dispatch", d)
	rep := sink.wait(t, "O1")
	if want := "map[day:2026-01-02 dsn:db://u:***@h meta:{\"ok\":true} rows:42]"; rep["status"] != "success" || fmt.Sprint(rep["outputs"]) != want {
		t.Errorf("result %v: want success with outputs %s", rep, want)
	}
	sdkPost(t, addr, "/dispatch", dispatchOf("b", "O2", sink.url, map[string]any{"outputs": map[string]any{"1rows": "x", "ok": "y"}}))
	rep = sink.wait(t, "O2")
	want := `outputs: key "1rows" is not a name: use letters, digits and _ (not starting with a digit), as {{ .Upstream.TASK.KEY }} reads it`
	if rep["status"] != "failed" || rep["error"] != want || rep["outputs"] != nil {
		t.Errorf("result %v: want failed with %q and no outputs", rep, want)
	}
	if err := runner.CheckOutputs(map[string]string{"1rows": "x"}); err == nil || err.Error() != want {
		t.Errorf("runner.CheckOutputs says %v, the SDKs %q: one rule, the same words", err, want)
	}
	if n := recorded(t, record); n["end b O2"] != 0 || n["end a O1"] != 1 {
		t.Errorf("record %v: want O1 ended, O2 failed at its outputs", n)
	}
}

// conformEnvSecrets: the work gets the dispatch's env and params; a
// secret's value is masked (***) in the log and the error it reports.
func conformEnvSecrets(t *testing.T, s sdkUnderTest) {
	addr, _ := directSDK(t, s)
	sink := newResultSink(t)
	d := dispatchOf("a", "E1", sink.url, map[string]any{"echo_env": "DB_PASSWORD", "fail": "cannot log in with s3cr3t-pw"})
	d["env"], d["secret_env"] = map[string]string{"DB_PASSWORD": "s3cr3t-pw", "REGION": "cn"}, []string{"DB_PASSWORD"}
	sdkPost(t, addr, "/dispatch", d)
	rep := sink.wait(t, "E1")
	enc, _ := rep["log"].(string)
	logged, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		t.Fatalf("log %q: %v", enc, err)
	}
	lines, err := runner.DecodeLines(logged)
	var text []string
	for _, l := range lines {
		text = append(text, fmt.Sprintf("%s|%s", l.Stream, l.Text))
	}
	all := strings.Join(text, "\n")
	if err != nil || !strings.Contains(all, "log|") || !strings.Contains(all, "msg=env DB_PASSWORD=***") || strings.Contains(all, "s3cr3t") {
		t.Errorf("log records %q (%v): want the env line on stream log, the secret masked", all, err)
	}
	if e, _ := rep["error"].(string); rep["status"] != "failed" || !strings.HasSuffix(e, "cannot log in with ***") {
		t.Errorf("result %v: want failed with the secret masked in the error", rep)
	}
}

// conformSynchronous: a dispatch without a callback is answered with its
// result (200); a caller that hangs up before the result stops the work,
// whose result says so.
func conformSynchronous(t *testing.T, s sdkUnderTest) {
	addr, record := directSDK(t, s)
	code, ans := sdkPost(t, addr, "/dispatch", dispatchOf("a", "Y1", "", nil))
	if code != 200 || ans["ticket"] != "Y1" || ans["status"] != "success" {
		t.Errorf("synchronous dispatch: %d %v, want 200 with its result", code, ans)
	}
	b, _ := json.Marshal(dispatchOf("b", "Y2", "", map[string]any{"sleep_ms": 60000}))
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/dispatch", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+conformanceToken)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // the scheduler hangs up once the work started (or after 30 s: then the case fails below)
		defer cancel()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if data, _ := os.ReadFile(record); strings.Contains(string(data), "start b Y2\n") {
				return
			}
		}
	}()
	if resp, err := http.DefaultClient.Do(req.WithContext(ctx)); err == nil {
		resp.Body.Close()
		t.Fatalf("the hung-up dispatch was answered %d", resp.StatusCode)
	}
	var res map[string]any
	waitFor(t, func() bool {
		_, ans := sdkPost(t, addr, "/status", map[string]any{"tickets": []string{"Y2"}})
		st, _ := ans["tickets"].(map[string]any)["Y2"].(map[string]any)
		res, _ = st["result"].(map[string]any)
		return res != nil
	})
	if res["status"] != "failed" || !strings.HasPrefix(fmt.Sprint(res["error"]), "stopped: the scheduler hung up before the result") {
		t.Errorf("result of the hung-up work %v: want failed, stopped because the scheduler hung up", res)
	}
}

// conformPipeline writes the pipeline of the server cases: tasks a and b
// on the executor (registered), retried once; c, which it serves too.
func conformPipeline(t *testing.T, sleepA int) string {
	t.Helper()
	dir := t.TempDir()
	src := fmt.Sprintf(`pipeline: conf
timezone: UTC
schedule: "@every 1h"
defaults: {timeout: 1m, retry: {count: 1, interval: 1s}}
tasks:
  - {name: a, http: "http://127.0.0.1:1/dispatch", params: {sleep_ms: %d}}
  - {name: b, http: "http://127.0.0.1:1/dispatch", params: {sleep_ms: 100}}
  - {name: c, http: "http://127.0.0.1:1/dispatch"}
`, sleepA)
	if err := os.WriteFile(filepath.Join(dir, "conf.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func triggerTask(t *testing.T, api, task string) {
	t.Helper()
	if code, out, errOut := runAx(t, "trigger", task, "--server", "http://"+api); code != cli.ExitOK {
		t.Fatalf("trigger %s: %d %s %s", task, code, out, errOut)
	}
}

// conformJournalRestart: an executor on its state dir is killed with
// SIGKILL while a runs and b waits in its queue, and restarts: a is
// reported interrupted (and retried by the scheduler under a new ticket),
// b runs once; no ticket runs twice, no result is lost. On the way, `ax
// executors` shows the pool of the heartbeats, and `ax logs` the line b's
// function logged.
func conformJournalRestart(t *testing.T, s sdkUnderTest) {
	api, addr := freeAddr(t), freeAddr(t)
	db := filepath.Join(t.TempDir(), "ax.db")
	startServer(t, db, conformPipeline(t, 60000), "--listen", api) // killed at the end: a's retry still runs
	st := openStore(t, db)
	state, record := filepath.Join(t.TempDir(), "state"), filepath.Join(t.TempDir(), "record")
	flags := []string{"-scheduler", "http://" + api, "-token-file", tokenFileOf(db), "-state", state, "-record", record, "-core", "1", "-max", "1", "-queue", "5"}
	p := startSDK(t, s, addr, nil, flags...)
	waitFor(t, func() bool { exs, _ := st.Executors(context.Background(), "conf.a"); return len(exs) == 1 })
	waitPrimary(t, api)
	triggerTask(t, api, "conf.a")
	waitFor(t, func() bool { return len(recorded(t, record)) == 1 })
	triggerTask(t, api, "conf.b")
	waitFor(t, func() bool { return strings.Contains(metricsOf(t, addr), "\nax_executor_queue_depth 1\n") })
	waitFor(t, func() bool {
		_, out, _ := runAx(t, "executors", "--server", "http://"+api)
		return strings.Contains(out, "1/1 busy, 1/5 queued, 0 refused")
	})
	first := instancesOf(t, st, "conf.a")[0].Ticket

	p.crash()
	startSDK(t, s, addr, nil, flags...)
	waitFor(t, func() bool { ins := instancesOf(t, st, "conf.b"); return len(ins) == 1 && ins[0].State.Terminal() })
	var a axtype.Instance // its retry sleeps as long as its first attempt: it is judged once it started
	waitFor(t, func() bool {
		a = instancesOf(t, st, "conf.a")[0]
		return a.Ticket != first && recorded(t, record)["start a "+a.Ticket] == 1
	})
	b := instancesOf(t, st, "conf.b")[0]
	if b.State != axtype.Success || b.Counted != 1 {
		t.Errorf("b %+v: want success at its first attempt (it waited in the queue across the restart)", b)
	}
	if a.Counted != 2 || a.State != axtype.Running {
		t.Errorf("a %+v: want its first attempt failed as interrupted and its retry running under a new ticket", a)
	}
	hist, _ := st.History(context.Background(), store.LogFilter{InstanceID: a.ID})
	var why []string
	for _, h := range hist {
		why = append(why, h.Reason)
	}
	if !strings.Contains(strings.Join(why, "\n"), "interrupted: the executor process ended while this work ran") {
		t.Errorf("a's history does not say its work was interrupted:\n%s", strings.Join(why, "\n"))
	}
	n := recorded(t, record)
	for line, count := range n {
		if count != 1 {
			t.Errorf("record: %q %d times: a ticket ran twice", line, count)
		}
	}
	if n["start b "+b.Ticket] != 1 || n["end b "+b.Ticket] != 1 || n["start a "+first] != 1 || n["end a "+first] != 0 {
		t.Errorf("record %v: want b's ticket %s run once, a's first ticket %s started once and never ended", n, b.Ticket, first)
	}
	code, out, errOut := runAx(t, "logs", "conf.b", "--server", "http://"+api)
	if code != cli.ExitOK || !strings.Contains(out, "msg=working ticket="+b.Ticket) {
		t.Errorf("ax logs conf.b: %d %q %q: want the line its function logged", code, out, errOut)
	}
}

// conformFailover: the primary dies (SIGKILL) while the executor runs a;
// its result goes to the other server, which took over, and is applied
// once: a succeeds at its first attempt, its ticket run once.
func conformFailover(t *testing.T, s sdkUnderTest) {
	pa, pb, addr := freeAddr(t), freeAddr(t), freeAddr(t)
	db := filepath.Join(t.TempDir(), "ax.db")
	dir := conformPipeline(t, 2500)
	st := openStore(t, db)
	a := startServer(t, db, dir, "--holder", "a", "--listen", pa)
	waitPrimary(t, pa)
	startServer(t, db, dir, "--holder", "b", "--listen", pb)
	record := filepath.Join(t.TempDir(), "record")
	startSDK(t, s, addr, nil, "-scheduler", "http://"+pa+",http://"+pb, "-token-file", tokenFileOf(db), "-record", record)
	waitFor(t, func() bool { exs, _ := st.Executors(context.Background(), "conf.a"); return len(exs) == 1 })
	triggerTask(t, pa, "conf.a")
	waitFor(t, func() bool { return len(recorded(t, record)) == 1 })
	a.crash(t)
	waitFor(t, func() bool { ins := instancesOf(t, st, "conf.a"); return len(ins) == 1 && ins[0].State.Terminal() })
	in := instancesOf(t, st, "conf.a")[0]
	n := recorded(t, record)
	if in.State != axtype.Success || in.Counted != 1 || n["start a "+in.Ticket] != 1 || n["end a "+in.Ticket] != 1 || len(n) != 2 {
		t.Errorf("instance %+v, record %v: want success at the first attempt, its ticket run once", in, n)
	}
	if l := lease(t, st); l.Holder != "b" {
		t.Errorf("lease %+v: want b primary after a died", l)
	}
}

// TestPythonSDKInstalls: `pip install ./sdk/python` builds and installs the
// SDK with no package index (its build backend is in the tree, standard
// library only), and the installed module imports.
func TestPythonSDKInstalls(t *testing.T) {
	t.Parallel()
	var py string
	for _, s := range sdksUnderTest(t) {
		if s.name == "python" {
			py = s.argv[0]
		}
	}
	if py == "" {
		t.Skip("python3 is not installed (in CI that fails TestSDKConformance)")
	}
	if out, err := exec.Command(py, "-m", "pip", "--version").CombinedOutput(); err != nil {
		t.Skipf("python3 has no pip: %v %s", err, out)
	}
	target := t.TempDir()
	cmd := exec.Command(py, "-m", "pip", "install", "--quiet", "--no-index", "--no-cache-dir", "--target", target, "../../sdk/python")
	cmd.Env = append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pip install ./sdk/python: %v\n%s", err, out)
	}
	imp := exec.Command(py, "-c", "import ax_executor, sys; sys.stdout.write(ax_executor.__file__)")
	imp.Dir, imp.Env = t.TempDir(), append(os.Environ(), "PYTHONPATH="+target)
	if out, err := imp.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), target) {
		t.Errorf("import the installed SDK: %v %s, want it from %s", err, out, target)
	}
}
