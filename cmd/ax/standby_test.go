package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/ax-sched/ax/cli"
)

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestStandbyServerAPI runs two real ax servers on one SQLite file: the
// standby posts a leader_change alert to --alert-webhook when it takes over
// (the first primary, on a new store, posts none); the standby
// answers reads and refuses writes with the primary's URL, which the CLI
// shows.
func TestStandbyServerAPI(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		alerts []map[string]any
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a map[string]any
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &a) == nil {
			mu.Lock()
			alerts = append(alerts, a)
			mu.Unlock()
		}
	}))
	defer hook.Close()
	db := t.TempDir() + "/ax.db"
	dir, _ := e2ePipeline(t)
	pa, pb := freeAddr(t), freeAddr(t)
	a := startServer(t, db, dir, "--holder", "a", "--listen", pa, "--alert-webhook", hook.URL)
	leaderChanges := func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		var out []map[string]any
		for _, al := range alerts {
			if al["kind"] == "leader_change" {
				out = append(out, al)
			}
		}
		return out
	}
	st := openStore(t, db)
	waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder == "a" })
	b := startServer(t, db, dir, "--holder", "b", "--listen", pb, "--alert-webhook", hook.URL)
	waitFor(t, func() bool { out, _ := os.ReadFile(b.log.Name()); return strings.Contains(string(out), "msg=standby") })

	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("http://" + pb + "/api/v1/pipelines/e2e"); code != 200 || !strings.Contains(body, `"name": "e2e"`) {
		t.Errorf("read on the standby: %d %s", code, body)
	}
	if code, body := get("http://" + pb + "/readyz"); code != 200 || !strings.Contains(body, `"role": "standby"`) {
		t.Errorf("standby readyz: %d %s", code, body)
	}
	if code, body := get("http://" + pa + "/readyz"); code != 200 || !strings.Contains(body, `"role": "primary"`) {
		t.Errorf("primary readyz: %d %s", code, body)
	}
	waitFor(t, func() bool { // the primary records its URL within a second of leading
		resp, err := http.Post("http://"+pb+"/api/v1/pipelines/e2e/tasks/record/pause", "application/json", nil)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 503 && strings.Contains(string(body), `"primary": "http://`+pa+`"`)
	})
	code, _, errOut := runAx(t, "pause", "e2e.record", "--server", "http://"+pb)
	if code != cli.ExitFailed || !strings.Contains(errOut, "standby") || !strings.Contains(errOut, "(try --server http://"+pa+")") {
		t.Errorf("CLI write to the standby: exit %d %s", code, errOut)
	}
	code, out, errOut := runAx(t, "pause", "e2e.record", "--server", "http://"+pa)
	if code != cli.ExitOK || !strings.Contains(out, "paused task e2e.record") {
		t.Errorf("CLI write to the primary: exit %d %s%s", code, out, errOut)
	}
	// The first primary on the store raised no leader_change; b taking
	// over from a does.
	if lc := leaderChanges(); len(lc) != 0 {
		t.Errorf("leader_change alerts before any change: %v", lc)
	}
	a.stop(t)
	waitFor(t, func() bool {
		for _, al := range leaderChanges() {
			if al["scheduler"] == "b" && strings.Contains(al["message"].(string), "taking over from a") {
				return true
			}
		}
		return false
	})
	waitFor(t, func() bool { // b's start as primary is over (its window loaded) before it is stopped
		out, _ := os.ReadFile(b.log.Name())
		_, after, ok := strings.Cut(string(out), "msg=lease_acquired holder=b")
		return ok && strings.Contains(after, "msg=window_loaded")
	})
	b.stop(t)
}
