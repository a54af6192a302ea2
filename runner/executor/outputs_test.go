package executor

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/runner"
)

// A task served by the SDK gives outputs with a.Output; they reach the
// scheduler in its report, a secret's value masked; outputs over the cap
// fail the attempt, naming the cap, and none are sent.
func TestSDKOutputs(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-token-42"
	s := newSetup(t, Config{}, map[string]runner.Func{
		"count": func(_ context.Context, a runner.Attempt) error {
			if err := a.Output("rows", "42"); err != nil {
				return err
			}
			return a.Output("url", "https://x:"+a.Env["API_TOKEN"]+"@h/")
		},
		"huge": func(_ context.Context, a runner.Attempt) error {
			_ = a.Output("blob", strings.Repeat("x", runner.MaxOutputs+1))
			return nil
		},
	})
	h := runner.NewHTTP(http.DefaultClient, func(runner.Attempt) (string, error) { return s.url + "/dispatch", nil })
	run := func(task string) runner.Result {
		r, err := h.Execute(context.Background(), runner.Attempt{Pipeline: "p", Task: task, Ticket: "tk-" + task, InstanceID: 3,
			LogicalTime: time.Now(), Deadline: time.Now().Add(time.Minute),
			Env: map[string]string{"API_TOKEN": secret}, SecretEnv: []string{"API_TOKEN"}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := run("count"); r.Status != runner.StatusSuccess || r.Outputs["rows"] != "42" || r.Outputs["url"] != "https://x:***@h/" {
		t.Errorf("count: %s %q outputs %v; want success, rows=42, the token masked", r.Status, r.Error, r.Outputs)
	}
	if r := run("huge"); r.Status != runner.StatusFailed || r.Outputs != nil || !strings.Contains(r.Error, "over the cap of 65536 bytes (64 KiB)") {
		t.Errorf("huge: %s %q outputs %d; want failed naming the cap, none sent", r.Status, r.Error, len(r.Outputs))
	}
}
