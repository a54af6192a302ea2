package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The executor credential: made once (0600) and read again; two servers
// starting at once agree on one; AX_EXECUTOR_TOKEN wins; a file others may
// read, an empty one, a MySQL store without one, or one equal to the admin
// token are refused, each with what to do, and leave the file as it was.
func TestExecutorCredential(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := defaultExecutorTokenFile(filepath.Join(dir, "ax.db"))
	if file != filepath.Join(dir, "executor.token") {
		t.Fatalf("default file %s", file)
	}
	toks := make([]string, 8)
	var wg sync.WaitGroup
	for i := range toks {
		wg.Go(func() {
			var err error
			if toks[i], err = executorToken("", file, "", "ax.db"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, tok := range toks {
		if len(tok) != 64 || tok != toks[0] {
			t.Fatalf("servers starting at once got %q: want one 64-hex-digit token", toks)
		}
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credential file: %v %v, want mode 0600", fi, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".executor-token-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if tok, err := executorToken("", file, "", "ax.db"); err != nil || tok != toks[0] {
		t.Errorf("read again: %q %v, want the token made first", tok, err)
	}
	if tok, err := executorToken("from-env", file, "", "ax.db"); err != nil || tok != "from-env" {
		t.Errorf("with AX_EXECUTOR_TOKEN: %q %v", tok, err)
	}
	open := filepath.Join(dir, "open.token")
	empty := filepath.Join(dir, "empty.token")
	if err := os.WriteFile(open, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, env, file, admin, target, want string }{
		{"a file others may read", "", open, "", "ax.db", "chmod 600"},
		{"an empty file", "", empty, "", "ax.db", "holds no token"},
		{"MySQL without a credential", "", defaultExecutorTokenFile("mysql://root@tcp(h:3306)/ax"), "", "mysql://root:s3cret@tcp(h:3306)/ax", "set AX_EXECUTOR_TOKEN, or give --executor-token-file"},
		{"PostgreSQL without a credential", "", defaultExecutorTokenFile("postgres://ax@h:5432/ax"), "", "postgres://ax:s3cret@h:5432/ax", "set AX_EXECUTOR_TOKEN, or give --executor-token-file"},
		{"postgresql:// without a credential", "", defaultExecutorTokenFile("postgresql://ax@h/ax"), "", "postgresql://ax:s3cret@h/ax", "set AX_EXECUTOR_TOKEN, or give --executor-token-file"},
		{"the admin token", "same", file, "same", "ax.db", "equals AX_ADMIN_TOKEN"},
		{"the admin token in the file", "", file, toks[0], "ax.db", "equals AX_ADMIN_TOKEN"},
	} {
		tok, err := executorToken(tc.env, tc.file, tc.admin, tc.target)
		if err == nil || !strings.Contains(err.Error(), tc.want) || tok != "" || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %q %v, want an error saying %q (and no password)", tc.name, tok, err, tc.want)
		}
	}
	if data, _ := os.ReadFile(open); string(data) != "secret\n" {
		t.Errorf("the refused file was changed: %q", data)
	}
}
