package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTeamBinaryRegistersItsFunctions builds ax as a team builds its own
// binary (cmd/ax/teamfunctions.go, docs/functions.md): its ax validate
// knows the team's function and its ax run runs it; the stock binary refuses the same file, naming what it has.
func TestTeamBinaryRegistersItsFunctions(t *testing.T) {
	t.Parallel()
	team := filepath.Join(t.TempDir(), "ax-team")
	if out, err := exec.Command("go", "build", "-tags", "teamfunctions", "-o", team, ".").CombinedOutput(); err != nil {
		t.Fatalf("build the team's ax: %v\n%s", err, out)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "team.yaml")
	src := "pipeline: team\ntimezone: UTC\nschedule: none\ntasks:\n  - {name: count, function: count_rows, params: {table: orders}}\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(team, "validate", file).CombinedOutput(); err != nil || !strings.Contains(string(out), "1 file(s) valid") {
		t.Errorf("team ax validate: %v\n%s", err, out)
	}
	cmd := exec.Command(team, "run", file, "--at", "2026-03-01T00:00:00Z", "--store", filepath.Join(dir, "ax.db"))
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "success team.count") {
		t.Errorf("team ax run: %v\n%s", err, out)
	}
	out, err := exec.Command(axBinary, "validate", file).CombinedOutput()
	if want := `function "count_rows" is not registered in this ax binary; it registers build_report, fetch_invoices`; err == nil || !strings.Contains(string(out), want) {
		t.Errorf("stock ax validate: %v\n%s\nwant %q", err, out, want)
	}
}
