package api

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/ax-sched/ax/access"
	"github.com/ax-sched/ax/store"
)

// Session is who the console is signed in as: GET, POST and DELETE
// /api/v1/session answer it.
type Session struct {
	// Needed is false when the server asks nobody to sign in.
	Needed bool   `json:"needed"`
	User   string `json:"user,omitempty"` // empty: nobody signed in
	Role   string `json:"role,omitempty"` // viewer, operator, admin
	// Groups and Pipelines scope the user's actions (empty: everything).
	Groups    []string  `json:"groups,omitempty"`
	Pipelines []string  `json:"pipelines,omitempty"`
	How       string    `json:"how,omitempty"` // token, session, proxy
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// OpenReads: reads need no sign-in.
	OpenReads bool `json:"open_reads,omitempty"`
}

// withCookie is a handler's answer that sets a cookie.
type withCookie struct {
	c *http.Cookie
	v any
}

func (a *admin) sessionOf(who caller) Session {
	s := Session{Needed: a.auth.on(), OpenReads: a.openReads, How: who.how, ExpiresAt: who.exp}
	if u := who.user; u != nil {
		s.User, s.Role, s.Groups, s.Pipelines = u.Name, u.Role.String(), u.Groups, u.Pipelines
	}
	return s
}

// session answers who is signed in; a refused credential (an expired or
// foreign cookie) is a 401 that says why, and clears the cookie.
func (a *admin) session(r *http.Request) (any, error) {
	if _, err := parseQuery(r); err != nil {
		return nil, err
	}
	if !a.auth.on() {
		return a.sessionOf(caller{}), nil
	}
	who, err := a.authenticate(r)
	if err != nil {
		if _, kept := r.Cookie(access.CookieName); kept == nil {
			return withCookie{clearedCookie(r), err}, nil
		}
		return nil, err
	}
	return a.sessionOf(who), nil
}

// signIn checks a name and token and sets the session cookie.
func (a *admin) signIn(r *http.Request) (any, error) {
	var b struct {
		Name  string `json:"name"`
		Token string `json:"token"`
	}
	if err := decodeBody(r, &b); err != nil {
		return nil, err
	}
	if !a.auth.on() || a.auth.sessions == nil {
		return nil, errf(http.StatusBadRequest, "this server asks nobody to sign in (no users file, no AX_ADMIN_TOKEN)")
	}
	if b.Name == "" || b.Token == "" {
		return nil, errf(http.StatusBadRequest, `give {"name": NAME, "token": TOKEN}: both are needed`)
	}
	u := a.auth.byToken(b.Token)
	if u == nil || u.Name != b.Name {
		return nil, errf(http.StatusUnauthorized, "no user %q with this token: check the name and the token (ax users add prints the token once)", b.Name)
	}
	val, exp, err := a.auth.sessions.Issue(r.Context(), u, a.now())
	if err != nil {
		return nil, errf(http.StatusServiceUnavailable, "%v", err)
	}
	ck := &http.Cookie{Name: access.CookieName, Value: val, Path: "/", Expires: exp, MaxAge: int(a.auth.sessions.TTL() / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
	return withCookie{ck, a.sessionOf(caller{user: u, how: "session", exp: exp})}, nil
}

// signOut ends the session of the cookie sent and clears it.
func (a *admin) signOut(r *http.Request) (any, error) {
	if ck, err := r.Cookie(access.CookieName); err == nil && a.auth.sessions != nil {
		if err := a.auth.sessions.Revoke(r.Context(), ck.Value, a.now()); err != nil {
			return nil, errf(http.StatusServiceUnavailable, "%v", err)
		}
	}
	return withCookie{clearedCookie(r), a.sessionOf(caller{})}, nil
}

// clearedCookie tells the browser to forget its session cookie.
func clearedCookie(r *http.Request) *http.Cookie {
	return &http.Cookie{Name: access.CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
}

// The settings that keep the sessions of every server on one store: the
// signing key (never shown by any route) and the sessions signed out.
const (
	sessionKeySetting   = "session_key"
	sessionEndedSetting = "session_ended/"
)

// storedSessions keeps the sessions' key and sign-outs in the store, so a
// standby taking over and every server behind one address accept the
// cookies any of them signed.
type storedSessions struct {
	st  *store.Store
	ttl time.Duration // a sign-out older than it ended a cookie expired since
	now func() time.Time
}

// StoredSessions returns sessions lasting ttl (zero: 12 hours) signed with
// the key kept in st, made by the first server that needs it.
func StoredSessions(st *store.Store, ttl time.Duration, now func() time.Time) *access.Sessions {
	if now == nil {
		now = time.Now
	}
	if ttl <= 0 {
		ttl = 12 * time.Hour
	}
	return access.NewSharedSessions(storedSessions{st, ttl, now}, ttl)
}

func (s storedSessions) Key(ctx context.Context, key []byte) ([]byte, error) {
	v, err := s.st.SettingOnce(ctx, sessionKeySetting, hex.EncodeToString(key), s.now())
	if err != nil {
		return nil, err
	}
	b, err := hex.DecodeString(v)
	if err != nil || len(b) < 16 {
		return nil, fmt.Errorf("the stored %s is not a key of 32 bytes in hex: delete that setting and every server makes a new one (everyone signs in again)", sessionKeySetting)
	}
	return b, nil
}

// End records a sign-out, and forgets those older than a session lasts:
// the cookies they ended have expired.
func (s storedSessions) End(ctx context.Context, nonce string, exp time.Time) error {
	now := s.now()
	if _, err := s.st.SettingOnce(ctx, sessionEndedSetting+nonce, exp.UTC().Format(time.RFC3339), now); err != nil {
		return err
	}
	_, err := s.st.DeleteSettingsBefore(ctx, sessionEndedSetting, now.Add(-s.ttl))
	return err
}

func (s storedSessions) Ended(ctx context.Context, nonce string) (bool, error) {
	_, ok, err := s.st.Setting(ctx, sessionEndedSetting+nonce)
	return ok, err
}
