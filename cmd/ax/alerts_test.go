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

	"github.com/ax-sched/ax/engine"
)

func TestParseAlertRoute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, spec string
		want       alertRoute // without hook
		err        string
	}{
		{"bare URL", "http://h/x", alertRoute{url: "http://h/x"}, ""},
		{"routed", "kind=task_failed|sla_missed,group=etl|bi,url=https://h/x,format=slack",
			alertRoute{kinds: []string{"task_failed", "sla_missed"}, groups: []string{"etl", "bi"}, url: "https://h/x", slack: true}, ""},
		{"comma in URL", "url=https://h/x?a=1,2,kind=leader_change", alertRoute{url: "https://h/x?a=1,2", kinds: []string{"leader_change"}}, ""},
		{"unknown kind", "kind=task_fail,url=http://h/x", alertRoute{}, `kind "task_fail" is not an alert kind: use one of breaker_open`},
		{"suggestion", "kind=sla_mised,url=http://h/x", alertRoute{}, `(did you mean "sla_missed"?)`},
		{"no url", "kind=task_failed", alertRoute{}, "no url=: say where to send the alerts"},
		{"bad url", "url=ftp://h/x", alertRoute{}, `url "ftp://h/x": give an http:// or https:// URL`},
		{"bad format", "url=http://h/x,format=xml", alertRoute{}, `format "xml": use json or slack`},
		{"unknown key", "kinds=task_failed,url=http://h/x", alertRoute{}, `"kinds=task_failed" is not a setting`},
		{"kind twice", "kind=task_failed,kind=sla_missed,url=http://h/x", alertRoute{}, `kind= is given twice: write one kind=a|b`},
		{"url twice", "url=http://h/x,url=http://h/y", alertRoute{}, `url= is given twice: one route has one url (repeat --alert-webhook for another)`},
		{"group twice", "group=a,url=http://h/x,group=b", alertRoute{}, `group= is given twice`},
		{"bare word", "hooks.example", alertRoute{}, `url "hooks.example": give an http:// or https:// URL`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseAlertRoute(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseAlertRoute(%q) = %v, want an error containing %q", tc.spec, err, tc.err)
				}
				return
			}
			if err != nil || strings.Join(got.kinds, "|") != strings.Join(tc.want.kinds, "|") || strings.Join(got.groups, "|") != strings.Join(tc.want.groups, "|") ||
				got.url != tc.want.url || got.slack != tc.want.slack {
				t.Errorf("parseAlertRoute(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
			}
		})
	}
}

func TestAlertRouteTakes(t *testing.T) {
	t.Parallel()
	r := alertRoute{kinds: []string{"task_failed"}, groups: []string{"etl"}}
	for _, tc := range []struct {
		a    engine.Alert
		want bool
	}{
		{engine.Alert{Kind: "task_failed", Group: "etl"}, true},
		{engine.Alert{Kind: "task_failed", Group: "bi"}, false},
		{engine.Alert{Kind: "sla_missed", Group: "etl"}, false},
		{engine.Alert{Kind: "task_failed"}, false}, // no task, no group: a group route does not take it
	} {
		if got := r.takes(tc.a); got != tc.want {
			t.Errorf("takes(%s, group %q) = %v, want %v", tc.a.Kind, tc.a.Group, got, tc.want)
		}
	}
	if !(alertRoute{}).takes(engine.Alert{Kind: "leader_change"}) {
		t.Error("a route without kind or group does not take every alert")
	}
}

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
	if code != exitUsage || !strings.Contains(errOut, `kind "task_fail" is not an alert kind`) || !strings.Contains(errOut, `did you mean "task_failed"?`) {
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
