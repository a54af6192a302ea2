// Package access owns who may use ax server's admin API: the users file
// (names, roles, scopes, hashed tokens), the rule that decides whether a
// user may call a route on a pipeline or group, and the signed session
// cookie of the console. It knows nothing of HTTP routing nor of the
// engine: the API asks it, and the CLI writes its file.
package access

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ax-sched/ax/defs"
)

// Role is what a user may do; each role may do everything the ones below
// it may.
type Role int

const (
	// None is no role: what an unauthenticated request has.
	None Role = iota
	// Viewer reads.
	Viewer
	// Operator reads and acts on work: trigger, pause, resume, kill,
	// rerun, mark, cancel, backfill.
	Operator
	// Admin does everything: limits, prune, executors, approving a
	// backfill's gates.
	Admin
)

// Roles are the roles a users file may name, lowest first.
var Roles = []Role{Viewer, Operator, Admin}

func (r Role) String() string {
	switch r {
	case Viewer:
		return "viewer"
	case Operator:
		return "operator"
	case Admin:
		return "admin"
	}
	return "none"
}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if r.String() == s {
			return r, nil
		}
	}
	names := make([]string, len(Roles))
	for i, r := range Roles {
		names[i] = r.String()
	}
	return None, fmt.Errorf("unknown role %q: use %s", s, strings.Join(names, ", "))
}

// MarshalText writes the role's name (JSON and YAML).
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// User is one entry of the users file: a person or a service.
type User struct {
	Name string
	Role Role
	// Groups and Pipelines scope what the user may act on: empty both, on
	// everything; else on the tasks of those groups and pipelines. Reads
	// are never scoped.
	Groups, Pipelines []string
	// ActFor lets a service name the person it acts for (X-Ax-Actor): the
	// person must be in the file, the action needs both their roles, and
	// the action log records "person (via service)".
	ActFor bool
	// Hash is the token's hash, HashPrefix and hex.
	Hash string
}

// Scoped reports whether the user may act on some groups or pipelines only.
func (u *User) Scoped() bool { return len(u.Groups) > 0 || len(u.Pipelines) > 0 }

// Describe names the user with role and scope: "alice (operator of group etl)".
func (u *User) Describe() string {
	var scope []string
	for _, g := range u.Groups {
		scope = append(scope, "group "+g)
	}
	for _, p := range u.Pipelines {
		scope = append(scope, "pipeline "+p)
	}
	if len(scope) == 0 {
		return fmt.Sprintf("%s (%s)", u.Name, u.Role)
	}
	return fmt.Sprintf("%s (%s of %s)", u.Name, u.Role, strings.Join(scope, ", "))
}

// HashPrefix starts every token hash of the users file.
const HashPrefix = "sha256:"

var (
	hashRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$`)
	// schemeRe starts a hash of another form (sha512:, md5:, SHA256:).
	schemeRe = regexp.MustCompile(`^[A-Za-z0-9-]+:`)
)

// Reserved are names no user may take: the scheduler's own actor, and the
// user AX_ADMIN_TOKEN signs in as.
var Reserved = map[string]string{"scheduler": "the scheduler's own", "admin": "the user of AX_ADMIN_TOKEN"}

// HashToken is the hash the users file keeps of token.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return HashPrefix + hex.EncodeToString(sum[:])
}

// NewToken returns a fresh random token (256 bits).
func NewToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "axu_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// Users is a loaded users file. It is never changed once loaded: a reload
// makes a new one. Safe for concurrent use.
type Users struct {
	byName map[string]*User
	order  []string
}

// Lookup returns the user named name, or nil.
func (us *Users) Lookup(name string) *User {
	if us == nil {
		return nil
	}
	return us.byName[name]
}

// Names lists the users in file order.
func (us *Users) Names() []string {
	if us == nil {
		return nil
	}
	return slices.Clone(us.order)
}

// Authenticate returns the user whose token is token, or nil. Every
// entry's hash is compared in constant time.
func (us *Users) Authenticate(token string) *User {
	if us == nil || token == "" {
		return nil
	}
	h := []byte(HashToken(token))
	var found *User
	for _, n := range us.order {
		u := us.byName[n]
		if subtle.ConstantTimeCompare(h, []byte(u.Hash)) == 1 {
			found = u
		}
	}
	return found
}

// fileEntry is one user as the file writes it.
type fileEntry struct {
	Name      string   `yaml:"name"`
	Role      string   `yaml:"role"`
	Groups    []string `yaml:"groups,omitempty"`
	Pipelines []string `yaml:"pipelines,omitempty"`
	ActFor    bool     `yaml:"act_for,omitempty"`
	Token     string   `yaml:"token"`
}

type fileDoc struct {
	Users []fileEntry `yaml:"users"`
}

// Known says whether a group or a pipeline exists (kind "group" or
// "pipeline"), and which names do, for a suggestion; nil takes every name.
type Known func(kind, name string) (ok bool, names []string)

// Parse reads a users file. Each error names the file, the line and the
// user, and says what to write instead; the first one found is returned.
func Parse(file string, data []byte, known Known) (*Users, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	us := &Users{byName: map[string]*User{}}
	if root.Kind == 0 { // an empty file: no users
		return us, nil
	}
	var doc yaml.Node
	if len(root.Content) > 0 {
		doc = *root.Content[0]
	}
	list, err := usersList(file, &doc)
	if err != nil || list == nil {
		return us, err
	}
	lines := map[string]int{}
	folded := map[string]string{} // a name in lower case → the name
	hashes := map[string]string{} // a token's hash → its user
	for _, item := range list.Content {
		u, err := parseEntry(file, item, known)
		if err != nil {
			return nil, err
		}
		at := fmt.Sprintf("%s:%d:%d", file, item.Line, item.Column)
		if l, dup := lines[u.Name]; dup {
			return nil, fmt.Errorf("%s: user %q is named twice (first at line %d): give each user one entry", at, u.Name, l)
		}
		if other, dup := folded[strings.ToLower(u.Name)]; dup {
			return nil, fmt.Errorf("%s: user %q differs from user %q (line %d) only in case: give each person one entry, or names that differ in letters", at, u.Name, other, lines[other])
		}
		if other, dup := hashes[u.Hash]; dup { // a token must name one user
			return nil, fmt.Errorf("%s: user %q has the token of user %q (line %d): give each user a token of its own (ax users add makes one)", at, u.Name, other, lines[other])
		}
		lines[u.Name], folded[strings.ToLower(u.Name)], hashes[u.Hash] = item.Line, u.Name, u.Name
		us.byName[u.Name] = u
		us.order = append(us.order, u.Name)
	}
	return us, nil
}

// usersList finds the users: sequence of the document, refusing any other key.
func usersList(file string, doc *yaml.Node) (*yaml.Node, error) {
	if doc.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d:%d: want a mapping with a key users: (a list of users)", file, doc.Line, doc.Column)
	}
	var list *yaml.Node
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], doc.Content[i+1]
		if k.Value != "users" {
			return nil, fmt.Errorf("%s:%d:%d: unknown key %q: the file has one key, users", file, k.Line, k.Column, k.Value)
		}
		list = v
	}
	if list != nil && list.Kind != yaml.SequenceNode && !(list.Kind == yaml.ScalarNode && list.Tag == "!!null") {
		return nil, fmt.Errorf("%s:%d:%d: users: want a list of users", file, list.Line, list.Column)
	}
	if list != nil && list.Kind != yaml.SequenceNode {
		return nil, nil
	}
	return list, nil
}

// parseEntry reads and checks one user.
func parseEntry(file string, item *yaml.Node, known Known) (*User, error) {
	at := func(n *yaml.Node) string { return fmt.Sprintf("%s:%d:%d", file, n.Line, n.Column) }
	var e fileEntry
	dec := item
	if err := strictDecode(dec, &e); err != nil {
		return nil, fmt.Errorf("%s: %v", at(item), err)
	}
	field := func(key string) *yaml.Node {
		for i := 0; i+1 < len(item.Content); i += 2 {
			if item.Content[i].Value == key {
				return item.Content[i+1]
			}
		}
		return item
	}
	who := fmt.Sprintf("user %q", e.Name)
	if !nameRe.MatchString(e.Name) {
		return nil, fmt.Errorf("%s: user name %q: use 1 to 64 letters, digits, _ . @ -, starting with a letter or digit", at(field("name")), e.Name)
	}
	if whose, ok := Reserved[e.Name]; ok {
		return nil, fmt.Errorf("%s: user name %q is %s: choose another", at(field("name")), e.Name, whose)
	}
	role, err := ParseRole(e.Role)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %v", at(field("role")), who, err)
	}
	if !hashRe.MatchString(e.Token) {
		what := "a token in clear text"
		switch {
		case strings.HasPrefix(e.Token, HashPrefix) || e.Token == "":
			what = "a malformed hash"
		case schemeRe.MatchString(e.Token):
			what = "a hash of another form: only " + HashPrefix + " and 64 lowercase hex digits is accepted"
		}
		return nil, fmt.Errorf("%s: %s: token is %s: write its hash, %s and 64 lowercase hex digits (ax users add writes one; a clear-text token is never kept)",
			at(field("token")), who, what, HashPrefix)
	}
	for _, s := range []struct {
		kind  string
		names []string
	}{{"group", e.Groups}, {"pipeline", e.Pipelines}} {
		for i, n := range s.names {
			if n == "" {
				return nil, fmt.Errorf("%s: %s: an empty %s name", at(field(s.kind+"s")), who, s.kind)
			}
			if !defs.ValidName(n) {
				return nil, fmt.Errorf("%s: %s: %s %q: write a name of letters, digits, _ and -, starting with a letter or _ (as the pipelines name them)", at(field(s.kind+"s")), who, s.kind, n)
			}
			if slices.Contains(s.names[:i], n) {
				return nil, fmt.Errorf("%s: %s: %s %q is named twice: name it once", at(field(s.kind+"s")), who, s.kind, n)
			}
			if known == nil {
				continue
			}
			if ok, names := known(s.kind, n); !ok {
				return nil, fmt.Errorf("%s: %s: no %s %q in the pipelines%s", at(field(s.kind+"s")), who, s.kind, n, suggest(n, names))
			}
		}
	}
	return &User{Name: e.Name, Role: role, Groups: e.Groups, Pipelines: e.Pipelines, ActFor: e.ActFor, Hash: e.Token}, nil
}

// strictDecode decodes n into v, refusing unknown keys.
func strictDecode(n *yaml.Node, v any) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		msg = strings.TrimPrefix(msg, "yaml: unmarshal errors:\n  ")
		if i := strings.Index(msg, "field "); i >= 0 && strings.Contains(msg, "not found") {
			return fmt.Errorf("unknown key %s: a user has name, role, groups, pipelines, act_for and token", strings.Fields(msg[i:])[1])
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// suggest names the closest of names to word, or lists them when none is
// close and they are few.
func suggest(word string, names []string) string {
	if s := defs.DidYouMean(word, names); s != "" || len(names) == 0 || len(names) > 20 {
		return s
	}
	return " (there are " + strings.Join(names, ", ") + ")"
}
