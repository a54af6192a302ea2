package access

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	aliceHash = HashToken("alice-token")
	bobHash   = HashToken("bob-token")
)

func TestParseGood(t *testing.T) {
	t.Parallel()
	src := "users:\n" +
		"  - {name: alice, role: operator, groups: [etl], token: " + aliceHash + "}\n" +
		"  - {name: bob, role: viewer, token: " + bobHash + "}\n"
	us, err := Parse("users.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := us.Names(); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Errorf("names %v", got)
	}
	if u := us.Authenticate("alice-token"); u == nil || u.Name != "alice" || u.Role != Operator || !slices.Equal(u.Groups, []string{"etl"}) {
		t.Errorf("alice's token: %+v", u)
	}
	if u := us.Authenticate(aliceHash); u != nil {
		t.Errorf("the hash itself authenticates as %s", u.Name)
	}
	if u := us.Authenticate("nope"); u != nil {
		t.Errorf("a wrong token authenticates as %s", u.Name)
	}
}

// TestParseRefusesBadFiles: every bad users file is refused with a message
// naming the file, the line and what to write.
func TestParseRefusesBadFiles(t *testing.T) {
	t.Parallel()
	known := func(kind, name string) (bool, []string) {
		names := map[string][]string{"group": {"etl", "sales"}, "pipeline": {"shop"}}[kind]
		return slices.Contains(names, name), names
	}
	for _, c := range []struct{ name, src, want string }{
		{"duplicate name", "users:\n  - {name: alice, role: viewer, token: " + aliceHash + "}\n  - {name: alice, role: admin, token: " + bobHash + "}\n",
			`users.yaml:3:5: user "alice" is named twice (first at line 2): give each user one entry`},
		{"unknown role", "users:\n  - {name: alice, role: superuser, token: " + aliceHash + "}\n",
			`users.yaml:2:25: user "alice": unknown role "superuser": use viewer, operator, admin`},
		{"unknown group", "users:\n  - {name: alice, role: operator, groups: [elt], token: " + aliceHash + "}\n",
			`users.yaml:2:43: user "alice": no group "elt" in the pipelines (did you mean "etl"?)`},
		{"unknown group, none close", "users:\n  - {name: alice, role: operator, groups: [finance], token: " + aliceHash + "}\n",
			`user "alice": no group "finance" in the pipelines (there are etl, sales)`},
		{"unknown pipeline", "users:\n  - {name: alice, role: operator, pipelines: [shoop], token: " + aliceHash + "}\n",
			`user "alice": no pipeline "shoop" in the pipelines (did you mean "shop"?)`},
		{"unknown scope key", "users:\n  - {name: alice, role: operator, teams: [etl], token: " + aliceHash + "}\n",
			`users.yaml:2:5: unknown key teams: a user has name, role, groups, pipelines, act_for and token`},
		{"clear-text token", "users:\n  - {name: alice, role: viewer, token: hunter2}\n",
			`users.yaml:2:40: user "alice": token is a token in clear text: write its hash, sha256: and 64 lowercase hex digits (ax users add writes one; a clear-text token is never kept)`},
		{"short hash", "users:\n  - {name: alice, role: viewer, token: sha256:abc}\n", `token is a malformed hash`},
		{"no token", "users:\n  - {name: alice, role: viewer}\n", `user "alice": token is a malformed hash`},
		{"reserved name", "users:\n  - {name: scheduler, role: viewer, token: " + aliceHash + "}\n", `user name "scheduler" is the scheduler's own`},
		{"bad name", "users:\n  - {name: 'a b', role: viewer, token: " + aliceHash + "}\n", `user name "a b": use 1 to 64 letters`},
		{"repeated token", "users:\n  - {name: alice, role: viewer, token: " + aliceHash + "}\n  - {name: bob, role: admin, token: " + aliceHash + "}\n",
			`users.yaml:3:5: user "bob" has the token of user "alice" (line 2): give each user a token of its own (ax users add makes one)`},
		{"names differing by case", "users:\n  - {name: alice, role: viewer, token: " + aliceHash + "}\n  - {name: Alice, role: admin, token: " + bobHash + "}\n",
			`users.yaml:3:5: user "Alice" differs from user "alice" (line 2) only in case: give each person one entry, or names that differ in letters`},
		{"the admin token's name", "users:\n  - {name: admin, role: viewer, token: " + aliceHash + "}\n", `user name "admin" is the user of AX_ADMIN_TOKEN: choose another`},
		{"another hash", "users:\n  - {name: alice, role: viewer, token: 'sha512:abc'}\n", `token is a hash of another form: only sha256: and 64 lowercase hex digits is accepted`},
		{"upper-case scheme", "users:\n  - {name: alice, role: viewer, token: 'SHA256:abc'}\n", `token is a hash of another form: only sha256: and 64 lowercase hex digits is accepted`},
		{"malformed group", "users:\n  - {name: alice, role: operator, groups: ['x y'], token: " + aliceHash + "}\n",
			`users.yaml:2:43: user "alice": group "x y": write a name of letters, digits, _ and -, starting with a letter or _ (as the pipelines name them)`},
		{"malformed pipeline", "users:\n  - {name: alice, role: operator, pipelines: [a.b], token: " + aliceHash + "}\n",
			`user "alice": pipeline "a.b": write a name of letters, digits, _ and -`},
		{"group twice", "users:\n  - {name: alice, role: operator, groups: [etl, etl], token: " + aliceHash + "}\n",
			`user "alice": group "etl" is named twice: name it once`},
		{"other key", "people: []\n", `users.yaml:1:1: unknown key "people": the file has one key, users`},
	} {
		t.Run(c.name, func(t *testing.T) {
			us, err := Parse("users.yaml", []byte(c.src), known)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, %v; want an error containing\n%s", us, err, c.want)
			}
		})
	}
}

// TestFileReloadKeepsUsersOnBadContent: a bad users file leaves the users
// in force as they were, and a good one replaces them.
func TestFileReloadKeepsUsersOnBadContent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("users:\n  - {name: alice, role: operator, token: " + aliceHash + "}\n")
	var logs bytes.Buffer
	f, err := Open(path, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	write("users:\n  - {name: alice, role: operator, token: alice-token}\n")
	if err := f.Reload(); err == nil || !strings.Contains(err.Error(), "clear text") {
		t.Fatalf("reload of a clear-text token: %v", err)
	}
	if u := f.Users().Authenticate("alice-token"); u == nil || u.Role != Operator {
		t.Errorf("after a refused reload alice is %+v", u)
	}
	if !strings.Contains(logs.String(), "users_reload_refused") {
		t.Errorf("the refusal is not logged: %s", logs.String())
	}
	if err := f.Refused(); err == nil || !strings.Contains(err.Error(), "clear text") {
		t.Errorf("Refused after a refused reload: %v", err)
	}
	var left []string
	f.OnLeave(func(name string, _ time.Time) { left = append(left, name) })
	write("users:\n  - {name: bob, role: viewer, token: " + bobHash + "}\n")
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	if f.Users().Lookup("alice") != nil || f.Users().Lookup("bob") == nil {
		t.Errorf("after a good reload: %v", f.Users().Names())
	}
	if !slices.Equal(left, []string{"alice"}) {
		t.Errorf("the reload told of %v leaving; want alice", left)
	}
	if err := f.Refused(); err != nil {
		t.Errorf("Refused after a good reload: %v", err)
	}
	// A file without users loads, with a warning: nobody can sign in with it.
	write("users: []\n")
	if err := f.Reload(); err != nil || len(f.Users().Names()) != 0 {
		t.Fatalf("an empty file: %v %v", err, f.Users().Names())
	}
	if !strings.Contains(logs.String(), "users_file_empty") {
		t.Errorf("an empty users file is not warned of: %s", logs.String())
	}
}

// TestAddWritesTheHashOnly: ax users add's token authenticates, and the
// file keeps only its hash; a second add of the name changes nothing.
func TestAddWritesTheHashOnly(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.yaml")
	tok, err := Add(path, User{Name: "alice", Role: Operator, Groups: []string{"etl"}})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), tok) || !strings.Contains(string(data), HashToken(tok)) {
		t.Fatalf("the file keeps the token, or not its hash:\n%s", data)
	}
	f, err := Open(path, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if u := f.Users().Authenticate(tok); u == nil || u.Name != "alice" || !slices.Equal(u.Groups, []string{"etl"}) {
		t.Errorf("the new token authenticates as %+v", u)
	}
	if _, err := Add(path, User{Name: "alice", Role: Admin}); err == nil || !strings.Contains(err.Error(), `user "alice" is there already`) {
		t.Errorf("a second add: %v", err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, data) {
		t.Errorf("a refused add changed the file:\n%s", again)
	}
}

func TestAllow(t *testing.T) {
	t.Parallel()
	etl := &User{Name: "alice", Role: Operator, Groups: []string{"etl"}}
	for _, c := range []struct {
		name string
		u    *User
		need Role
		t    Target
		want string // "" allowed
	}{
		{"viewer pauses", &User{Name: "v", Role: Viewer}, Operator, Target{Pipeline: "shop", Group: "etl"}, "v (viewer) may not pause: that needs the operator role"},
		{"in group", etl, Operator, Target{Pipeline: "shop", Group: "etl"}, ""},
		{"other group", etl, Operator, Target{Pipeline: "shop", Group: "sales"},
			"alice (operator of group etl) may not pause on pipeline shop, group sales: that needs a scope naming pipeline shop or group sales"},
		{"pipeline all in group", etl, Operator, Target{Pipeline: "shop", Groups: []string{"etl"}}, ""},
		{"pipeline partly out", etl, Operator, Target{Pipeline: "shop", Groups: []string{"etl", "sales"}}, "needs a scope naming pipeline shop (or every group of its tasks: etl, sales)"},
		{"group pause", etl, Operator, Target{Group: "sales"}, "needs a scope naming group sales"},
		{"scoped reads", etl, Viewer, Target{}, ""},
		{"operator sets limits", etl, Admin, Target{}, "alice (operator of group etl) may not pause: that needs the admin role"},
		{"scoped admin, global", &User{Name: "a", Role: Admin, Pipelines: []string{"shop"}}, Admin, Target{}, "needs an unscoped admin"},
	} {
		err := Allow(c.u, c.need, "pause", c.t)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
}

// TestSessionRefusals: a cookie of another installation, an expired one
// replayed, one signed out, and one of a removed or changed user are each
// refused with the reason; a user removed and restored signs in again.
func TestSessionRefusals(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	now := time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)
	alice := &User{Name: "alice", Role: Operator, Hash: aliceHash}
	users := map[string]*User{"alice": alice}
	lookup := func(n string) *User { return users[n] }
	s := NewSessions([]byte("key-one"), time.Hour)
	val, exp, err := s.Issue(ctx, alice, now)
	if err != nil || !exp.Equal(now.Add(time.Hour)) {
		t.Errorf("expires %v, %v", exp, err)
	}
	if u, err := s.Check(ctx, val, lookup, now.Add(59*time.Minute)); err != nil || u != alice {
		t.Fatalf("a fresh cookie: %v %v", u, err)
	}
	other := NewSessions([]byte("key-two"), time.Hour)
	for _, c := range []struct {
		name string
		s    *Sessions
		val  string
		at   time.Time
		want string
	}{
		{"another installation", other, val, now, "not signed by this installation"},
		{"altered", s, "x" + val, now, "not signed by this installation"},
		{"expired", s, val, now.Add(time.Hour), "the session of alice expired at 2026-12-08T11:00:00Z: sign in again"},
		{"garbage", s, "garbage", now, "not signed by this installation"},
	} {
		if u, err := c.s.Check(ctx, c.val, lookup, c.at); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v %v; want %q", c.name, u, err, c.want)
		}
	}
	users["alice"] = &User{Name: "alice", Role: Admin, Hash: aliceHash}
	if _, err := s.Check(ctx, val, lookup, now); err == nil || !strings.Contains(err.Error(), "role or scope of alice changed") {
		t.Errorf("after a role change: %v", err)
	}
	delete(users, "alice")
	if _, err := s.Check(ctx, val, lookup, now.Add(time.Minute)); err == nil || !strings.Contains(err.Error(), "user alice is no longer in the users file") {
		t.Errorf("after removal: %v", err)
	}
	users["alice"] = alice
	if _, err := s.Check(ctx, val, lookup, now.Add(2*time.Minute)); err == nil ||
		!strings.Contains(err.Error(), "user alice left the users file at 2026-12-08T10:01:00Z, after signing in: their session stays revoked") {
		t.Errorf("removed, then restored: %v; want the old session still revoked", err)
	}
	// Told of a removal (by the users file's reload) with no check between: the restore revives nothing either.
	val1b, _, _ := s.Issue(ctx, alice, now.Add(150*time.Second))
	s.Left("alice", now.Add(160*time.Second))
	if _, err := s.Check(ctx, val1b, lookup, now.Add(170*time.Second)); err == nil || !strings.Contains(err.Error(), "their session stays revoked") {
		t.Errorf("a session of a user who left and came back, unchecked between: %v", err)
	}
	val2, _, _ := s.Issue(ctx, alice, now.Add(3*time.Minute))
	if u, err := s.Check(ctx, val2, lookup, now.Add(3*time.Minute)); err != nil || u != alice {
		t.Fatalf("a session of the restored user: %v %v", u, err)
	}
	if err := s.Revoke(ctx, val2, now.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Check(ctx, val2, lookup, now.Add(3*time.Minute)); err == nil || !strings.Contains(err.Error(), "ended by signing out") {
		t.Errorf("after sign-out: %v", err)
	}
	if v3, _, _ := s.Issue(ctx, alice, now); v3 == val {
		t.Error("two sessions share a cookie")
	}
}

// TestFileWatchReloadsOnChange: a tick after the file changed loads it; a
// SIGHUP-like signal loads it too.
func TestFileWatchReloadsOnChange(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("users:\n  - {name: alice, role: operator, token: " + aliceHash + "}\n")
	f, err := Open(path, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ticks, hup := make(chan time.Time), make(chan os.Signal)
	go f.Watch(t.Context(), ticks, hup)
	write("users:\n  - {name: bob, role: viewer, token: " + bobHash + "}\n")
	ticks <- time.Now()
	ticks <- time.Now() // the first tick's reload is done once the loop takes the second
	if f.Users().Lookup("bob") == nil || f.Users().Lookup("alice") != nil {
		t.Errorf("after a change and a tick: %v", f.Users().Names())
	}
	write("users:\n  - {name: carol, role: admin, token: " + aliceHash + "}\n")
	hup <- os.Interrupt
	ticks <- time.Now()
	if f.Users().Lookup("carol") == nil {
		t.Errorf("after a change and a signal: %v", f.Users().Names())
	}
}

// TestAddConcurrently: adds running at once each land (or are refused
// when the name is there): none is lost by another's rewrite.
func TestAddConcurrently(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.yaml")
	const n = 24
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := Add(path, User{Name: fmt.Sprintf("u%02d", i), Role: Viewer})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	f, err := Open(path, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(f.Users().Names()); got != n {
		t.Errorf("%d users in the file after %d adds at once: %v", got, n, f.Users().Names())
	}
}

// TestAddThroughALink: a users file that is a symbolic link is written
// through to its target, whose mode is kept.
func TestAddThroughALink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target, link := filepath.Join(dir, "real.yaml"), filepath.Join(dir, "link.yaml")
	if err := os.WriteFile(target, []byte("users:\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Add(link, User{Name: "alice", Role: Viewer}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link after an add: %v %v; want it still a link", fi.Mode(), err)
	}
	fi, err := os.Stat(target)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("the target's mode after an add: %v %v; want 0640 kept", fi.Mode(), err)
	}
	if data, _ := os.ReadFile(target); !strings.Contains(string(data), "alice") {
		t.Errorf("the target does not hold the new user:\n%s", data)
	}
}
