package runner

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// A command starts with the allowlisted part of the server's environment and
// the attempt's AX_* variables: never the server's credentials nor anything
// else it was started with.
func TestCommandEnvironmentIsAllowlisted(t *testing.T) {
	t.Setenv("AX_ADMIN_TOKEN", "admin-secret")
	t.Setenv("AX_EXECUTOR_TOKEN", "exec-secret")
	t.Setenv("AX_SERVER", "http://127.0.0.1:1")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "cloud-secret")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("LC_TIME", "en_GB.UTF-8")
	t.Setenv("TZ", "UTC")
	t.Setenv("HOME", "/home/ax")
	a := attempt("tk-env")
	a.Deadline = time.Now().Add(time.Minute).Truncate(time.Second)
	r, err := commands("/usr/bin/env").Execute(context.Background(), a)
	if err != nil || r.Status != StatusSuccess {
		t.Fatalf("env: %+v, %v", r, err)
	}
	var names []string
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(r.Output)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		names = append(names, k)
		got[k] = v
	}
	for _, secret := range []string{"AX_ADMIN_TOKEN", "AX_EXECUTOR_TOKEN", "AX_SERVER", "AWS_SECRET_ACCESS_KEY"} {
		if _, ok := got[secret]; ok {
			t.Errorf("the command inherited %s from the server", secret)
		}
	}
	want := map[string]string{
		"LANG": "C.UTF-8", "LC_TIME": "en_GB.UTF-8", "TZ": "UTC", "HOME": "/home/ax",
		"AX_TASK": "clean", "AX_PIPELINE": "orders", "AX_TICKET": "tk-env", "AX_INSTANCE": "7",
		"AX_LOGICAL_TIME": "2026-03-01T02:00:00+08:00", "AX_DEADLINE": a.Deadline.UTC().Format(time.RFC3339),
		"AX_PARAM_REGION": "cn", "AX_PARAM_N": "3",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if got["PATH"] == "" {
		t.Error("PATH was not passed on")
	}
	allowed := []string{"PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL"}
	for _, k := range names {
		if !strings.HasPrefix(k, "AX_") && !strings.HasPrefix(k, "LC_") && !slices.Contains(allowed, k) {
			t.Errorf("the command got %s, which is not in the allowlist", k)
		}
	}
}

// A param's name reaches the command as defs.ParamEnvName says: a '-'
// becomes '_', so a shell can read it.
func TestEnvParamNameWithDash(t *testing.T) {
	t.Parallel()
	got := env(Attempt{Params: map[string]any{"region-id": "cn", "n": 3}})
	for _, want := range []string{"AX_PARAM_REGION_ID=cn", "AX_PARAM_N=3"} {
		if !slices.Contains(got, want) {
			t.Errorf("env = %q, want %s in it", got, want)
		}
	}
}
