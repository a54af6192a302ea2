package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/access"
	"github.com/ax-sched/ax/cli"
)

// TestUsersAdd: ax users add prints a token once and the file keeps its
// hash; a name already there and an unknown role are refused, the file
// unchanged.
func TestUsersAdd(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "users.yaml")
	code, out, errOut := runAx(t, "users", "add", "alice", "--role", "operator", "--group", "etl", "--file", file)
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	tok := strings.TrimSpace(out)
	data, _ := os.ReadFile(file)
	if strings.Count(out, "\n") != 1 || !strings.Contains(string(data), access.HashToken(tok)) || strings.Contains(string(data), tok) {
		t.Fatalf("stdout %q; file:\n%s", out, data)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"users", "add", "alice", "--role", "admin", "--file", file}, `user "alice" is there already`},
		{[]string{"users", "add", "bob", "--role", "superuser", "--file", file}, `--role: unknown role "superuser": use viewer, operator, admin`},
		{[]string{"users", "add", "bob", "--file", file}, "give --role"},
	} {
		code, _, errOut := runAx(t, c.args...)
		if code == cli.ExitOK || !strings.Contains(errOut, c.want) {
			t.Errorf("ax %s: exit %d %s; want %q", strings.Join(c.args, " "), code, errOut, c.want)
		}
		if again, _ := os.ReadFile(file); string(again) != string(data) {
			t.Errorf("ax %s changed the file", strings.Join(c.args, " "))
		}
	}
}

// TestServerRefusesBadUsersFile: ax server does not start on a bad users
// file or half the proxy flags, and touches no store.
func TestServerRefusesBadUsersFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "users.yaml")
	if err := os.WriteFile(bad, []byte("users:\n  - {name: alice, role: viewer, token: hunter2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "ax.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--users", bad}, `users.yaml:2:40: user "alice": token is a token in clear text`},
		{[]string{"--auth-proxy-header", "X-Forwarded-User"}, "--auth-proxy-header and --auth-proxy-from go together"},
		{[]string{"--auth-proxy-header", "X-Forwarded-User", "--auth-proxy-from", "127.0.0.1"}, `--auth-proxy-from "127.0.0.1": give an address range`},
	} {
		args := append([]string{"server", "--pipelines", "../../examples", "--store", db, "--listen", ""}, c.args...)
		code, _, errOut := runAx(t, args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("ax %s: exit %d %s; want %q", strings.Join(c.args, " "), code, errOut, c.want)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("a refused start touched the store: %v", err)
	}
}

// TestSignInRequired: a users file asks who calls as AX_ADMIN_TOKEN does
// (the start log's sign_in_required said false with --users alone).
func TestSignInRequired(t *testing.T) {
	for _, c := range []struct {
		f     authFlags
		token string
		want  bool
	}{{authFlags{}, "", false}, {authFlags{}, "s3cret", true}, {authFlags{users: "users.yaml"}, "", true}} {
		if got := c.f.signInRequired(c.token); got != c.want {
			t.Errorf("users %q, token %q: %v; want %v", c.f.users, c.token, got, c.want)
		}
	}
}
