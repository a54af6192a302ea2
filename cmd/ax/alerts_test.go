package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ax-sched/ax/cli"
)

// TestServerAlertRoutes: a real server sends each alert to the routes that
// take it, by kind and group, one of them in Slack's format; a bad route
// stops the server before it opens its store.
func TestServerAlertRoutes(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		got = map[string][]map[string]any{}
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &v) == nil {
			mu.Lock()
			got[r.URL.Path] = append(got[r.URL.Path], v)
			mu.Unlock()
		}
	}))
	defer hook.Close()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "p.yaml"), `pipeline: p
group: etl
timezone: UTC
schedule: "@every 1s"
tasks:
  - {name: bad, command: ["false"]}
`)
	write(t, filepath.Join(dir, "q.yaml"), `pipeline: q
group: bi
timezone: UTC
schedule: "@every 1s"
tasks:
  - {name: bad, command: ["false"]}
`)
	db := filepath.Join(dir, "ax.db")
	// Bad routes: refused, nothing started.
	code, _, errOut := runAx(t, "server", "--store", db, "--pipelines", dir, "--listen", "", "--alert-webhook", "kind=task_fail,url="+hook.URL)
	if code != cli.ExitUsage || !strings.Contains(errOut, `kind "task_fail" is not an alert kind`) || !strings.Contains(errOut, `did you mean "task_failed"?`) {
		t.Errorf("bad route: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("a server refused for a bad route created its store (%v)", err)
	}
	srv := startServer(t, db, dir,
		"--alert-webhook", "kind=task_failed,group=etl,url="+hook.URL+"/etl",
		"--alert-webhook", "kind=task_failed,group=bi,url="+hook.URL+"/slack,format=slack",
		"--alert-webhook", "kind=leader_change,url="+hook.URL+"/leader")
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got["/etl"]) > 0 && len(got["/slack"]) > 0 })
	srv.stop(t)
	mu.Lock()
	defer mu.Unlock()
	for _, a := range got["/etl"] {
		if a["kind"] != "task_failed" || a["task"] != "p.bad" || a["group"] != "etl" {
			t.Errorf("/etl got %v", a)
		}
	}
	for _, m := range got["/slack"] {
		text, _ := m["text"].(string)
		if !strings.Contains(text, "*task_failed* `q.bad`") || m["attachments"] == nil {
			t.Errorf("/slack got %v, want a Slack message about q.bad", m)
		}
	}
	if n := len(got["/leader"]); n != 0 {
		t.Errorf("leader_change sent %d time(s) on the first start of a store", n)
	}
}
