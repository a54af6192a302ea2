package api

import (
	"io"
	"net/http"
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
	if code, body, _ := call(ae, ck, "GET", "/api/v1/session", ""); code != 200 || !strings.Contains(body, `"user": "otto"`) || !strings.Contains(body, `"role": "operator"`) {
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
	refused(other, ck, "the session cookie was not signed by this server")
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
