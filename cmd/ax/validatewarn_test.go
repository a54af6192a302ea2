package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/cli"
)

// TestValidateWarnsInFilesWithErrors: ax validate prints the warnings of
// a file that has errors in the same run (fixing the errors reveals
// nothing new), but not those an error makes unknowable: a schedule that
// did not parse says nothing of which tasks it reaches.
func TestValidateWarnsInFilesWithErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mixed := filepath.Join(dir, "mixed.yaml")
	write(t, mixed, `pipeline: mixed
timezone: UTC
schedule: "@daily"
tasks:
  - {name: load, function: noop, priority: 5}
  - {name: report, depends_on: [load], function: nope_fn, priority: 1}
`)
	broken := filepath.Join(dir, "broken.yaml")
	write(t, broken, `pipeline: broken
timezone: UTC
tasks:
  - {name: hourly, cron: "every hour", function: noop}
  - {name: daily, cron: "@daily", function: noop}
  - {name: lonely, function: noop}
`)
	code, out, errOut := runAx(t, "validate", mixed, broken)
	if code != cli.ExitFailed {
		t.Fatalf("exit %d, want %d\n%s%s", code, cli.ExitFailed, out, errOut)
	}
	for _, want := range []string{
		mixed + `:6:`, `task "report": function "nope_fn" is not registered`,
		mixed + `:6:`, `warning`, `task "report": priority inversion: upstream "load" has priority 5`,
		broken + `:4:`, `task "hourly": cron cannot parse "every hour"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "can never run") {
		t.Errorf("a warning that follows from a cron that did not parse:\n%s", out)
	}
	if !strings.Contains(errOut, "invalid: 2 error(s), 1 warning(s) in 2 file(s)") {
		t.Errorf("summary:\n%s", errOut)
	}
}
