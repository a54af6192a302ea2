package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/engine"
)

const (
	diffServerShop = `pipeline: shop
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: sync, function: noop, timeout: 1m}
  - {name: clean, depends_on: [sync], command: ["echo", "a"], timeout: 1m}
`
	diffServerUp = `pipeline: up
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: x, function: noop}
`
	// diffLocalShop changes a command, a timeout, the schedule, and makes
	// sync wait for up.x, a pipeline of the server that no file given holds.
	diffLocalShop = `pipeline: shop
timezone: UTC
schedule: "0 6 1 1 *"
tasks:
  - {name: sync, function: noop, timeout: 1m, depends_on: [up.x]}
  - {name: clean, depends_on: [sync], command: ["echo", "b"], timeout: 2m}
`
)

// TestDiffFieldLevel: ax diff of one file names each changed field with
// its old and new value, in text and JSON, and resolves the file's
// reference to another pipeline from the server instead of failing.
func TestDiffFieldLevel(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Pipeline: diffServerShop, Others: []string{diffServerUp}})
	dir := t.TempDir()
	file := filepath.Join(dir, "shop.yaml")
	write(t, file, diffLocalShop)
	code, out, errOut := runAx(t, "diff", file, "--server", e.Srv.URL)
	want := `~ shop.clean                               changed
    executor.command: ["echo","a"] -> ["echo","b"]
    timeout: 1m0s -> 2m0s
~ shop.sync                                changed
    depends_on: (none) -> [up.x]
@ shop                                     schedule planned again from the reload
    schedule: "0 0 1 1 *" -> "0 6 1 1 *"
0 added, 0 removed, 2 changed; 1 schedule(s) planned again
`
	if code != cli.ExitOK || out != want {
		t.Fatalf("ax diff: exit %d\n%s\nwant:\n%s\nstderr: %s", code, out, want, errOut)
	}
	code, out, errOut = runAx(t, "diff", file, "--server", e.Srv.URL, "--json")
	var d engine.Diff
	if err := json.Unmarshal([]byte(out), &d); code != cli.ExitOK || err != nil {
		t.Fatalf("ax diff --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	has := func(c engine.Change) bool {
		for _, x := range d.Changes {
			if x == c {
				return true
			}
		}
		return false
	}
	for _, c := range []engine.Change{
		{ID: "shop.clean", Field: "timeout", Old: "1m0s", New: "2m0s"},
		{ID: "shop.sync", Field: "depends_on", Old: "(none)", New: "[up.x]"},
		{ID: "shop", Field: "schedule", Old: `"0 0 1 1 *"`, New: `"0 6 1 1 *"`, Schedule: true},
	} {
		if !has(c) {
			t.Errorf("ax diff --json lacks %+v:\n%s", c, out)
		}
	}

	// A reference the server cannot resolve either: the file's position,
	// what the server has, exit 1.
	write(t, file, strings.Replace(diffLocalShop, "up.x", "up.y", 1))
	code, out, errOut = runAx(t, "diff", file, "--server", e.Srv.URL)
	if code != cli.ExitFailed || out != "" || !strings.Contains(errOut, file+`:5:`) ||
		!strings.Contains(errOut, `task "sync": depends_on "up.y": no such task in these files nor on the server at `+e.Srv.URL+` (did you mean "up.x"?)`) {
		t.Errorf("ax diff with an unknown reference: exit %d\n%s%s", code, out, errOut)
	}
	// A directory stands for the server's: what it lacks is removed.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "up.yaml"), diffServerUp)
	code, out, errOut = runAx(t, "diff", dir, "--server", e.Srv.URL)
	if code != cli.ExitOK || !strings.Contains(out, "- shop.clean") || !strings.Contains(out, "0 added, 2 removed, 0 changed") {
		t.Errorf("ax diff of a directory: exit %d\n%s%s", code, out, errOut)
	}
	// Bad input to the endpoint: too many definitions at once.
	q := strings.Repeat("task=shop.sync&", 101)
	if code, body := e.Call("GET", "/api/v1/reload?"+q, ""); code != 400 || !strings.Contains(body, "at most 100 definitions") {
		t.Errorf("GET /api/v1/reload with 101 tasks: %d %s", code, body)
	}
}
