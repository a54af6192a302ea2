package api

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// TestClientCallsTableRoutes: every method of the typed client reaches,
// through a mux built from the route table alone, the route it names, with
// its path parameters filled (names with / and spaces included); and every
// route of the table has a method, but those only the console reads.
func TestClientCallsTableRoutes(t *testing.T) {
	t.Parallel()
	var got string
	called := map[string]bool{}
	mux := http.NewServeMux()
	for _, r := range adminRoutes() {
		mux.HandleFunc(r.method+" "+r.path, func(w http.ResponseWriter, req *http.Request) {
			got = req.Pattern + " " + req.PathValue("pipeline") + req.PathValue("task") + req.PathValue("group") + req.PathValue("id") + req.PathValue("run")
			w.Write([]byte("null")) //nolint:errcheck // the test reads what was asked, not what was answered
		})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, ctx := NewClient(srv.URL, "", "test"), context.Background()
	p, task := "da/ily", "lo ad"
	apply := func(req engine.Request) func() error {
		return func() error { _, _, err := c.Apply(ctx, req, "", "why"); return err }
	}
	for _, tc := range []struct {
		want string
		call func() error
	}{
		{"GET /api/v1/status ", func() error { _, _, err := c.Status(ctx); return err }},
		{"GET /api/v1/pipelines ", func() error { _, err := c.Pipelines(ctx, p); return err }},
		{"GET /api/v1/pipelines/{pipeline} " + p, func() error { _, err := c.PipelineSummary(ctx, p); return err }},
		{"GET /api/v1/pipelines/{pipeline}/runs " + p, func() error { _, err := c.RecentRuns(ctx, p, 5); return err }},
		{"GET /api/v1/pipelines/{pipeline}/tasks/{task} " + p + task, func() error { _, err := c.Task(ctx, p, task); return err }},
		{"GET /api/v1/pipelines/{pipeline}/tasks/{task}/explain " + p + task, func() error { _, _, err := c.Explain(ctx, p, task, true); return err }},
		{"GET /api/v1/instances ", func() error {
			_, err := c.Instances(ctx, InstanceQuery{Task: p + "." + task, Run: 3, Ran: true})
			return err
		}},
		{"GET /api/v1/history ", func() error { _, err := c.History(ctx, p+"."+task, 10); return err }},
		{"GET /api/v1/actions ", func() error { _, err := c.Actions(ctx, p+"."+task, 10); return err }},
		{"GET /api/v1/instances/{id}/logs 7", func() error { _, _, err := c.Logs(ctx, 7, p+"."+task, 2); return err }},
		{"GET /api/v1/instances/{id}/logs 8", func() error { return c.FollowLogs(ctx, 8, p+"."+task, 0, func([]byte) error { return nil }) }},
		{"GET /api/v1/executors ", func() error { _, _, err := c.Executors(ctx); return err }},
		{"GET /api/v1/limits ", func() error { _, _, err := c.Limits(ctx); return err }},
		{"PUT /api/v1/limits ", func() error { _, _, err := c.SetLimits(ctx, LimitsChange{Reason: "why"}); return err }},
		{"GET /api/v1/reload ", func() error { _, err := c.Reload(ctx, []string{"a.b"}); return err }},
		{"GET /api/v1/prune ", func() error { _, err := c.PruneDry(ctx, "30d"); return err }},
		{"POST /api/v1/prune ", func() error { _, err := c.PruneNow(ctx); return err }},
		{"GET /api/v1/backfills ", func() error { _, _, err := c.Backfills(ctx); return err }},
		{"POST /api/v1/backfills ", func() error { _, _, err := c.StartBackfill(ctx, BackfillRequest{Pipeline: p}); return err }},
		{"GET /api/v1/backfills/{id} 4", func() error { _, _, err := c.Backfill(ctx, 4); return err }},
		{"POST /api/v1/backfills/{id}/cancel 4", func() error { _, _, err := c.CancelBackfill(ctx, 4); return err }},
		{"POST /api/v1/backfills/{id}/resume 4", func() error { _, _, err := c.ResumeBackfill(ctx, 4); return err }},
		{"POST /api/v1/backfills/{id}/approve 4", apply(engine.ApproveBackfill{Backfill: 4})},
		{"POST /api/v1/pipelines/{pipeline}/tasks/{task}/pause " + p + task, apply(engine.Pause{Scope: store.ScopeTask, Target: p + "." + task})},
		{"POST /api/v1/pipelines/{pipeline}/tasks/{task}/resume " + p + task, apply(engine.Resume{Scope: store.ScopeTask, Target: p + "." + task})},
		{"POST /api/v1/pipelines/{pipeline}/pause " + p, apply(engine.Pause{Scope: store.ScopePipeline, Target: p})},
		{"POST /api/v1/pipelines/{pipeline}/resume " + p, apply(engine.Resume{Scope: store.ScopePipeline, Target: p})},
		{"POST /api/v1/groups/{group}/pause etl", apply(engine.Pause{Scope: store.ScopeGroup, Target: "etl"})},
		{"POST /api/v1/groups/{group}/resume etl", apply(engine.Resume{Scope: store.ScopeGroup, Target: "etl"})},
		{"POST /api/v1/pipelines/{pipeline}/tasks/{task}/trigger " + p + task, apply(engine.Trigger{Target: p + "." + task})},
		{"POST /api/v1/pipelines/{pipeline}/trigger " + p, apply(engine.Trigger{Target: p})},
		{"POST /api/v1/pipelines/{pipeline}/tasks/{task}/mark " + p + task, apply(engine.Mark{Target: p + "." + task, Run: 2})},
		{"POST /api/v1/instances/{id}/mark 9", apply(engine.Mark{Instance: 9})},
		{"POST /api/v1/pipelines/{pipeline}/tasks/{task}/kill " + p + task, apply(engine.Kill{Target: p + "." + task})},
		{"POST /api/v1/instances/{id}/kill 9", apply(engine.Kill{Instance: 9})},
		{"POST /api/v1/pipelines/{pipeline}/tasks/{task}/rerun " + p + task, apply(engine.Rerun{Target: p + "." + task})},
		{"POST /api/v1/instances/{id}/rerun 9", apply(engine.Rerun{Instance: 9})},
		{"POST /api/v1/runs/{run}/rerun 5", apply(engine.Rerun{Run: 5})},
		{"POST /api/v1/runs/{run}/cancel 5", apply(engine.Cancel{Run: 5})},
	} {
		got = ""
		if err := tc.call(); err != nil {
			t.Errorf("%s: %v", tc.want, err)
		}
		if got != tc.want {
			t.Errorf("called %q; want %q", got, tc.want)
		}
		if f := strings.Fields(got); len(f) >= 2 {
			called[f[0]+" "+f[1]] = true
		}
	}
	// Every route has its method, but those only the console reads.
	consoleOnly := map[string]bool{"GET /api/v1/session": true, "POST /api/v1/session": true, "DELETE /api/v1/session": true, "GET /api/v1/runs/{run}": true}
	for _, r := range adminRoutes() {
		if k := r.method + " " + r.path; !called[k] && !consoleOnly[k] {
			t.Errorf("%s has no method of Client (or say here that only the console calls it)", k)
		}
	}
}

// TestApplyRefusesABadTaskAndSendsNothing: a task named otherwise than
// PIPELINE.TASK is refused before anything is sent.
func TestApplyRefusesABadTaskAndSendsNothing(t *testing.T) {
	t.Parallel()
	sent := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { sent = true }))
	defer srv.Close()
	_, _, err := NewClient(srv.URL, "", "test").Apply(context.Background(), engine.Kill{Target: "daily"}, "", "")
	if err == nil || err.Error() != `"daily": write PIPELINE.TASK` || sent {
		t.Errorf("Apply(kill daily) = %v, sent %v; want the refusal %q and nothing sent", err, sent, `"daily": write PIPELINE.TASK`)
	}
}

// TestNoRouteOutsideAPI: no Go source outside this package spells a route
// of the API; the client's methods are the one way to call it. Tests may
// (they probe the server's HTTP as a foreign client would), and so may the
// executor SDK (runner/executor: the executor's side of the protocol,
// which must not pull in the scheduler).
func TestNoRouteOutsideAPI(t *testing.T) {
	t.Parallel()
	skip := map[string]bool{"api": true, filepath.Join("runner", "executor"): true}
	var bad []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		if d.IsDir() && (skip[rel] || strings.HasPrefix(d.Name(), ".")) && rel != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"/api/v1/`) {
				bad = append(bad, fmt.Sprintf("%s:%d: %s", rel, i+1, strings.TrimSpace(line)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("routes spelled outside package api (call a method of api.Client instead):\n%s", strings.Join(bad, "\n"))
	}
}
