package executor

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/runner"
)

// A task served by the SDK gets the env of its dispatch, and the values of
// its secret variables never leave in its report: masked (***) in its log
// and its error, the way the scheduler masks them.
func TestSDKGetsEnvAndMasksSecrets(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-token-42"
	var got runner.Attempt
	s := newSetup(t, Config{}, map[string]runner.Func{"load": func(ctx context.Context, a runner.Attempt) error {
		got = a
		runner.Logger(ctx).Info("connecting", "region", a.Env["REGION"], "token", a.Env["API_TOKEN"])
		return errors.New("token " + a.Env["API_TOKEN"] + " refused")
	}})
	h := runner.NewHTTP(http.DefaultClient, func(runner.Attempt) (string, error) { return s.url + "/dispatch", nil })
	r, err := h.Execute(context.Background(), runner.Attempt{Pipeline: "p", Task: "load", Ticket: "tk-env", InstanceID: 3,
		LogicalTime: time.Now(), Deadline: time.Now().Add(time.Minute),
		Env: map[string]string{"REGION": "cn-north", "API_TOKEN": secret}, SecretEnv: []string{"API_TOKEN"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Env["REGION"] != "cn-north" || got.Env["API_TOKEN"] != secret {
		t.Errorf("the handler got env %v", got.Env)
	}
	if r.Status != runner.StatusFailed || r.Error != "token *** refused" {
		t.Errorf("result %s %q, want failed with the token masked", r.Status, r.Error)
	}
	lines, err := runner.DecodeLines(r.Log)
	if err != nil || len(lines) == 0 {
		t.Fatalf("log %q: %v", r.Log, err)
	}
	log := string(lines[0].Text)
	if !strings.Contains(log, "token=***") || !strings.Contains(log, "region=cn-north") || strings.Contains(log, secret) {
		t.Errorf("log line %q, want the token masked and the region kept", log)
	}
}

// A function served by the SDK that gives an output whose key holds a
// secret fails: the report carries no outputs and names the rule masked.
func TestSDKRefusesAnOutputKeyHoldingASecret(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t_token_43"
	s := newSetup(t, Config{}, map[string]runner.Func{"load": func(_ context.Context, a runner.Attempt) error {
		return a.Output("k"+a.Env["API_TOKEN"], "1")
	}})
	h := runner.NewHTTP(http.DefaultClient, func(runner.Attempt) (string, error) { return s.url + "/dispatch", nil })
	r, err := h.Execute(context.Background(), runner.Attempt{Pipeline: "p", Task: "load", Ticket: "tk-key", InstanceID: 3,
		LogicalTime: time.Now(), Deadline: time.Now().Add(time.Minute),
		Env: map[string]string{"API_TOKEN": secret}, SecretEnv: []string{"API_TOKEN"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != runner.StatusFailed || r.Outputs != nil || !strings.HasPrefix(r.Error, `outputs: key "k***" holds the value of a secret`) {
		t.Errorf("result %s %q %v, want failed naming the rule, the key masked, no outputs", r.Status, r.Error, r.Outputs)
	}
}
