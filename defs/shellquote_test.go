package defs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestScriptArg(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		argv []string
		want int
	}{
		{[]string{"sh", "-c", "x"}, 2},
		{[]string{"/bin/bash", "-euo", "pipefail", "-c", "x"}, 4},
		{[]string{"bash", "-lc", "x", "arg0"}, 2},
		{[]string{"bash", "script.sh", "-c"}, -1},
		{[]string{"python3", "-c", "x"}, -1},
		{[]string{"sh", "-c"}, -1},
		{[]string{"env", "sh", "-c", "x"}, 3},
		{[]string{"/usr/bin/env", "bash", "-c", "x"}, 3},
		{[]string{"env", "X=1", "bash", "-c", "x"}, 4},
		{[]string{"nohup", "sh", "-c", "x"}, 3},
		{[]string{"timeout", "5", "sh", "-c", "x"}, 4},
		{[]string{"setsid", "sh", "-c", "x"}, 3},
		{[]string{"nice", "-n", "5", "sh", "-c", "x"}, 5},
		{[]string{"stdbuf", "-oL", "sh", "-c", "x"}, 4},
		{[]string{"xargs", "-0", "sh", "-c", "x"}, 4},
		{[]string{"bash", "-O", "extglob", "-c", "x"}, 4},
		{[]string{"busybox", "sh", "-euxc", "x"}, 3},
		{[]string{"sudo", "-u", "ax", "/bin/dash", "-ec", "x"}, 5},
		{[]string{"env", "sh", "script.sh"}, -1},
	} {
		if got := ScriptArg(c.argv); got != c.want {
			t.Errorf("ScriptArg(%q) = %d, want %d", c.argv, got, c.want)
		}
	}
}

// render parses a one-task pipeline whose command is argv and renders its
// argument i with params.
func renderArg(t *testing.T, argv string, i int, params map[string]any) string {
	t.Helper()
	src := "pipeline: q\ntimezone: UTC\ntasks:\n  - name: a\n    params: {region: x, n: 1}\n    command: " + argv + "\n"
	p, errs := parseString(t, src)
	if len(errs.Fatal()) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	tmpl := p.Task("a").Executor.Templates[i]
	var b strings.Builder
	if err := tmpl.Execute(&b, TemplateData{LogicalTime: NewMoment(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC, nil), Params: params}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A value spliced into a shell script stays the one word (or the part of
// a quoted string) it was written as, in every quote context: the shell
// prints it back unchanged and runs nothing of it.
func TestScriptQuotesChosenValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	owned := filepath.Join(dir, "owned")
	hostile := "cn; touch " + owned + ` $(touch ` + owned + `) "'` + "`touch " + owned + "`" + `\`
	for _, script := range []string{
		`printf %s {{ .Params.region }}`,
		`printf %s "{{ .Params.region }}"`,
		`printf %s '{{ .Params.region }}'`,
		`printf %s "a\"{{ .Params.region }}"`,
		`printf %s {{ printf "%s" .Params.region }}`,
		`{{ $r := .Params.region }}printf %s {{ $r }}`,
		`{{ with .Params.region }}printf %s {{ . }}{{ end }}`,
	} {
		argv := `["sh", "-c", '` + strings.ReplaceAll(script, "'", "''") + `']`
		rendered := renderArg(t, argv, 2, map[string]any{"region": hostile})
		out, err := exec.Command("sh", "-c", rendered).Output()
		if err != nil {
			t.Errorf("%s: rendered %q: %v", script, rendered, err)
			continue
		}
		want := hostile
		if strings.Contains(script, `a\"`) {
			want = `a"` + hostile
		}
		if string(out) != want {
			t.Errorf("%s: rendered %q printed %q, want %q", script, rendered, out, want)
		}
		if _, err := os.Stat(owned); err == nil {
			t.Fatalf("%s: rendered %q ran the param's command", script, rendered)
		}
	}
}

func TestScriptQuoteOptOutAndPlainArgs(t *testing.T) {
	t.Parallel()
	if got := renderArg(t, `["sh", "-c", "ls {{ .Params.region | raw }}"]`, 2, map[string]any{"region": "-l -a"}); got != "ls -l -a" {
		t.Errorf("raw: %q", got)
	}
	if got := renderArg(t, `["sh", "-c", "ls {{ .Params.region | shq }}"]`, 2, map[string]any{"region": "it's"}); got != `ls 'it'\''s'` {
		t.Errorf("shq once: %q", got)
	}
	// Not a script: an argument reaches the program as it is.
	if got := renderArg(t, `["load", "--region", "{{ .Params.region }}"]`, 2, map[string]any{"region": "cn; x"}); got != "cn; x" {
		t.Errorf("plain argument: %q", got)
	}
	// Times and names are not chosen from outside: unchanged.
	if got := renderArg(t, `["sh", "-c", "echo {{ .LogicalTime.Date }}"]`, 2, nil); got != "echo 2026-01-01" {
		t.Errorf("logical time: %q", got)
	}
}

func TestScriptQuoteBranchesMustAgree(t *testing.T) {
	t.Parallel()
	src := "pipeline: q\ntimezone: UTC\ntasks:\n  - name: a\n    params: {region: x}\n    command: [\"sh\", \"-c\", \"echo {{ if .Params.region }}\\\"{{ else }}'{{ end }}{{ .Params.region }}\"]\n"
	_, errs := parseString(t, src)
	if !strings.Contains(errs.Error(), `p.yaml:6:`) || !strings.Contains(errs.Error(), "leave the script's quotes open differently") {
		t.Fatalf("errors = %v", errs)
	}
}
