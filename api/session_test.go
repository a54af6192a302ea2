package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/access"
	"github.com/ax-sched/ax/api/apitest"
)

// TestSessionCookie: signing in sets an HttpOnly, SameSite=Strict,
// expiring cookie that reads and writes as its user; a wrong token sets
// none; a cookie of another server, a replayed expired one, one signed out
// and one of a removed user are each refused with the reason, and change
// nothing.
func TestSessionCookie(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	ae := setupUsers(t, apitest.Opts{}, func(c *Config) {
		c.Now, c.Sessions = now, access.NewSessions([]byte("server-one"), time.Hour)
	})
	other := setupUsers(t, apitest.Opts{}, func(c *Config) { c.Sessions = access.NewSessions([]byte("server-two"), time.Hour) })
	call := func(env *authEnv, cookie *http.Cookie, method, path, body string) (int, string, *http.Response) {
		t.Helper()
		req, _ := http.NewRequest(method, env.Srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := env.Srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp
	}
	if code, body, resp := call(ae, nil, "POST", "/api/v1/session", `{"name": "otto", "token": "vera-token"}`); code != 401 || len(resp.Cookies()) != 0 ||
		!strings.Contains(body, `no user \"otto\" with this token`) {
		t.Errorf("sign-in with another's token: %d %s %v", code, body, resp.Cookies())
	}
	code, body, resp := call(ae, nil, "POST", "/api/v1/session", `{"name": "otto", "token": "otto-token"}`)
	if code != 200 || len(resp.Cookies()) != 1 {
		t.Fatalf("sign-in: %d %s", code, body)
	}
	ck := resp.Cookies()[0]
	if ck.Name != "ax_session" || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.MaxAge != 3600 || ck.Expires.IsZero() {
		t.Errorf("the cookie: %+v", ck)
	}
	if code, body, _ := call(ae, ck, "GET", "/api/v1/session", ""); code != 200 || !strings.Contains(body, `"user": "otto"`) || !strings.Contains(body, `"role": "operator"`) ||
		!strings.Contains(body, `"expires_at": "`+ck.Expires.UTC().Format(time.RFC3339)) {
		t.Errorf("session: %d %s", code, body)
	}
	if code, body, _ := call(ae, ck, "POST", "/api/v1/pipelines/shop/tasks/sync/pause", ""); code != 200 {
		t.Errorf("pause with the cookie: %d %s", code, body)
	}
	before, otherBefore := ae.State(), other.State()
	refused := func(env *authEnv, c *http.Cookie, want string) {
		t.Helper()
		for _, r := range []struct{ method, path string }{{"GET", "/api/v1/session"}, {"POST", "/api/v1/pipelines/shop/tasks/clean/pause"}} {
			code, body, resp := call(env, c, r.method, r.path, "")
			if code != 401 || !strings.Contains(body, want) {
				t.Errorf("%s %s: %d %s; want 401 %q", r.method, r.path, code, body, want)
			}
			if cs := resp.Cookies(); len(cs) != 1 || cs[0].Name != access.CookieName || cs[0].MaxAge >= 0 {
				t.Errorf("%s %s: the refused cookie is not cleared: %v", r.method, r.path, cs)
			}
		}
	}
	refused(other, ck, "the session cookie was not signed by this installation")
	skew.Store(int64(time.Hour))
	refused(ae, ck, "the session of otto expired at")
	skew.Store(0)
	// Removed from the users file: the session ends with the entry.
	full := ae.users.Load()
	less, err := access.Parse("users.yaml", []byte("users:\n  - {name: vera, role: viewer, token: "+access.HashToken("vera-token")+"}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ae.users.Store(less)
	refused(ae, ck, "user otto is no longer in the users file")
	ae.users.Store(full)
	// Signed out: the cookie is cleared, and the old one replayed is refused.
	code, body, resp = call(ae, ck, "DELETE", "/api/v1/session", "")
	if code != 200 || len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 {
		t.Errorf("sign-out: %d %s %v", code, body, resp.Cookies())
	}
	refused(ae, ck, "the session of otto was ended by signing out")
	if ae.State() != before || other.State() != otherBefore {
		t.Error("a refused cookie changed a store")
	}
}

// TestSessionsSharedByTheStore: the key that signs sessions is kept in
// the store, so a second server on it (a standby taking over, a restart,
// two servers behind one address) accepts the cookies the first signed,
// and the other way round, and a sign-out at one ends the session at
// both; a server on another store refuses them. No answer shows the key.
func TestSessionsSharedByTheStore(t *testing.T) {
	t.Parallel()
	ae := setupUsers(t, apitest.Opts{}, nil)
	standby := httptest.NewServer(Handler(Config{Store: ae.St, Graph: ae.Graph, Users: ae.users.Load}))
	t.Cleanup(standby.Close)
	other := setupUsers(t, apitest.Opts{}, nil)
	call := func(url string, c *http.Cookie, method, path, body string) (int, string, *http.Response) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if c != nil {
			req.AddCookie(c)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp
	}
	signIn := func(url, name string) *http.Cookie {
		t.Helper()
		code, body, resp := call(url, nil, "POST", "/api/v1/session", `{"name": "`+name+`", "token": "`+name+`-token"}`)
		if code != 200 || len(resp.Cookies()) != 1 {
			t.Fatalf("sign-in of %s at %s: %d %s", name, url, code, body)
		}
		return resp.Cookies()[0]
	}
	atPrimary, atStandby := signIn(ae.Srv.URL, "otto"), signIn(standby.URL, "ada")
	if code, body, _ := call(standby.URL, atPrimary, "GET", "/api/v1/session", ""); code != 200 || !strings.Contains(body, `"user": "otto"`) {
		t.Errorf("the primary's cookie at the standby: %d %s", code, body)
	}
	if code, body, _ := call(ae.Srv.URL, atStandby, "POST", "/api/v1/pipelines/shop/tasks/sync/pause", ""); code != 200 {
		t.Errorf("the standby's cookie at the primary: %d %s", code, body)
	}
	before := other.State()
	for _, ck := range []*http.Cookie{atPrimary, atStandby} {
		if code, body, _ := call(other.Srv.URL, ck, "POST", "/api/v1/pipelines/shop/tasks/clean/pause", ""); code != 401 || !strings.Contains(body, "not signed by this installation") {
			t.Errorf("a cookie at a server of another store: %d %s", code, body)
		}
	}
	if other.State() != before {
		t.Error("a foreign cookie changed the other store")
	}
	if code, body, _ := call(standby.URL, atPrimary, "DELETE", "/api/v1/session", ""); code != 200 {
		t.Fatalf("sign-out at the standby: %d %s", code, body)
	}
	if code, body, _ := call(ae.Srv.URL, atPrimary, "GET", "/api/v1/session", ""); code != 401 || !strings.Contains(body, "ended by signing out") {
		t.Errorf("a cookie signed out at the standby, at the primary: %d %s", code, body)
	}
	key, ok, err := ae.St.Setting(t.Context(), sessionKeySetting)
	if err != nil || !ok || len(key) != 64 {
		t.Fatalf("the stored key: %q %v %v; want 32 bytes in hex", key, ok, err)
	}
	for _, path := range []string{"/api/v1/status", "/api/v1/actions", "/api/v1/limits", "/api/v1/reload", "/api/v1/session"} {
		if _, body, _ := call(ae.Srv.URL, atStandby, "GET", path, ""); strings.Contains(body, key) {
			t.Errorf("GET %s shows the session key", path)
		}
	}
}

// TestSignOutsAreForgottenOnceExpired: a sign-out kept in the store is
// deleted once a session signed before it has expired anyway.
func TestSignOutsAreForgottenOnceExpired(t *testing.T) {
	t.Parallel()
	ae := setupUsers(t, apitest.Opts{}, nil)
	t0 := time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)
	var at atomic.Int64
	at.Store(t0.UnixMilli())
	ss := storedSessions{st: ae.St, ttl: time.Hour, now: func() time.Time { return time.UnixMilli(at.Load()) }}
	ctx := t.Context()
	if err := ss.End(ctx, "first", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	at.Store(t0.Add(59 * time.Minute).UnixMilli())
	if err := ss.End(ctx, "second", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ended, err := ss.Ended(ctx, "first"); err != nil || !ended {
		t.Fatalf("a sign-out younger than a session: ended %v (%v); want kept", ended, err)
	}
	at.Store(t0.Add(61 * time.Minute).UnixMilli())
	if err := ss.End(ctx, "third", t0.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for nonce, want := range map[string]bool{"first": false, "second": true, "third": true} {
		if ended, err := ss.Ended(ctx, nonce); err != nil || ended != want {
			t.Errorf("sign-out %s: kept %v (%v); want %v", nonce, ended, err, want)
		}
	}
}
