package access

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CookieName is the console's session cookie.
const CookieName = "ax_session"

// Sessions issues and checks the console's session cookies: a user's name,
// when it was issued and expires, a fingerprint of the user's entry and a
// nonce, signed with the installation's key (HMAC-SHA256). A cookie is
// refused once it expires, once its user leaves the users file or changes
// token, role or scope (and a user who comes back signs in again), and
// once signed out. Safe for concurrent use.
type Sessions struct {
	ttl    time.Duration
	shared Shared // nil: the key and the ended sessions are this process's

	mu      sync.Mutex
	key     []byte               // nil until read from shared
	revoked map[string]time.Time // nonce → expiry, until then
	left    map[string]time.Time // user → when seen gone: sessions issued before are refused
}

// Shared keeps what every server on one store shares of the sessions, so
// that a cookie one signs is good at the others, and after a restart or a
// failover: the signing key, made once, and the sessions signed out.
type Shared interface {
	// Key returns the stored signing key, storing key when there is none.
	Key(ctx context.Context, key []byte) ([]byte, error)
	// End records that the session of nonce is over, until exp.
	End(ctx context.Context, nonce string, exp time.Time) error
	// Ended reports whether End recorded nonce.
	Ended(ctx context.Context, nonce string) (bool, error)
}

// NewSessions signs with key (32 random bytes when empty: sessions end
// with the process) and lets a session last ttl (zero: 12 hours).
func NewSessions(key []byte, ttl time.Duration) *Sessions {
	if len(key) == 0 {
		key = newKey()
	}
	if ttl <= 0 {
		ttl = 12 * time.Hour
	}
	return &Sessions{key: key, ttl: ttl, revoked: map[string]time.Time{}, left: map[string]time.Time{}}
}

// NewSharedSessions signs with the key kept in shared, made by the first
// server to need it, and records sign-outs there.
func NewSharedSessions(shared Shared, ttl time.Duration) *Sessions {
	s := NewSessions([]byte{0}, ttl)
	s.key, s.shared = nil, shared
	return s
}

func newKey() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	return key
}

// Ready reads the signing key from the shared store, making it there when
// there is none; the error says why it cannot.
func (s *Sessions) Ready(ctx context.Context) error {
	_, err := s.signingKey(ctx)
	return err
}

// signingKey is the key, read from shared (and made there) the first time.
func (s *Sessions) signingKey(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	key, err := s.shared.Key(ctx, newKey())
	if err != nil {
		return nil, fmt.Errorf("cannot read the session key from the store (%v): retry when the store answers", err)
	}
	s.key = key
	return key, nil
}

// TTL is how long a session lasts.
func (s *Sessions) TTL() time.Duration { return s.ttl }

// fingerprint changes when the user's token, role or scope does.
func fingerprint(u *User) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s|%s|%v|%v|%v", u.Hash, u.Role, u.Groups, u.Pipelines, u.ActFor))
	return hex.EncodeToString(sum[:8])
}

// Issue returns the cookie value of a new session of u and when it expires.
func (s *Sessions) Issue(ctx context.Context, u *User, now time.Time) (string, time.Time, error) {
	key, err := s.signingKey(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	var n [12]byte
	_, _ = rand.Read(n[:])
	exp := now.Add(s.ttl).Truncate(time.Second)
	payload := strings.Join([]string{u.Name, strconv.FormatInt(now.Unix(), 10), strconv.FormatInt(exp.Unix(), 10), fingerprint(u), hex.EncodeToString(n[:])}, "|")
	p := base64.RawURLEncoding.EncodeToString([]byte(payload))
	return p + "." + sign(key, p), exp, nil
}

func sign(key []byte, p string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(p))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// session is a cookie's content once its signature checked.
type session struct {
	name, fp, nonce string
	iat, exp        time.Time
}

// errForeign refuses a cookie this installation did not sign.
var errForeign = errors.New("the session cookie was not signed by this installation (it comes from a server on another store, or was altered): sign in again")

func (s *Sessions) open(ctx context.Context, value string) (session, error) {
	key, err := s.signingKey(ctx)
	if err != nil {
		return session{}, err
	}
	p, sig, ok := strings.Cut(value, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(sign(key, p))) {
		return session{}, errForeign
	}
	malformed := errors.New("the session cookie is malformed: sign in again")
	raw, err := base64.RawURLEncoding.DecodeString(p)
	parts := strings.Split(string(raw), "|")
	if err != nil || len(parts) != 5 {
		return session{}, malformed
	}
	iat, err1 := strconv.ParseInt(parts[1], 10, 64)
	exp, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return session{}, malformed
	}
	return session{name: parts[0], iat: time.Unix(iat, 0), exp: time.Unix(exp, 0), fp: parts[3], nonce: parts[4]}, nil
}

// Check returns the user of a session cookie, found by lookup, or why the
// cookie is refused.
func (s *Sessions) Check(ctx context.Context, value string, lookup func(name string) *User, now time.Time) (*User, error) {
	ss, err := s.open(ctx, value)
	if err != nil {
		return nil, err
	}
	if !now.Before(ss.exp) {
		return nil, fmt.Errorf("the session of %s expired at %s: sign in again", ss.name, ss.exp.UTC().Format(time.RFC3339))
	}
	ended, err := s.ended(ctx, ss.nonce)
	if err != nil {
		return nil, err
	}
	if ended {
		return nil, fmt.Errorf("the session of %s was ended by signing out: sign in again", ss.name)
	}
	u := lookup(ss.name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if u == nil {
		s.leftAt(ss.name, now)
		return nil, fmt.Errorf("user %s is no longer in the users file: their session is revoked", ss.name)
	}
	if at, gone := s.left[ss.name]; gone && !ss.iat.After(at) {
		return nil, fmt.Errorf("user %s left the users file at %s, after signing in: their session stays revoked; sign in again", ss.name, at.UTC().Format(time.RFC3339))
	}
	if fingerprint(u) != ss.fp {
		return nil, fmt.Errorf("the token, role or scope of %s changed since they signed in: sign in again", ss.name)
	}
	return u, nil
}

// Expires is when the session of a cookie Check accepted expires (zero
// for a cookie not signed here).
func (s *Sessions) Expires(ctx context.Context, value string) time.Time {
	ss, err := s.open(ctx, value)
	if err != nil {
		return time.Time{}
	}
	return ss.exp
}

// Left records that user name left the users file at at: the sessions
// issued before stay refused when the user comes back.
func (s *Sessions) Left(name string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leftAt(name, at)
}

func (s *Sessions) leftAt(name string, at time.Time) {
	if at.After(s.left[name]) {
		s.left[name] = at
	}
}

// ended reports whether the session of nonce was signed out.
func (s *Sessions) ended(ctx context.Context, nonce string) (bool, error) {
	s.mu.Lock()
	_, gone := s.revoked[nonce]
	s.mu.Unlock()
	if gone || s.shared == nil {
		return gone, nil
	}
	gone, err := s.shared.Ended(ctx, nonce)
	if err != nil {
		return false, fmt.Errorf("cannot read the signed-out sessions from the store (%v): retry when the store answers", err)
	}
	return gone, nil
}

// Revoke ends the session of a cookie (signing out): it is refused from
// now on, here and at every server of the store, though it has not
// expired. A cookie not signed here is ignored.
func (s *Sessions) Revoke(ctx context.Context, value string, now time.Time) error {
	ss, err := s.open(ctx, value)
	if err != nil || !now.Before(ss.exp) {
		return nil
	}
	s.mu.Lock()
	for n, exp := range s.revoked { // forget the ones that expired anyway
		if !now.Before(exp) {
			delete(s.revoked, n)
		}
	}
	s.revoked[ss.nonce] = ss.exp
	s.mu.Unlock()
	if s.shared == nil {
		return nil
	}
	if err := s.shared.End(ctx, ss.nonce, ss.exp); err != nil {
		return fmt.Errorf("cannot record the sign-out in the store (%v): this server refuses the session, the others may not; retry", err)
	}
	return nil
}
