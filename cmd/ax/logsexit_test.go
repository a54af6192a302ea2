package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
)

// The exit status of ax logs is the attempt's: 0 when it succeeded or still
// runs, 1 when it failed, was killed or timed out (an attempt that ended
// without a record has its instance's outcome), in text, --json and -f
// alike. It exited 0 whatever the attempt's end.
func TestLogsExitStatusIsTheAttempts(t *testing.T) {
	t.Parallel()
	code := 3
	for _, c := range []struct {
		name, status, state string
		running             bool
		want                int
	}{
		{"success", "success", "SUCCESS", false, cli.ExitOK},
		{"failed", "failed", "FAILED", false, cli.ExitFailed},
		{"failed with a retry to come", "failed", "RETRYING", false, cli.ExitFailed},
		{"killed", "killed", "KILLED", false, cli.ExitFailed},
		{"timed out", "timeout", "FAILED", false, cli.ExitFailed},
		{"died, instance failed", "unknown", "FAILED", false, cli.ExitFailed},
		{"died, instance killed", "unknown", "KILLED", false, cli.ExitFailed},
		{"died, instance marked success", "unknown", "SUCCESS", false, cli.ExitOK},
		{"running", "", "RUNNING", true, cli.ExitOK},
	} {
		h := api.LogHeader{Instance: 7, Task: "shop.talk", Run: 2, Attempt: 1, Attempts: 1, State: c.state, Running: c.running, Status: c.status}
		if c.status != "" && c.status != "unknown" {
			h.ExitCode = &code
		}
		// The stream of -f: the header as it stood, then the end (a
		// running attempt's stream ends with it, so its end says how).
		start := h
		start.Running, start.Status, start.ExitCode = true, "", nil
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/v1/instances/7/logs" {
				http.Error(w, `{"error":"unexpected"}`, http.StatusNotFound)
				return
			}
			if r.URL.Query().Get("follow") != "true" {
				_ = json.NewEncoder(w).Encode(api.LogPage{LogHeader: h, Lines: []api.LogLine{}})
				return
			}
			enc := json.NewEncoder(w)
			_ = enc.Encode(api.LogEvent{Header: &start})
			_ = enc.Encode(api.LogEvent{Line: &api.LogLine{Stream: "stdout", Text: "hello"}})
			if !c.running {
				_ = enc.Encode(api.LogEvent{End: &h})
			}
		}))
		for _, extra := range [][]string{nil, {"--json"}, {"-f"}, {"-f", "--json"}} {
			args := append([]string{"logs", "shop.talk", "--instance", "7", "--utc", "--server", srv.URL}, extra...)
			got, out, errOut := runAx(t, args...)
			if got != c.want {
				t.Errorf("%s: ax %s: exit %d, want %d\n%s%s", c.name, strings.Join(extra, " "), got, c.want, out, errOut)
			}
			if errOut != "" {
				t.Errorf("%s: ax %s printed on stderr (the header says how the attempt ended): %s", c.name, strings.Join(extra, " "), errOut)
			}
			if len(extra) == 0 && !c.running && !strings.Contains(out, fmt.Sprintf(", %s", c.status)) {
				t.Errorf("%s: the header does not say how it ended:\n%s", c.name, out)
			}
		}
		srv.Close()
	}
}

// The command ax logs suggests when there is no log to show runs and shows
// the task: "ax status PIPELINE.TASK", for a task that never ran and for a
// run it has no instance that ran in (ax status refused a task name with
// `no pipeline "shop.talk"` before it took PIPELINE.TASK).
func TestLogsHintRuns(t *testing.T) {
	t.Parallel()
	e, _ := setupLogs(t)
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/binary/trigger", ""); code != http.StatusOK {
		t.Fatalf("trigger: %d %s", code, body)
	}
	other := e.WaitState("shop.binary", axtype.Success)
	hintOf := regexp.MustCompile(`\((ax [^)]*) shows its state\)`)
	for _, args := range [][]string{{"logs", "shop.talk"}, {"logs", "shop.talk", "--run", fmt.Sprint(other.RunID)}} {
		code, out, errOut := runAx(t, append(args, "--server", e.Srv.URL)...)
		m := hintOf.FindStringSubmatch(errOut)
		if code != cli.ExitFailed || m == nil {
			t.Fatalf("ax %s: exit %d, want %d with a hint\n%s%s", strings.Join(args, " "), code, cli.ExitFailed, out, errOut)
		}
		hint := strings.Fields(m[1])[1:]
		code, out, errOut = runAx(t, append(hint, "--server", e.Srv.URL)...)
		if code != cli.ExitOK || !strings.Contains(out, "shop.talk") {
			t.Errorf("the hint %q of ax %s: exit %d\n%s%s", m[1], strings.Join(args, " "), code, out, errOut)
		}
	}
}
