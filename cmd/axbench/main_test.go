package main

import (
	"errors"
	"strings"
	"testing"
)

// A burst run as make bench sees it: its line printed, then its targets
// failed.
const burstOut = `=== RUN   TestBurstOfTenThousandCommands/sqlite
    burst_test.go:314: sqlite, 1 server(s): started and loaded in 694ms
BenchmarkBurst/sqlite 	1	36461.0 fire-start-p99-ms	31301.6 fork-floor-ms	1.16 x-floor	172.6 api-p99-ms	1020.0 renew-late-ms	0 duplicates
    burst_test.go:345: API p99 172.623801ms during the burst, want < 100ms
    burst_test.go:348: a lease renewal completed 1.019957863s late, want at most 1s (TTL 3s)
--- FAIL: TestBurstOfTenThousandCommands (177.11s)
FAIL
`

// TestParseRun: a test that printed its figures and then missed its targets
// keeps the figures and says which targets it missed; a test that failed
// without a "want" keeps them with its last lines; a benchmark that failed,
// or a test that failed before printing a line, is an error; a run that
// printed nothing but SKIP is skipped.
func TestParseRun(t *testing.T) {
	failed := errors.New("exit status 1")
	lines, missed, err := parseRun(burstOut, "", failed, true)
	if err != nil {
		t.Fatal(err)
	}
	if m := lines["Burst/sqlite"]; m["api-p99-ms"] != 172.6 || m["renew-late-ms"] != 1020 || m["duplicates"] != 0 || m["x-floor"] != 1.16 || len(m) != 6 {
		t.Errorf("metrics %v", m)
	}
	if want := "API p99 172.623801ms during the burst, want < 100ms; a lease renewal completed 1.019957863s late, want at most 1s (TTL 3s)"; missed != want {
		t.Errorf("missed %q, want %q", missed, want)
	}

	noWant := strings.ReplaceAll(strings.ReplaceAll(burstOut, "want < 100ms", "over"), "want at most 1s (TTL 3s)", "over")
	if _, missed, err := parseRun(noWant, "", failed, true); err != nil || !strings.HasPrefix(missed, "the test failed: ") || !strings.Contains(missed, "--- FAIL") {
		t.Errorf("failed without want: missed %q, %v", missed, err)
	}
	if _, _, err := parseRun(burstOut, "", failed, false); err == nil || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("a failed benchmark run: %v, want its error", err)
	}
	if _, _, err := parseRun("--- FAIL: TestX\nFAIL\n", "build failed", failed, true); err == nil || !strings.Contains(err.Error(), "build failed") {
		t.Errorf("a test that failed before its lines: %v, want its error with its output", err)
	}
	if _, _, err := parseRun("--- SKIP: TestX\n    x_test.go:3: no MySQL\n", "", nil, true); err == nil || !strings.HasPrefix(err.Error(), "skipped by the benchmark") {
		t.Errorf("a skipped run: %v", err)
	}
	lines, missed, err = parseRun(strings.Split(burstOut, "    burst_test.go:345")[0], "", nil, true)
	if err != nil || missed != "" || lines["Burst/sqlite"]["fork-floor-ms"] != 31301.6 {
		t.Errorf("a passing run: %v %q %v", lines, missed, err)
	}
}
