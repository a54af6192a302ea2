package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerMetricsTaskLabelsFlag: ax server --metrics-task-labels=false
// serves the per-task series by pipeline alone.
func TestServerMetricsTaskLabelsFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "p.yaml"), "pipeline: p\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: x, function: noop}\n  - {name: y, function: noop, depends_on: [x]}\n")
	addr := freeAddr(t)
	srv := startServer(t, filepath.Join(dir, "ax.db"), dir, "--listen", addr, "--metrics-task-labels=false")
	var text string
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		text = string(b)
		return strings.Contains(text, `ax_task_outcomes_total{outcome="success",pipeline="p"}`)
	})
	srv.stop(t)
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "ax_task_") && strings.Contains(l, "task=") {
			t.Errorf("a per-task series with a task label under --metrics-task-labels=false: %s", l)
		}
	}
	for _, want := range []string{`ax_task_duration_seconds_count{pipeline="p"}`, `ax_task_queue_wait_seconds_count{pipeline="p"}`} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in /metrics", want)
		}
	}
}
