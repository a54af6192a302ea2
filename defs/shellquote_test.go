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
		`printf %s "$(printf %s {{ .Params.region }})"`,
		`printf %s "$( (printf %s "{{ .Params.region }}") )"`,
		`printf %s "$(printf %s "$(printf %s '{{ .Params.region }}')")"`,
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

// Where no quoting holds, a chosen value is refused at validation, with
// what to do instead; `| raw` opts out on purpose.
func TestScriptRefusesUnquotablePlaces(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ script, want string }{
		{"cat <<EOF\n{{ .Params.region }}\nEOF", "inside a heredoc"},
		{"cat <<'EOF'\nx {{ .Params.region }}\nEOF", "inside a heredoc"},
		{"cat <<-\"EOF\"\n\t{{ .Params.region }}\n\tEOF", "inside a heredoc"},
		{"echo hi # {{ .Params.region }}", "inside a comment"},
		{"eval echo {{ .Params.region }}", "among the words of eval"},
		{"eval \"echo {{ .Params.region }}\"", "among the words of eval"},
		{"bash -c 'echo {{ .Params.region }}'", "inside the script of a shell"},
		{"env sh -ec \"echo {{ .Params.region | shq }}\"", "inside the script of a shell"},
		{"echo $(( 1 + {{ .Params.region }} ))", "declare the param type int"},
		{"echo \"$(( 1 + {{ .Params.region | shq }} ))\"", "inside $(( … )) arithmetic"},
		{"echo `echo {{ .Params.region }}`", "inside `…`"},
		{"echo \"`echo {{ .Params.region }}`\"", "inside `…`"},
	} {
		src := "pipeline: q\ntimezone: UTC\nparams:\n  region: {type: string, default: x}\ntasks:\n  - name: a\n    command:\n      - sh\n      - -c\n      - " + yamlQuoted(c.script) + "\n"
		_, errs := parseString(t, src)
		if !strings.Contains(errs.Error(), "p.yaml:10:9: task \"a\": command argument") || !strings.Contains(errs.Error(), c.want) {
			t.Errorf("%q: errors = %v\nwant p.yaml:10:9 and %q", c.script, errs, c.want)
		}
		raw := strings.ReplaceAll(strings.ReplaceAll(c.script, " | shq", ""), ".Params.region }}", ".Params.region | raw }}")
		src = strings.Replace(src, yamlQuoted(c.script), yamlQuoted(raw), 1)
		if _, errs := parseString(t, src); len(errs.Fatal()) > 0 {
			t.Errorf("%q with | raw: %v", raw, errs)
		}
	}
}

func yamlQuoted(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`).Replace(s) + `"`
}

// Nothing that merely looks like those places is refused: a heredoc that
// ended, a comment before the line, arithmetic that closed, a nested
// shell in an earlier command.
func TestScriptQuotesAfterClosedPlaces(t *testing.T) {
	t.Parallel()
	for _, script := range []string{
		`# note\necho {{ .Params.region }}`,
		`cat <<EOF\nhi\nEOF\necho {{ .Params.region }}`,
		`echo $((1 + (2))) {{ .Params.region }}`,
		`bash -c 'true' && echo {{ .Params.region }}`,
		`echo ${#x} {{ .Params.region }}`,
		`echo $((1<<2)) {{ .Params.region }}`,
	} {
		got := renderArg(t, `["sh", "-c", "`+script+`"]`, 2, map[string]any{"region": "a b"})
		if !strings.HasSuffix(got, ` 'a b'`) && !strings.HasSuffix(got, "\necho 'a b'") {
			t.Errorf("%s: rendered %q, want the value quoted at the end", script, got)
		}
	}
}

// An int param is printed as a number inside arithmetic; a value that is
// not an integer fails the render instead of reaching the shell.
func TestScriptArithmeticTakesInts(t *testing.T) {
	t.Parallel()
	if got := renderArg(t, `["sh", "-c", "echo $(( {{ .Params.n }} + 1 ))"]`, 2, map[string]any{"n": 41}); got != "echo $(( 41 + 1 ))" {
		t.Errorf("int in arithmetic: %q", got)
	}
	src := "pipeline: q\ntimezone: UTC\ntasks:\n  - name: a\n    params: {n: 1}\n    command: [\"sh\", \"-c\", \"echo $(( {{ .Params.n }} ))\"]\n"
	p, errs := parseString(t, src)
	if len(errs.Fatal()) > 0 {
		t.Fatal(errs)
	}
	var b strings.Builder
	err := p.Task("a").Executor.Templates[2].Execute(&b, TemplateData{Params: map[string]any{"n": "1); touch x; (("}})
	if err == nil || !strings.Contains(err.Error(), "is not an integer") {
		t.Fatalf("err = %v, rendered %q", err, b.String())
	}
}
