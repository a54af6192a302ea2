package defs

import (
	"encoding/json"
	"strings"
	"testing"
)

// env is merged name by name: the task's over the defaults' over the
// pipeline's; working_dir comes from the task or the defaults (command
// tasks only); the stored definition holds a secret's reference, never a
// value.
func TestEnvLevelsAndWorkingDir(t *testing.T) {
	t.Parallel()
	p, errs := parseString(t, `pipeline: p
timezone: UTC
env: {REGION: cn, LEVEL: pipeline, KEEP: "1"}
defaults:
  env: {LEVEL: defaults, PORT: 5432}
  working_dir: jobs
tasks:
  - name: a
    command: ["./run.sh"]
    env:
      LEVEL: task
      DAY: "{{ .LogicalTime.Date }}"
      PW: {secret: warehouse_password}
      HOME_DIR: {secret: "env:HOME"}
  - name: b
    command: ["true"]
    working_dir: "/srv/{{ .Pipeline }}"
  - {name: c, function: noop}
`)
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	got := map[string]string{}
	a := p.Task("a")
	for _, v := range a.Env {
		switch {
		case v.Secret != nil:
			got[v.Name] = "secret " + v.Secret.String()
		case v.Template != nil:
			got[v.Name] = "template " + v.Value
		default:
			got[v.Name] = v.Value
		}
	}
	want := map[string]string{"REGION": "cn", "LEVEL": "task", "KEEP": "1", "PORT": "5432", "DAY": "template {{ .LogicalTime.Date }}",
		"PW": "secret file:warehouse_password", "HOME_DIR": "secret env:HOME"}
	if len(got) != len(want) {
		t.Errorf("env %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("env %s = %q, want %q", k, got[k], v)
		}
	}
	for i := 1; i < len(a.Env); i++ {
		if a.Env[i-1].Name >= a.Env[i].Name {
			t.Errorf("env not sorted by name: %s before %s", a.Env[i-1].Name, a.Env[i].Name)
		}
	}
	if b := p.Task("b"); b.WorkingDir != "/srv/{{ .Pipeline }}" || b.WorkingDirTemplate == nil || b.Env[1].Value != "defaults" {
		t.Errorf("b: working_dir %q (template %v), env %v", b.WorkingDir, b.WorkingDirTemplate != nil, b.Env)
	}
	if a.WorkingDir != "jobs" || p.Task("c").WorkingDir != "" {
		t.Errorf("working_dir a %q, c %q: want the default's on the command task only", a.WorkingDir, p.Task("c").WorkingDir)
	}
	if refs := a.Secrets(); len(refs) != 2 || refs[0] != (SecretRef{SecretEnv, "HOME"}) || refs[1] != (SecretRef{SecretFile, "warehouse_password"}) {
		t.Errorf("secrets %v", refs)
	}
	def, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(def), `{"name":"PW","secret":{"provider":"file","name":"warehouse_password"}}`) {
		t.Errorf("the stored definition does not hold the reference: %s", def)
	}
}

// A variable longer than the kernel lets a program start with is refused
// at validation, not found at exec time (E2BIG); one at the limit is taken.
func TestEnvEntryLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		fail bool
	}{{MaxEnvEntry - len("BIG="), false}, {MaxEnvEntry - len("BIG=") + 1, true}} {
		src := "pipeline: p\ntimezone: UTC\ntasks:\n  - name: a\n    command: [\"true\"]\n    env: {BIG: " + strings.Repeat("x", tc.n) + "}\n"
		p, errs := parseString(t, src)
		if got := errs.Err() != nil; got != tc.fail {
			t.Errorf("a value of %d bytes: refused %v, want %v (%v)", tc.n, got, tc.fail, errs)
		}
		if tc.fail && (!strings.Contains(errs.Error(), "p.yaml:6:16: ") || !strings.Contains(errs.Error(), "env BIG is 131072 bytes long with its name: a variable may hold at most 131071")) {
			t.Errorf("error %v", errs)
		}
		if !tc.fail && len(p.Task("a").Env[0].Value) != tc.n {
			t.Errorf("the value kept is %d bytes", len(p.Task("a").Env[0].Value))
		}
	}
}
