package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/engine"
)

// TestRequestTextBounded: text from outside over its limit (a reason, a
// param, many params, a name) is refused with a 4xx (exit 2 from the CLI,
// before anything is sent or queued) that names the field and the limit,
// and nothing changes; under the limit, escape codes are kept escaped.
func TestRequestTextBounded(t *testing.T) {
	t.Parallel()
	// clean declares the param the trigger below gives it.
	shop := strings.Replace(apitest.ShopPipeline, "{name: clean, depends_on: [sync], function: noop}", "{name: clean, depends_on: [sync], function: noop, params: {day: x}}", 1)
	e := setupAPI(t, apitest.Opts{Pipeline: shop})
	before := e.State()
	long := strings.Repeat("x", 5000)
	manyParams := make([]string, 0, 65)
	for i := range 65 {
		manyParams = append(manyParams, fmt.Sprintf(`"k%d": "v"`, i))
	}
	for _, c := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/api/v1/pipelines/shop/tasks/sync/pause", `{"reason": "` + long + `"}`, 400, "pause: reason is 5000 characters long; give at most 4096"},
		{"/api/v1/pipelines/shop/tasks/sync/pause", `{"reason": "` + strings.Repeat("x", 1<<20) + `"}`, 413, "a reason holds at most 4096 characters"},
		{"/api/v1/groups/etl/pause", `{"reason": "` + long + `"}`, 400, "reason is 5000 characters long"},
		{"/api/v1/pipelines/shop/tasks/sync/trigger", `{"params": {"day": "` + long + `"}}`, 400, `params: param \"day\" is 5000 bytes long; give at most 4096 bytes`},
		{"/api/v1/pipelines/shop/trigger", `{"params": {` + strings.Join(manyParams, ", ") + `}}`, 400, "65 params; give at most 64"},
		{"/api/v1/pipelines/shop/trigger", `{"reason": "` + long + `"}`, 400, "reason is 5000 characters long"},
		{"/api/v1/pipelines/shop/tasks/sync/mark", `{"state": "success", "at": "2026-01-01", "reason": "` + long + `"}`, 400, "reason is 5000 characters long"},
	} {
		code, body := e.Call("POST", c.path, c.body)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("POST %s: %d %.300s; want %d and %q", c.path, code, body, c.code, c.want)
		}
	}
	if e.State() != before {
		t.Fatalf("a refused request changed the store:\n%s\n%s", before, e.State())
	}
	// The CLI refuses before it sends or queues.
	for _, args := range [][]string{
		{"pause", "shop.sync", "--reason", long, "--server", e.Srv.URL},
		{"pause", "shop.sync", "--reason", long, "--store", e.Path},
		{"trigger", "shop.sync", "--param", "day=" + long, "--server", e.Srv.URL},
		{"pause", strings.Repeat("p", 300) + ".sync", "--store", e.Path},
	} {
		code, _, errOut := runAx(t, args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, " long; give at most") {
			t.Errorf("ax %s …: exit %d, %.300s", args[0], code, errOut)
		}
	}
	// In process too, the one door every request goes through.
	if _, err := e.Eng.Do(context.Background(), engine.Pause{Target: "shop.sync"}, engine.By{Reason: long}); !errors.Is(err, engine.ErrBadOp) {
		t.Errorf("Do with a 5000-character reason: %v", err)
	}
	if e.State() != before {
		t.Fatalf("a refused request changed the store:\n%s\n%s", before, e.State())
	}
	// At the limit, with escape codes: applied, and kept escaped.
	reason := strings.Repeat("\x1b[2J", 1024)
	if code, out, errOut := runAx(t, "pause", "shop.sync", "--reason", reason, "--server", e.Srv.URL); code != cli.ExitOK {
		t.Fatalf("pause with a 4096-character reason: exit %d %s%s", code, out, errOut)
	}
	code, out, _ := runAx(t, "explain", "shop.sync", "--server", e.Srv.URL)
	if code != cli.ExitOK || strings.Contains(out, "\x1b") || !strings.Contains(out, `\x1b[2J\x1b[2J`) {
		t.Errorf("explain after a pause with escape codes: exit %d\n%.500s", code, out)
	}
	// A param is data, passed to the task as given; what the action log
	// shows of it is escaped (C1 controls too, which JSON leaves raw).
	if code, out, errOut := runAx(t, "resume", "shop.sync", "--server", e.Srv.URL); code != cli.ExitOK {
		t.Fatalf("resume: exit %d %s%s", code, out, errOut)
	}
	if code, out, errOut := runAx(t, "trigger", "shop.clean", "--param", "day=a\x1b[2J\u009b2Jb", "--server", e.Srv.URL); code != cli.ExitOK {
		t.Fatalf("trigger with an escape code in a param: exit %d %s%s", code, out, errOut)
	}
	code, out, _ = runAx(t, "history", "shop.clean", "--server", e.Srv.URL)
	if code != cli.ExitOK || strings.ContainsAny(out, "\x1b\u009b") || !strings.Contains(out, `a\u001b[2J\xc2\x9b2Jb`) {
		t.Errorf("history of a trigger with escape codes in a param: exit %d\n%s", code, out)
	}
}
