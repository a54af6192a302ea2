package access

import (
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
// an expiry, a fingerprint of the user's entry and a nonce, signed with
// the server's key (HMAC-SHA256). A cookie is refused once it expires,
// once its user leaves the users file or changes token, role or scope, and
// once signed out. Safe for concurrent use.
type Sessions struct {
	key []byte
	ttl time.Duration

	mu      sync.Mutex
	revoked map[string]time.Time // nonce → expiry, until then
}

// NewSessions signs with key (32 random bytes when empty: sessions end
// with the process) and lets a session last ttl (zero: 12 hours).
func NewSessions(key []byte, ttl time.Duration) *Sessions {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	if ttl <= 0 {
		ttl = 12 * time.Hour
	}
	return &Sessions{key: key, ttl: ttl, revoked: map[string]time.Time{}}
}

// TTL is how long a session lasts.
func (s *Sessions) TTL() time.Duration { return s.ttl }

// fingerprint changes when the user's token, role or scope does.
func fingerprint(u *User) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s|%s|%v|%v|%v", u.Hash, u.Role, u.Groups, u.Pipelines, u.ActFor))
	return hex.EncodeToString(sum[:8])
}

// Issue returns the cookie value of a new session of u and when it expires.
func (s *Sessions) Issue(u *User, now time.Time) (string, time.Time) {
	var n [12]byte
	_, _ = rand.Read(n[:])
	exp := now.Add(s.ttl).Truncate(time.Second)
	payload := strings.Join([]string{u.Name, strconv.FormatInt(exp.Unix(), 10), fingerprint(u), hex.EncodeToString(n[:])}, "|")
	p := base64.RawURLEncoding.EncodeToString([]byte(payload))
	return p + "." + s.sign(p), exp
}

func (s *Sessions) sign(p string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(p))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// session is a cookie's content once its signature checked.
type session struct {
	name, fp, nonce string
	exp             time.Time
}

func (s *Sessions) open(value string) (session, error) {
	p, sig, ok := strings.Cut(value, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(s.sign(p))) {
		return session{}, errors.New("the session cookie was not signed by this server (it comes from another server, was altered, or this server restarted with a new key): sign in again")
	}
	raw, err := base64.RawURLEncoding.DecodeString(p)
	parts := strings.Split(string(raw), "|")
	if err != nil || len(parts) != 4 {
		return session{}, errors.New("the session cookie is malformed: sign in again")
	}
	sec, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return session{}, errors.New("the session cookie is malformed: sign in again")
	}
	return session{name: parts[0], exp: time.Unix(sec, 0), fp: parts[2], nonce: parts[3]}, nil
}

// Check returns the user of a session cookie, found by lookup, or why the
// cookie is refused.
func (s *Sessions) Check(value string, lookup func(name string) *User, now time.Time) (*User, error) {
	ss, err := s.open(value)
	if err != nil {
		return nil, err
	}
	if !now.Before(ss.exp) {
		return nil, fmt.Errorf("the session of %s expired at %s: sign in again", ss.name, ss.exp.UTC().Format(time.RFC3339))
	}
	s.mu.Lock()
	_, gone := s.revoked[ss.nonce]
	s.mu.Unlock()
	if gone {
		return nil, fmt.Errorf("the session of %s was ended by signing out: sign in again", ss.name)
	}
	u := lookup(ss.name)
	if u == nil {
		return nil, fmt.Errorf("user %s is no longer in the users file: their session is revoked", ss.name)
	}
	if fingerprint(u) != ss.fp {
		return nil, fmt.Errorf("the token, role or scope of %s changed since they signed in: sign in again", ss.name)
	}
	return u, nil
}

// Revoke ends the session of a cookie (signing out): it is refused from
// now on, though it has not expired. A cookie not signed here is ignored.
func (s *Sessions) Revoke(value string, now time.Time) {
	ss, err := s.open(value)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, exp := range s.revoked { // forget the ones that expired anyway
		if !now.Before(exp) {
			delete(s.revoked, n)
		}
	}
	if now.Before(ss.exp) {
		s.revoked[ss.nonce] = ss.exp
	}
}
