package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gatedPipeline writes a pipeline whose middle step is a manual gate.
func gatedPipeline(t *testing.T) (file, record string) {
	t.Helper()
	dir := t.TempDir()
	record = filepath.Join(dir, "executions.txt")
	rec := func(task string) string {
		return fmt.Sprintf(`["sh", "-c", "echo %s >> %s"]`, task, record)
	}
	src := fmt.Sprintf(`pipeline: gated
timezone: UTC
schedule: "0 2 * * *"
tasks:
  - {name: build, command: %s}
  - {name: approve, depends_on: [build], manual: true, command: %s}
  - {name: publish, depends_on: [approve], command: %s}
  - {name: notes, depends_on: [build], command: %s}
`, rec("build"), rec("approve"), rec("publish"), rec("notes"))
	file = filepath.Join(dir, "gated.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return file, record
}

// Defect 4: `ax run` counted manual steps nobody released as succeeded.
func TestRunStopsHonestlyAtGates(t *testing.T) {
	t.Parallel()
	file, record := gatedPipeline(t)
	code, out, errOut := runAx(t, "run", file, "--at", "2026-03-02T02:00:00")
	if code != exitGated || strings.Contains(out, "ok:") || !strings.Contains(errOut, "awaiting approval: gated.approve") ||
		!strings.Contains(errOut, "2 of 4 task(s) succeeded") || !strings.Contains(errOut, "--approve-manual") {
		t.Errorf("run at a gate: exit %d\n%s\n%s", code, out, errOut)
	}
	if ran := executions(t, record); ran["build"] != 1 || ran["notes"] != 1 || ran["approve"] != 0 || ran["publish"] != 0 {
		t.Errorf("executions %v", ran)
	}
	code, out, errOut = runAx(t, "run", file, "--at", "2026-03-03T02:00:00", "--approve-manual")
	if code != exitOK || !strings.Contains(out, "ok: 4 task(s) succeeded") {
		t.Errorf("run --approve-manual: exit %d\n%s\n%s", code, out, errOut)
	}
	if ran := executions(t, record); ran["approve"] != 1 || ran["publish"] != 1 {
		t.Errorf("executions %v", ran)
	}
}
