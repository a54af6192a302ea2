package api

import (
	"strings"
	"testing"

	"github.com/ax-sched/ax/api/apitest"
)

// TestAPIPauseRefusesTrigger: under a pause a trigger and a backfill are 409s
// that name the pause and change nothing; with "hold" the trigger creates
// the run held PAUSED and says so; "hold" on another verb is a 400.
func TestAPIPauseRefusesTrigger(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{})
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/pause", `{"reason": "db maintenance"}`); code != 200 {
		t.Fatalf("pause: %d %s", code, body)
	}
	before := e.State()
	for _, c := range []struct{ path, body string }{
		{"/api/v1/pipelines/shop/tasks/sync/trigger", ""},
		{"/api/v1/pipelines/shop/tasks/sync/trigger", `{"downstream": true}`},
		{"/api/v1/pipelines/shop/trigger", ""},
	} {
		code, body := e.Call("POST", c.path, c.body)
		msg := decodeJSON[map[string]string](t, body)["error"]
		if code != 409 || !strings.Contains(msg, "trigger refused: shop.") || !strings.Contains(msg, "pipeline shop paused by") ||
			!strings.Contains(msg, "db maintenance") || !strings.Contains(msg, "nothing was created") {
			t.Errorf("POST %s %s under a pause: %d %s; want 409 naming the pause", c.path, c.body, code, body)
		}
		if after := e.State(); after != before {
			t.Fatalf("a refused trigger changed the store:\nbefore %s\nafter  %s", before, after)
		}
	}
	code, body := e.Call("POST", "/api/v1/backfills", `{"pipeline": "shop", "from": "2024-01-01", "to": "2025-01-02"}`)
	if code != 409 || !strings.Contains(body, "backfill refused: shop.") || !strings.Contains(body, "pipeline shop paused by") {
		t.Errorf("backfill under a pause: %d %s; want 409 naming the pause", code, body)
	}
	if after := e.State(); after != before {
		t.Fatalf("a refused backfill changed the store:\nbefore %s\nafter  %s", before, after)
	}
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/resume", `{"hold": true}`); code != 400 || !strings.Contains(body, "hold apply to trigger") {
		t.Errorf("resume with hold: %d %s, want 400", code, body)
	}
	code, body = e.Call("POST", "/api/v1/pipelines/shop/tasks/sync/trigger", `{"hold": true}`)
	if code != 200 || !strings.Contains(body, "held PAUSED until the resume: shop.sync (pipeline shop)") {
		t.Errorf("held trigger: %d %s", code, body)
	}
}
