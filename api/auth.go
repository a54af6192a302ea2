package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ax-sched/ax/access"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
)

// Who may call the admin API. With no admin token, no users file and no
// trusted proxy, nobody signs in and every route is open (a loopback
// server). Otherwise each request is authenticated (a trusted proxy's
// header, a bearer token, or the console's session cookie) and the route
// table's role decides, with the user's scope for a write.

// authConfig is how requests are authenticated.
type authConfig struct {
	token string               // AX_ADMIN_TOKEN: the user "admin" with the admin role
	users func() *access.Users // the users file in force; nil: none
	// usersRefused is why the users file's last reload was refused (nil
	// error: it loaded); nil: no users file.
	usersRefused func() error
	sessions     *access.Sessions
	proxyHeader  string // the header a trusted proxy names the user in
	proxyFrom    []netip.Prefix
}

// AdminName is the user AX_ADMIN_TOKEN signs in as.
const AdminName = "admin"

// on reports whether requests must be authenticated.
func (c *authConfig) on() bool { return c.token != "" || c.users != nil || c.proxyHeader != "" }

func (c *authConfig) usersNow() *access.Users {
	if c.users == nil {
		return nil
	}
	return c.users()
}

// lookup finds a user by name: the users file's, or the admin token's.
func (c *authConfig) lookup(name string) *access.User {
	if u := c.usersNow().Lookup(name); u != nil {
		return u
	}
	if name == AdminName && c.token != "" {
		return c.adminUser()
	}
	return nil
}

func (c *authConfig) adminUser() *access.User {
	return &access.User{Name: AdminName, Role: access.Admin, Hash: access.HashToken(c.token)}
}

// byToken finds the user whose token is token, or nil.
func (c *authConfig) byToken(token string) *access.User {
	if u := c.usersNow().Authenticate(token); u != nil {
		return u
	}
	if c.token != "" && access.HashToken(token) == access.HashToken(c.token) {
		return c.adminUser()
	}
	return nil
}

// caller is who sent a request, and how they proved it.
type caller struct {
	user *access.User // nil: nobody signed in
	how  string       // "token", "session", "proxy"
	exp  time.Time    // a session's expiry
}

// authenticate finds who sent r; the error (a 401) says why what was sent
// is refused. Nothing sent is no error: the route decides.
func (a *admin) authenticate(r *http.Request) (caller, error) {
	c := &a.auth
	if c.proxyHeader != "" {
		if names := r.Header.Values(c.proxyHeader); len(names) > 1 {
			return caller{}, errf(http.StatusUnauthorized, "%s came %d times (%s): a proxy names one user; have the proxy set the header, over any a client sent",
				c.proxyHeader, len(names), strings.Join(names, ", "))
		}
		if name := r.Header.Get(c.proxyHeader); name != "" {
			return c.fromProxy(r, name)
		}
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, _ := strings.Cut(h, " ")
		ok := strings.EqualFold(scheme, "Bearer") // the scheme is case-insensitive (RFC 9110)
		if u := c.byToken(strings.TrimSpace(tok)); ok && u != nil {
			return caller{user: u, how: "token"}, nil
		}
		return caller{}, errf(http.StatusUnauthorized, "wrong bearer token: send Authorization: Bearer TOKEN with a token of the users file (ax users add) or AX_ADMIN_TOKEN")
	}
	if ck, err := r.Cookie(access.CookieName); err == nil && c.sessions != nil {
		u, err := c.sessions.Check(r.Context(), ck.Value, c.lookup, a.now())
		if err != nil {
			return caller{}, errf(http.StatusUnauthorized, "%v", err)
		}
		return caller{user: u, how: "session", exp: c.sessions.Expires(r.Context(), ck.Value).UTC()}, nil
	}
	return caller{}, nil
}

// fromProxy takes the user a trusted proxy names; the header from anyone
// else is refused, so a client cannot name itself.
func (c *authConfig) fromProxy(r *http.Request, name string) (caller, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	ip, perr := netip.ParseAddr(host)
	if err != nil || perr != nil || !slices.ContainsFunc(c.proxyFrom, func(p netip.Prefix) bool { return p.Contains(ip.Unmap()) }) {
		return caller{}, errf(http.StatusUnauthorized, "%s came from %s, which is not a trusted proxy (--auth-proxy-from %s): only the proxy may name the user",
			c.proxyHeader, host, prefixes(c.proxyFrom))
	}
	u := c.lookup(name)
	if u == nil {
		return caller{}, errf(http.StatusForbidden, "the proxy names %q (%s), who is not in the users file: add them with ax users add %s --role ROLE", name, c.proxyHeader, name)
	}
	return caller{user: u, how: "proxy"}, nil
}

func prefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// actorKey carries the actor of an authenticated request to the handlers.
type actorKey struct{}

// authorize decides whether the caller of r may call rt, and returns r
// carrying the actor to record. A refusal is a 401 (nobody, or a bad
// credential) or a 403 naming the role or scope missing.
func (a *admin) authorize(rt route, r *http.Request) (*http.Request, error) {
	if !a.auth.on() || rt.role == access.None {
		return r, nil
	}
	who, err := a.authenticate(r)
	if err != nil {
		return nil, err
	}
	if who.user == nil {
		if rt.role == access.Viewer && a.openReads {
			return r, nil
		}
		return nil, errf(http.StatusUnauthorized, "sign in first: send a bearer token (Authorization: Bearer TOKEN, a users file token or AX_ADMIN_TOKEN), or sign in to the console")
	}
	need, what := rt.role, verbOf(rt)
	t, approves, err := a.targetOf(rt, r)
	if err != nil {
		return nil, err
	}
	if approves { // the approval part needs what approving the gates later would
		need, what = max(need, approveRole()), "start a backfill approving its manual gates (approve_manual)"
	}
	if err := access.Allow(who.user, need, what, t); err != nil {
		return nil, errf(http.StatusForbidden, "%v", err)
	}
	actor, err := a.actFor(who.user, r.Header.Get("X-Ax-Actor"), need, what, t)
	if err != nil {
		return nil, err
	}
	return r.WithContext(context.WithValue(r.Context(), actorKey{}, actor)), nil
}

// actFor is the actor to record for u, given the X-Ax-Actor header: u's
// name, unless u may act for others (act_for) and the header names a user
// of the file, whose role and scope must allow the request too: then
// "person (via u)". The CLI's own header, operator:$USER, names $USER;
// when $USER is no user of the file it is no claim, and u acts alone.
func (a *admin) actFor(u *access.User, header string, need access.Role, what string, t access.Target) (string, error) {
	name := strings.TrimSpace(header)
	cliDefault := strings.HasPrefix(name, "operator:")
	name = strings.TrimPrefix(name, "operator:")
	if !u.ActFor || name == "" || name == u.Name {
		return u.Name, nil
	}
	person := a.auth.usersNow().Lookup(name)
	switch {
	case person == nil && cliDefault:
		return u.Name, nil
	case person == nil:
		return "", errf(http.StatusForbidden, "%s acts for %q, who is not in the users file: name a user of the file in X-Ax-Actor", u.Name, name)
	}
	if err := access.Allow(person, need, what, t); err != nil {
		return "", errf(http.StatusForbidden, "%s acting for %v", u.Name, err)
	}
	return fmt.Sprintf("%s (via %s)", person.Name, u.Name), nil
}

// verbOf names what a route does, for a refusal: "pause", "read /api/v1/executors".
func verbOf(rt route) string {
	if rt.method == "GET" {
		return "read " + rt.path
	}
	last := rt.path[strings.LastIndex(rt.path, "/")+1:]
	switch {
	case rt.method == "PUT":
		return "change " + last
	case strings.HasPrefix(last, "{"), last == "backfills":
		return "start a backfill"
	}
	return last
}

// approveRole is the role of approving a backfill's gates: the approve
// route's, which a new backfill with approve_manual needs too.
var approveRole = sync.OnceValue(func() access.Role {
	for _, rt := range adminRoutes() {
		if rt.method == "POST" && rt.path == "/api/v1/backfills/{id}/approve" {
			return rt.role
		}
	}
	panic("api: no approve route in the route table")
})

// targetOf is what a write acts on, for the scope rule, from its path (and
// a new backfill's body, which says too whether it approves manual gates).
// Reads act on nothing in particular.
func (a *admin) targetOf(rt route, r *http.Request) (t access.Target, approves bool, err error) {
	if !rt.write {
		return access.Target{}, false, nil
	}
	if rt.path == "/api/v1/backfills" {
		return a.backfillTarget(r)
	}
	t, err = a.pathTarget(rt, r)
	return t, false, err
}

// pathTarget is what a write acts on, from its path.
func (a *admin) pathTarget(rt route, r *http.Request) (access.Target, error) {
	switch {
	case r.PathValue("task") != "":
		t, err := a.taskOf(r)
		if err != nil {
			return access.Target{}, err
		}
		if strings.HasSuffix(rt.path, "/trigger") {
			return a.triggerTarget(r, t)
		}
		return access.Target{Pipeline: t.Pipeline, Group: t.Group}, nil
	case r.PathValue("pipeline") != "":
		return a.pipelineTarget(r.PathValue("pipeline")), nil
	case r.PathValue("group") != "":
		return access.Target{Group: r.PathValue("group")}, nil
	case r.PathValue("run") != "":
		id, err := pathID(r, "run")
		if err != nil {
			return access.Target{}, err
		}
		run, err := a.st.Run(r.Context(), id)
		if err != nil {
			return access.Target{}, errf(http.StatusNotFound, "no run %d", id)
		}
		return a.pipelineTarget(run.Pipeline), nil
	case strings.HasPrefix(rt.path, "/api/v1/instances/"):
		id, err := a.pathInstance(r)
		if err != nil {
			return access.Target{}, err
		}
		in, err := a.st.Instance(r.Context(), id)
		if err != nil {
			return access.Target{}, err
		}
		return access.Target{Pipeline: in.Pipeline, Group: in.Group}, nil
	case strings.HasPrefix(rt.path, "/api/v1/backfills/"):
		b, err := a.backfillOf(r)
		if err != nil {
			return access.Target{}, err
		}
		var spec axtype.BackfillSpec
		if json.Unmarshal([]byte(b.Spec), &spec) != nil || len(spec.Tasks) == 0 {
			return a.pipelineTarget(b.Pipeline), nil
		}
		return a.selectionTarget(b.Pipeline, strings.Join(spec.Tasks, ",")), nil
	}
	return access.Target{}, nil
}

// pipelineTarget is a pipeline with the groups of its tasks.
func (a *admin) pipelineTarget(name string) access.Target {
	return access.Target{Pipeline: name, Groups: taskGroups(a.graph().Pipeline(name))}
}

// taskGroups are the groups of p's tasks, in file order: a scope naming
// them all covers the pipeline (the console disables by them too).
func taskGroups(p *defs.Pipeline) []string {
	var gs []string
	if p == nil {
		return gs
	}
	for _, task := range p.Tasks {
		if !slices.Contains(gs, task.Group) {
			gs = append(gs, task.Group)
		}
	}
	return gs
}

// selectionTarget is the tasks of pipeline that expr selects (dag's
// selection: every task when empty); the whole pipeline when expr is bad
// (the handler refuses it).
func (a *admin) selectionTarget(pipeline, expr string) access.Target {
	sel, err := a.graph().Select(pipeline, expr)
	if err != nil || len(sel) == 0 {
		return a.pipelineTarget(pipeline)
	}
	return tasksTarget(pipeline, sel)
}

// tasksTarget is tasks of pipeline that one request runs.
func tasksTarget(pipeline string, tasks []*defs.Task) access.Target {
	t := access.Target{Pipeline: pipeline, Tasks: map[string]string{}}
	for _, task := range tasks {
		t.Tasks[task.ID()] = task.Group
		if !slices.Contains(t.Groups, task.Group) {
			t.Groups = append(t.Groups, task.Group)
		}
	}
	return t
}

// triggerTarget is the task a trigger runs or, with downstream, the task
// and everything below it in its pipeline.
func (a *admin) triggerTarget(r *http.Request, t *defs.Task) (access.Target, error) {
	var b opBody
	if err := peekBody(r, &b); err != nil {
		return access.Target{}, err
	}
	if !b.Downstream {
		return access.Target{Pipeline: t.Pipeline, Group: t.Group}, nil
	}
	return a.selectionTarget(t.Pipeline, t.Name+"+"), nil
}

// peekBody decodes what it can of r's body into v (a bad body is the
// handler's 400) and puts the body back for the handler.
func peekBody(r *http.Request, v any) error {
	if r.Body == nil {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return errf(http.StatusBadRequest, "malformed request body: %v", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	_ = json.Unmarshal(body, v)
	return nil
}

// backfillTarget reads the tasks a new backfill selects from its body,
// and whether it approves manual gates.
func (a *admin) backfillTarget(r *http.Request) (access.Target, bool, error) {
	var b BackfillRequest
	if err := peekBody(r, &b); err != nil {
		return access.Target{}, false, err
	}
	return a.selectionTarget(b.Pipeline, b.Select), b.ApproveManual, nil
}
