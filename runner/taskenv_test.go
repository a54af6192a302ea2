package runner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"text/template"

	"github.com/ax-sched/ax/defs"
)

const testSecret = "hunter2-Sup3r"

// envSetup is a secrets directory holding db_password, and the env of a
// task that takes it with a literal and a templated variable.
func envSetup(t *testing.T) (Secrets, EnvSpec) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "db_password"), []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := []defs.EnvVar{
		{Name: "DB_PASSWORD", Secret: &defs.SecretRef{Provider: defs.SecretFile, Name: "db_password"}},
		{Name: "DAY", Value: "{{ .LogicalTime.Compact }}", Template: template.Must(template.New("").Option("missingkey=error").Parse("{{ .LogicalTime.Compact }}"))},
		{Name: "REGION", Value: "cn-north"},
	}
	return NewSecrets(dir), EnvSpec{Vars: vars}
}

// script runs sh -c src in dir (relative to base).
func script(src, dir, base string) *Commands {
	return NewCommands(func(Attempt) (CommandSpec, error) {
		return CommandSpec{Argv: []string{"sh", "-c", src}, Templates: make([]*template.Template, 3), Dir: dir, BaseDir: base}, nil
	})
}

// A command sees its env (a literal, a rendered template, a secret read from
// its file without the trailing newline) and runs in its working
// directory, relative to the pipeline file's; the secret's value is
// masked in its output and in its error text.
func TestCommandEnvSecretAndWorkingDir(t *testing.T) {
	t.Parallel()
	secrets, spec := envSetup(t)
	base := t.TempDir()
	if err := os.Mkdir(filepath.Join(base, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := script(`echo "dir=$(pwd) day=$DAY region=$REGION"; [ "$DB_PASSWORD" = "`+testSecret+`" ] && echo secret-ok; echo "pw=$DB_PASSWORD"; echo "bad $DB_PASSWORD" >&2; exit 4`, "scripts", base)
	out := NewOutput(0)
	ctx := WithOutput(context.Background(), out)
	r, err := NewEnvExecutor(cmd, func(Attempt) (EnvSpec, error) { return spec, nil }, secrets).Execute(ctx, attempt("tk-env1"))
	if err != nil {
		t.Fatal(err)
	}
	data, _, _ := out.Take(true)
	lines, err := DecodeLines(data)
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, l := range lines {
		text = append(text, string(l.Text))
	}
	got := strings.Join(text, "\n")
	wantDir, _ := filepath.EvalSymlinks(filepath.Join(base, "scripts"))
	for _, want := range []string{"dir=" + wantDir + " day=20260301 region=cn-north", "secret-ok", "pw=***", "bad ***"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, testSecret) || strings.Contains(r.Error, testSecret) {
		t.Errorf("the secret is not masked: output %q, error %q", got, r.Error)
	}
	if r.Status != StatusFailed || r.Error != "exit status 4: bad ***" {
		t.Errorf("result %s %q, want failed with the masked stderr line", r.Status, r.Error)
	}
}

// A missing secret, or a working directory that is not there, fails the
// attempt naming the secret or the path, and runs nothing.
func TestEnvFailuresRunNothing(t *testing.T) {
	t.Parallel()
	secrets, spec := envSetup(t)
	base := t.TempDir()
	marker := filepath.Join(base, "ran")
	if err := os.WriteFile(filepath.Join(base, "afile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(string(secrets[defs.SecretFile].(SecretDir)), "adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	sdir := string(secrets[defs.SecretFile].(SecretDir))
	must(t, syscall.Mkfifo(filepath.Join(sdir, "afifo"), 0o600))
	must(t, os.WriteFile(filepath.Join(sdir, "empty"), []byte("\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(sdir, "big"), bytes.Repeat([]byte("x"), MaxSecret+1), 0o600))
	secretVar := func(name string) EnvSpec {
		return EnvSpec{Vars: []defs.EnvVar{{Name: "K", Secret: &defs.SecretRef{Provider: defs.SecretFile, Name: name}}}}
	}
	missingSecret := spec
	missingSecret.Vars = append([]defs.EnvVar{{Name: "API_KEY", Secret: &defs.SecretRef{Provider: defs.SecretFile, Name: "api_key"}}}, spec.Vars...)
	for _, tc := range []struct {
		name    string
		spec    EnvSpec
		secrets Secrets
		dir     string
		want    string
	}{
		{"missing secret file", missingSecret, secrets, "", "env API_KEY: secret api_key: no file "},
		{"no secrets dir", spec, NewSecrets(""), "", "env DB_PASSWORD: secret db_password: no --secrets-dir was given"},
		{"missing env secret", EnvSpec{Vars: []defs.EnvVar{{Name: "K", Secret: &defs.SecretRef{Provider: defs.SecretEnv, Name: "AX_TEST_NO_SUCH_VARIABLE"}}}}, secrets, "",
			"env K: secret env:AX_TEST_NO_SUCH_VARIABLE: the server's environment has no AX_TEST_NO_SUCH_VARIABLE"},
		{"missing working dir", spec, secrets, "nowhere/{{ .Task }}", "working directory " + filepath.Join(base, "nowhere/clean") + " does not exist"},
		{"working dir is a file", spec, secrets, "afile", "working directory " + filepath.Join(base, "afile") + " is not a directory"},
		{"secret is a directory", EnvSpec{Vars: []defs.EnvVar{{Name: "K", Secret: &defs.SecretRef{Provider: defs.SecretFile, Name: "adir"}}}}, secrets, "",
			"env K: secret adir: " + filepath.Join(sdir, "adir") + " is a directory, not a regular file: write the secret's value into a plain file"},
		{"secret is a named pipe", secretVar("afifo"), secrets, "", "env K: secret afifo: " + filepath.Join(sdir, "afifo") + " is a named pipe (FIFO), not a regular file"},
		{"secret is empty", secretVar("empty"), secrets, "", "env K: secret empty: " + filepath.Join(sdir, "empty") + " is empty: write the secret's value into it"},
		{"secret is too big", secretVar("big"), secrets, "", "env K: secret big: " + filepath.Join(sdir, "big") + " is 1048577 bytes, over 1048576 (1 MiB)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dirTmpl := template.Must(template.New("").Parse(tc.dir))
			cmd := NewCommands(func(Attempt) (CommandSpec, error) {
				return CommandSpec{Argv: []string{"touch", marker}, Templates: make([]*template.Template, 2), Dir: tc.dir, DirTemplate: dirTmpl, BaseDir: base}, nil
			})
			r, err := NewEnvExecutor(cmd, func(Attempt) (EnvSpec, error) { return tc.spec, nil }, tc.secrets).Execute(context.Background(), attempt("tk-fail"))
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != StatusFailed || !strings.HasPrefix(r.Error, tc.want) {
				t.Errorf("result %s %q, want failed with %q", r.Status, r.Error, tc.want)
			}
			if strings.Contains(r.Error, testSecret) {
				t.Errorf("the error holds the secret: %q", r.Error)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the command ran (%v)", err)
			}
		})
	}
}

// A function and an HTTP dispatch get the same env: Attempt.Env, with the
// names of the secret variables.
func TestFunctionGetsEnv(t *testing.T) {
	t.Parallel()
	secrets, spec := envSetup(t)
	f := NewFunctions(func(Attempt) string { return "f" })
	var got Attempt
	if err := f.Register("f", func(_ context.Context, a Attempt) error {
		got = a
		return errors.New("login with " + a.Env["DB_PASSWORD"] + " refused")
	}); err != nil {
		t.Fatal(err)
	}
	r, err := NewEnvExecutor(f, func(Attempt) (EnvSpec, error) { return spec, nil }, secrets).Execute(context.Background(), attempt("tk-f"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Env["DB_PASSWORD"] != testSecret || got.Env["DAY"] != "20260301" || got.Env["REGION"] != "cn-north" {
		t.Errorf("env %v", got.Env)
	}
	if len(got.SecretEnv) != 1 || got.SecretEnv[0] != "DB_PASSWORD" {
		t.Errorf("secret env %v, want [DB_PASSWORD]", got.SecretEnv)
	}
	if r.Error != "login with *** refused" {
		t.Errorf("error %q, want the secret masked", r.Error)
	}
}

// Output masks a secret in a line that arrives in pieces, and the longest
// of two secrets that overlap first.
func TestOutputMask(t *testing.T) {
	t.Parallel()
	o := NewOutput(0)
	o.Mask("pass", "password1", "")
	w := o.Writer(StreamStdout)
	for _, p := range []string{"my pas", "sword1 and pa", "ss\nno secret here\n"} {
		w.Write([]byte(p))
	}
	got := takenLines(t, o)
	if want := "my *** and ***|no secret here"; strings.Join(got, "|") != want {
		t.Errorf("lines %q, want %q", strings.Join(got, "|"), want)
	}
	if s := o.MaskString("x password1 y"); s != "x *** y" {
		t.Errorf("MaskString: %q", s)
	}
}

// MaskReport masks a report's error, plain output and every line of its
// log, keeping each line's stream and continuation.
func TestMaskReport(t *testing.T) {
	t.Parallel()
	src := NewOutput(0)
	src.Writer(StreamLog).Write([]byte("token=" + testSecret + " ok\n"))
	src.Writer(StreamStderr).Write([]byte("half " + testSecret))
	log, _, _ := src.Take(true)
	rep := MaskReport(Report{Ticket: "t", Status: StatusFailed, Error: "bad " + testSecret, Output: testSecret + "\n", Log: bytes.Clone(log)}, testSecret)
	if rep.Error != "bad ***" || rep.Output != "***\n" {
		t.Errorf("error %q, output %q", rep.Error, rep.Output)
	}
	lines, err := DecodeLines(rep.Log)
	if err != nil || len(lines) != 2 {
		t.Fatalf("log %q: %v", rep.Log, err)
	}
	if l := lines[0]; l.Stream != StreamLog || string(l.Text) != "token=*** ok" || l.Cont {
		t.Errorf("line 1: %+v", l)
	}
	if l := lines[1]; l.Stream != StreamStderr || string(l.Text) != "half ***" {
		t.Errorf("line 2: %+v", l)
	}
}

// A secret of several lines (a PEM key) reaches output one line at a
// time: each of its lines is masked, as is the whole in an error text.
func TestOutputMasksEachLineOfAMultiLineSecret(t *testing.T) {
	t.Parallel()
	o := NewOutput(0)
	o.Mask("-----BEGIN KEY-----\r\nSECRETPART1\nSECRETPART2\n\n")
	w := o.Writer(StreamStdout)
	w.Write([]byte("-----BEGIN KEY-----\nSECRETPART1\nkey SECRETPART2 end\n"))
	got := takenLines(t, o)
	if want := "***|***|key *** end"; strings.Join(got, "|") != want {
		t.Errorf("lines %q, want %q", strings.Join(got, "|"), want)
	}
	if s := o.MaskString("failed: -----BEGIN KEY-----\r\nSECRETPART1\nSECRETPART2\n\n!"); s != "failed: ***!" {
		t.Errorf("MaskString: %q, want the whole secret masked", s)
	}
}

// takenLines takes o's output and returns the text of each line.
func takenLines(t *testing.T, o *Output) []string {
	t.Helper()
	data, _, _ := o.Take(true)
	lines, err := DecodeLines(data)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, string(l.Text))
	}
	return got
}

// A secret's file may be a link to a regular file, as mounted Kubernetes
// secrets are.
func TestSecretDirFollowsALinkToAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "..data"), []byte(testSecret+"\n"), 0o600))
	must(t, os.Symlink("..data", filepath.Join(dir, "token")))
	v, err := SecretDir(dir).Secret(context.Background(), "token")
	if err != nil || v != testSecret {
		t.Errorf("got %q, %v; want the value of the linked file", v, err)
	}
}

// A variable too long for a command's environment fails the attempt
// naming it, without running the command.
func TestCommandEnvTooLongIsNamed(t *testing.T) {
	t.Parallel()
	a := attempt("tk-long")
	a.Env = map[string]string{"SHORT": "x", "BIG_TOKEN": strings.Repeat("y", 200<<10)}
	r, err := script(`exit 0`, "", "").Execute(context.Background(), a)
	const want = "env BIG_TOKEN: 204810 bytes with its name, over the 131071 bytes a variable of a command's environment may hold"
	if err != nil || r.Status != StatusFailed || !strings.HasPrefix(r.Error, want) {
		t.Errorf("%s %q %v, want failed with %q", r.Status, r.Error, err, want)
	}
}
