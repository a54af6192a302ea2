package api

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/ax-sched/ax/api/apitest"
)

// otherPipeline is a second pipeline beside shop, for tokens of another
// pipeline.
const otherPipeline = `pipeline: other
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: a, function: noop}
  - {name: b, function: noop}
`

// pageOf reads path and returns its next_page, failing when it has none.
func pageOf(t *testing.T, e *apitest.Env, path string) string {
	t.Helper()
	code, body := e.Call("GET", path, "")
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	v := decodeJSON[struct {
		NextPage string `json:"next_page"`
	}](t, body)
	if v.NextPage == "" {
		t.Fatalf("GET %s: no next_page in %s", path, body)
	}
	return v.NextPage
}

// TestPagesReadOn: the pages of a pipeline's tasks and of a run's
// instances, read one after the other with next_page, give each task
// once, in order, and the last page has no next_page.
func TestPagesReadOn(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Pipeline: bigPipeline("big", 7)})
	if code, body := e.Call("POST", "/api/v1/pipelines/big/trigger", `{}`); code != 200 {
		t.Fatalf("trigger: %d %s", code, body)
	}
	var want []string
	for i := range 7 {
		want = append(want, fmt.Sprintf("t%06d", i))
	}
	for _, c := range []struct {
		name, path string
		names      func(string) ([]string, string)
	}{
		{"pipeline tasks", "/api/v1/pipelines/big?limit=3", func(body string) ([]string, string) {
			p := decodeJSON[Pipeline](t, body)
			var out []string
			for _, tv := range p.Tasks {
				out = append(out, tv.Name)
			}
			if p.TaskCount != 7 {
				t.Errorf("task_count %d, want 7", p.TaskCount)
			}
			return out, p.NextPage
		}},
		{"run instances", "/api/v1/runs/1?limit=3", func(body string) ([]string, string) {
			r := decodeJSON[RunDetail](t, body)
			var out []string
			for _, in := range r.Instances {
				out = append(out, strings.TrimPrefix(in.TaskID, "big."))
				if in.Reason != "awaiting approval" {
					t.Errorf("instance %s: reason %q, want awaiting approval (judged now)", in.TaskID, in.Reason)
				}
			}
			return out, r.NextPage
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			path := c.path
			for pages := 0; ; pages++ {
				if pages > 5 {
					t.Fatalf("more than 5 pages of 3 for 7 tasks: %v", got)
				}
				code, body := e.Call("GET", path, "")
				if code != 200 {
					t.Fatalf("GET %s: %d %s", path, code, body)
				}
				names, next := c.names(body)
				got = append(got, names...)
				if next == "" {
					break
				}
				path = c.path + "&page=" + url.QueryEscape(next)
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("pages gave %v, want %v", got, want)
			}
		})
	}
}

// TestPipelineSummaryHasNoTasks: summary=true gives the zone and the
// count, and no task, edge or layer.
func TestPipelineSummaryHasNoTasks(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Pipeline: apitest.GridPipeline})
	code, body := e.Call("GET", "/api/v1/pipelines/shop?summary=true", "")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	p := decodeJSON[Pipeline](t, body)
	if p.Timezone != "Asia/Shanghai" || p.TaskCount != 2 || len(p.Tasks)+len(p.Edges)+len(p.Layers) != 0 || p.Latest != nil {
		t.Errorf("summary: zone %q, task_count %d, %d tasks, %d edges, %d layers, latest run %v; want Asia/Shanghai, 2, and none listed",
			p.Timezone, p.TaskCount, len(p.Tasks), len(p.Edges), len(p.Layers), p.Latest)
	}
	// The list's summary names the pipelines without their runs.
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/sync/trigger", ""); code != 200 {
		t.Fatalf("trigger: %d %s", code, body)
	}
	e.WaitState("shop.sync", "SUCCESS")
	_, body = e.Call("GET", "/api/v1/pipelines?summary=true", "")
	if ps := decodeJSON[[]PipelineItem](t, body); len(ps) != 1 || ps[0].Timezone != "Asia/Shanghai" || ps[0].Tasks != 2 || ps[0].Latest != nil {
		t.Errorf("pipelines' summary: %s, want shop in Asia/Shanghai with 2 tasks and no run", body)
	}
	_, body = e.Call("GET", "/api/v1/pipelines", "")
	if ps := decodeJSON[[]PipelineItem](t, body); len(ps) != 1 || ps[0].Latest == nil {
		t.Errorf("pipelines: %s, want shop with its latest run", body)
	}
}

// TestPageBadInput: malformed tokens, page sizes out of range, and tokens
// of another pipeline, run or filter are each refused with a 400 naming
// the parameter, and nothing changes.
func TestPageBadInput(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Others: []string{otherPipeline}})
	for range 2 {
		if code, body := e.Call("POST", "/api/v1/pipelines/shop/trigger", `{"hold": false}`); code != 200 {
			t.Fatalf("trigger: %d %s", code, body)
		}
		e.WaitState("shop.clean", "SUCCESS")
	}
	shopPage := pageOf(t, e, "/api/v1/pipelines/shop?limit=1")
	filteredPage := pageOf(t, e, "/api/v1/pipelines/shop?limit=1&task=s")
	run1Page := pageOf(t, e, "/api/v1/runs/1?limit=1")
	stateless := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	before := e.State()
	for _, c := range []struct {
		name, path, want string
	}{
		{"malformed token", "/api/v1/pipelines/shop?page=garbage", `page="garbage": not a page token of this server`},
		{"token not base64", "/api/v1/runs/1?page=%25%25", `page="%%": not a page token`},
		{"token of another version", "/api/v1/pipelines/shop?page=" + stateless("p9.abc.sync"), "not a page token of this server"},
		{"token without a position", "/api/v1/pipelines/shop?page=" + stateless("p1.abc."), "not a page token of this server"},
		{"huge token", "/api/v1/pipelines/shop?page=" + strings.Repeat("A", 5000), "…\": not a page token"},
		{"negative page size", "/api/v1/pipelines/shop?limit=-1", `limit="-1": give a whole number from 1 to 1000`},
		{"zero page size", "/api/v1/runs/1?limit=0", `limit="0": give a whole number from 1 to 1000`},
		{"huge page size", "/api/v1/pipelines/shop?limit=1000001", `limit="1000001": give a whole number from 1 to 1000`},
		{"page size not a number", "/api/v1/runs/1?limit=ten", `limit="ten": give a whole number`},
		{"token of another pipeline", "/api/v1/pipelines/other?page=" + shopPage, "the token belongs to another query"},
		{"token of another filter", "/api/v1/pipelines/shop?page=" + filteredPage, "the token belongs to another query"},
		{"token of a pipeline on a run", "/api/v1/runs/1?page=" + shopPage, "the token belongs to another query"},
		{"token of another run", "/api/v1/runs/2?page=" + run1Page, "the token belongs to another query"},
		{"token of another state filter", "/api/v1/runs/1?state=success&page=" + run1Page, "the token belongs to another query"},
		{"summary with a page size", "/api/v1/pipelines/shop?summary=true&limit=5", "summary=true lists no tasks"},
		{"unknown state", "/api/v1/runs/1?state=done", `state="done": not a state`},
		{"summary not a boolean", "/api/v1/pipelines?summary=maybe", `summary="maybe": give true or false`},
		{"unknown parameter", "/api/v1/runs/1?pgae=x", `unknown query parameter "pgae" (did you mean "page"?)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := e.Call("GET", c.path, "")
			if msg := decodeJSON[ErrorBody](t, body).Error; code != 400 || !strings.Contains(msg, c.want) {
				t.Errorf("GET %s: %d %s, want 400 with %q", c.path, code, msg, c.want)
			}
		})
	}
	if after := e.State(); after != before {
		t.Errorf("refused reads changed the store:\nbefore %s\nafter  %s", before, after)
	}
}
