package api

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/api/apitest"
)

// bigPipeline is a pipeline of n manual gates in Asia/Shanghai: a run of
// it holds n instances awaiting approval, and nothing runs on its own.
func bigPipeline(name string, n int) string {
	var src strings.Builder
	src.WriteString("pipeline: " + name + "\ntimezone: Asia/Shanghai\nschedule: \"0 0 1 1 *\"\ndefaults: {function: noop}\ntasks:\n")
	for i := range n {
		fmt.Fprintf(&src, "  - {name: t%06d, manual: true}\n", i)
	}
	return src.String()
}

// bigReads are the reads the CLI and the console make of a pipeline, of
// its task t000001 and of its run 1: ax status, history, logs and explain
// (the summary for the zone), the console's pipelines, pipeline, grid,
// run and task pages.
var bigReads = []string{
	"/api/v1/pipelines",
	"/api/v1/pipelines?summary=true",
	"/api/v1/pipelines?name=big",
	"/api/v1/pipelines/big?summary=true",
	"/api/v1/pipelines/big",
	"/api/v1/pipelines/big/runs?recent=true&limit=5",
	"/api/v1/pipelines/big/runs?limit=15",
	"/api/v1/runs/1",
	"/api/v1/pipelines/big/tasks/t000001",
	"/api/v1/pipelines/big/tasks/t000001/explain",
	"/api/v1/instances?task=big.t000001&limit=20",
	"/api/v1/instances?pipeline=big&limit=1000",
	"/api/v1/history?task=big.t000001&newest=true&limit=30",
}

// setupBig serves a pipeline "big" of n tasks (and another of other tasks
// beside it) with one run of big.
func setupBig(t testing.TB, n, other int) *apitest.Env {
	t.Helper()
	o := apitest.Opts{Pipeline: bigPipeline("big", n)}
	if other > 0 {
		o.Others = []string{bigPipeline("other", other)}
	}
	e := setupAPI(t, o)
	if code, body := e.Call("POST", "/api/v1/pipelines/big/trigger", `{}`); code != 200 {
		t.Fatalf("trigger: %d %s", code, body)
	}
	return e
}

// TestBigPipelineReadsAreBounded: with a run of a pipeline of 3,000
// tasks, no read the CLI or the console makes answers more than 1 MB
// (a page of tasks or instances and the run's summary), where the whole
// pipeline and the whole run were 2.8 and 1.4 MB.
func TestBigPipelineReadsAreBounded(t *testing.T) {
	t.Parallel()
	const n, most = 3000, 1 << 20
	e := setupBig(t, n, 0)
	for _, path := range bigReads {
		code, body := e.Call("GET", path, "")
		if code != 200 {
			t.Errorf("GET %s: %d %.300s", path, code, body)
			continue
		}
		if len(body) > most {
			t.Errorf("GET %s: %d bytes, want at most %d", path, len(body), most)
		}
	}
	_, body := e.Call("GET", "/api/v1/pipelines/big", "")
	if p := decodeJSON[Pipeline](t, body); len(p.Tasks) != PageDefault || p.TaskCount != n || p.NextPage == "" ||
		p.Latest == nil || p.Latest.AwaitingCount != n || len(p.Latest.Awaiting) != RunListed {
		t.Errorf("pipeline page: %d tasks of %d, next_page %q, latest run %+v; want %d of %d, a next page, %d gates awaiting of which %d named",
			len(p.Tasks), p.TaskCount, p.NextPage, p.Latest, PageDefault, n, n, RunListed)
	}
}

// BenchmarkBigPipelineReads measures, with 100,000 tasks on the server (a
// pipeline of 70,000, the most a definition of this shape holds in the
// store's 16 MB, beside one of 30,000) and a run of the big one, the
// slowest and the largest of the reads the CLI and the console make,
// against reading the whole pipeline, page after page of 1000 (what one
// read of it used to answer), in the same run.
func BenchmarkBigPipelineReads(b *testing.B) {
	e := setupBig(b, 70000, 30000)
	var worstMS, worstMB, allMS, allMB float64
	for b.Loop() {
		worstMS, worstMB, allMS, allMB = 0, 0, 0, 0
		for _, path := range bigReads {
			start := time.Now()
			code, body := e.Call("GET", path, "")
			ms := float64(time.Since(start).Microseconds()) / 1000
			if code != 200 {
				b.Fatalf("GET %s: %d %.300s", path, code, body)
			}
			if testing.Verbose() {
				b.Logf("GET %s: %.1f ms, %d bytes", path, ms, len(body))
			}
			worstMS, worstMB = max(worstMS, ms), max(worstMB, float64(len(body))/1e6)
		}
		path := "/api/v1/pipelines/big?limit=1000"
		for path != "" {
			start := time.Now()
			code, body := e.Call("GET", path, "")
			allMS += float64(time.Since(start).Microseconds()) / 1000
			allMB += float64(len(body)) / 1e6
			if code != 200 {
				b.Fatalf("GET %s: %d %.300s", path, code, body)
			}
			p := decodeJSON[Pipeline](b, body)
			path = ""
			if p.NextPage != "" {
				path = "/api/v1/pipelines/big?limit=1000&page=" + url.QueryEscape(p.NextPage)
			}
		}
	}
	b.ReportMetric(worstMS, "worst-ms")
	b.ReportMetric(worstMB, "worst-MB")
	b.ReportMetric(allMS, "all-pages-ms")
	b.ReportMetric(allMB, "all-pages-MB")
	b.ReportMetric(worstMB/allMB, "MB-ratio")
}

// TestZoneOfReadsTheSummary: the CLI learns a pipeline's zone (ax
// history, logs, explain) from a few kilobytes, not from the pipeline of
// 3,000 tasks (2.7 MB) it used to read.
func TestZoneOfReadsTheSummary(t *testing.T) {
	t.Parallel()
	e := setupBig(t, 3000, 0)
	var read atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, body := e.Call(r.Method, r.URL.RequestURI(), "")
		read.Add(int64(len(body)))
		w.WriteHeader(code)
		io.WriteString(w, body)
	}))
	defer proxy.Close()
	loc, err := ZoneOf(t.Context(), NewClient(proxy.URL, "", "operator:test"), "big", false)
	if err != nil || loc.String() != "Asia/Shanghai" {
		t.Fatalf("zone of big: %v, %v; want Asia/Shanghai", loc, err)
	}
	if n := read.Load(); n > 64<<10 {
		t.Errorf("the zone took %d bytes to learn, want at most %d", n, 64<<10)
	}
}
