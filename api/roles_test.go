package api

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/access"
	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// crmPipeline is a pipeline of another group than the shop's etl.
const crmPipeline = `pipeline: crm
group: sales
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: load, function: noop}
`

// testUsers is a users file: a viewer, an operator, an admin, an operator
// of group etl, a service that may act for people, and their tokens
// (each user's token is its name with "-token").
func testUsers(t testing.TB) *access.Users {
	t.Helper()
	var b strings.Builder
	b.WriteString("users:\n")
	for _, u := range []string{
		"{name: vera, role: viewer", "{name: otto, role: operator", "{name: ada, role: admin",
		"{name: ella, role: operator, groups: [etl]", "{name: ci, role: operator, act_for: true",
	} {
		name := strings.TrimSuffix(strings.TrimPrefix(strings.Fields(u)[1], ""), ",")
		fmt.Fprintf(&b, "  - %s, token: %s}\n", u, access.HashToken(name+"-token"))
	}
	us, err := access.Parse("users.yaml", []byte(b.String()), nil)
	if err != nil {
		t.Fatal(err)
	}
	return us
}

// authEnv is a server with users: cfg may set more (a proxy, sessions, a
// clock); users is what the users file holds now.
type authEnv struct {
	*apitest.Env
	users atomic.Pointer[access.Users]
}

func setupUsers(t testing.TB, o apitest.Opts, cfg func(*Config)) *authEnv {
	t.Helper()
	ae := &authEnv{}
	ae.users.Store(testUsers(t))
	if o.Others == nil {
		o.Others = []string{crmPipeline}
	}
	ae.Env = apitest.Setup(t, o, func(e *apitest.Env) http.Handler {
		c := Config{Store: e.St, Graph: e.Graph, Engine: e.Eng, Gather: e.Reg, Token: o.Token, OpenReads: o.OpenReads,
			OpWait: 10 * time.Second, Users: ae.users.Load}
		if cfg != nil {
			cfg(&c)
		}
		return Handler(c)
	})
	return ae
}

// as sends a request with the bearer token of user ("" for none) and,
// when actor is set, X-Ax-Actor.
func (ae *authEnv) as(user, actor, method, path, body string) (int, string) {
	ae.T.Helper()
	req, err := http.NewRequest(method, ae.Srv.URL+path, strings.NewReader(body))
	if err != nil {
		ae.T.Fatal(err)
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+user+"-token")
	}
	if actor != "" {
		req.Header.Set("X-Ax-Actor", actor)
	}
	return send(ae.T, ae.Srv.Client(), req)
}

func send(t testing.TB, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	if req.Method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// documentedAdmin are the routes docs/operating.md's role matrix gives to
// admins alone; every other read is a viewer's and every other write an
// operator's, the session routes nobody's.
var documentedAdmin = map[string]bool{
	"GET /api/v1/prune": true, "POST /api/v1/prune": true, "GET /api/v1/executors": true,
	"PUT /api/v1/limits": true, "POST /api/v1/backfills/{id}/approve": true,
}

func documentedRole(rt route) access.Role {
	switch {
	case rt.path == "/api/v1/session":
		return access.None
	case documentedAdmin[rt.method+" "+rt.path]:
		return access.Admin
	case rt.method == "GET":
		return access.Viewer
	}
	return access.Operator
}

// TestRoleMatrix walks every route of the route table with each role: the
// table gives the role of the documented matrix, and the server refuses
// (401 without a user, 403 naming the role missing, nothing changed) or
// lets through exactly as the table says.
func TestRoleMatrix(t *testing.T) {
	t.Parallel()
	ae := setupUsers(t, apitest.Opts{}, nil)
	if code, body := ae.as("ada", "", "POST", "/api/v1/pipelines/shop/tasks/sync/trigger", `{"downstream": true}`); code != 200 {
		t.Fatalf("trigger: %d %s", code, body)
	}
	in := ae.WaitState("shop.clean", axtype.Success)
	code, body := ae.as("ada", "", "POST", "/api/v1/backfills", `{"pipeline": "shop", "from": "2025-01-01", "to": "2025-01-01", "dry_run": false}`)
	if code != 201 {
		t.Fatalf("backfill: %d %s", code, body)
	}
	fill := func(p string) string {
		r := strings.NewReplacer("{pipeline}", "shop", "{task}", "clean", "{group}", "etl", "{run}", fmt.Sprint(in.RunID))
		p = r.Replace(p)
		if strings.HasPrefix(p, "/api/v1/backfills/") {
			return strings.Replace(p, "{id}", "1", 1)
		}
		return strings.Replace(p, "{id}", fmt.Sprint(in.ID), 1)
	}
	roles := []string{"", "vera", "otto", "ada"}
	roleOf := map[string]access.Role{"": access.None, "vera": access.Viewer, "otto": access.Operator, "ada": access.Admin}
	routes := adminRoutes()
	for _, rt := range routes {
		if got, want := rt.role, documentedRole(rt); got != want {
			t.Errorf("%s %s: the route table asks %s, the documented matrix %s", rt.method, rt.path, got, want)
		}
	}
	// Refusals first, on an unchanged store.
	before := ae.State()
	for _, rt := range routes {
		for _, user := range roles {
			if rt.role == access.None || roleOf[user] >= rt.role {
				continue
			}
			code, body := ae.as(user, "", rt.method, fill(rt.path), "{}")
			want, text := 403, fmt.Sprintf("that needs the %s role", rt.role)
			if user == "" {
				want, text = 401, "sign in first"
			}
			if code != want || !strings.Contains(body, text) {
				t.Errorf("%s %s as %q: %d %s; want %d %q", rt.method, rt.path, user, code, strings.TrimSpace(body), want, text)
			}
		}
	}
	if after := ae.State(); after != before {
		t.Fatalf("refused requests changed the store:\n%s\n→\n%s", before, after)
	}
	for _, rt := range routes {
		for _, user := range roles[1:] {
			if roleOf[user] < rt.role {
				continue
			}
			if code, body := ae.as(user, "", rt.method, fill(rt.path), "{}"); code == 401 || code == 403 {
				t.Errorf("%s %s as %s (%s): refused %d %s", rt.method, rt.path, user, roleOf[user], code, body)
			}
		}
	}
}

// TestActorIsTheAuthenticatedUser: X-Ax-Actor naming the scheduler or
// anyone else is recorded as the user who signed; a service whose entry
// has act_for acts for a user of the file, recorded as both, and only
// where that user's role allows it.
func TestActorIsTheAuthenticatedUser(t *testing.T) {
	t.Parallel()
	ae := setupUsers(t, apitest.Opts{}, nil)
	if code, body := ae.as("otto", "scheduler", "POST", "/api/v1/pipelines/shop/tasks/sync/pause", ""); code != 200 {
		t.Fatalf("pause: %d %s", code, body)
	}
	if code, body := ae.as("ci", "otto", "POST", "/api/v1/pipelines/shop/tasks/clean/pause", ""); code != 200 {
		t.Fatalf("ci for otto: %d %s", code, body)
	}
	// The CLI's own header: operator:$USER acts for $USER when a user, else names nobody.
	if code, body := ae.as("ci", "operator:ella", "POST", "/api/v1/pipelines/crm/tasks/load/pause", ""); code != 403 || !strings.Contains(body, "ci acting for ella (operator of group etl) may not pause on pipeline crm") {
		t.Errorf("ci as the CLI of ella on crm: %d %s", code, body)
	}
	if code, body := ae.as("ci", "operator:runner", "POST", "/api/v1/pipelines/crm/tasks/load/pause", ""); code != 200 {
		t.Errorf("ci as the CLI of a user not in the file: %d %s", code, body)
	}
	before := ae.State()
	for _, c := range []struct{ actor, want string }{
		{"vera", "ci acting for vera (viewer) may not pause: that needs the operator role"},
		{"nobody", `ci acts for \"nobody\", who is not in the users file`},
	} {
		if code, body := ae.as("ci", c.actor, "POST", "/api/v1/pipelines/shop/tasks/slow/pause", ""); code != 403 || !strings.Contains(body, c.want) {
			t.Errorf("ci for %s: %d %s; want 403 %q", c.actor, code, body, c.want)
		}
	}
	if ae.State() != before {
		t.Error("a refused act-for changed the store")
	}
	ps, err := ae.St.Pauses(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range ps {
		got[p.Name] = p.Actor
	}
	if got["shop.sync"] != "otto" || got["shop.clean"] != "otto (via ci)" || got["crm.load"] != "ci" || len(got) != 3 {
		t.Errorf("pauses by %v; want shop.sync by otto (not the scheduler), shop.clean by otto (via ci), crm.load by ci", got)
	}
	acts, err := ae.St.Actions(t.Context(), store.LogFilter{Action: "pause"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		if a.Actor == "scheduler" {
			t.Errorf("an action logged as the scheduler: %+v", a)
		}
	}
}

// TestScopedOperator: an operator of group etl acts on etl's tasks and
// pipelines, and is refused on group sales with the scope it lacks.
func TestScopedOperator(t *testing.T) {
	t.Parallel()
	ae := setupUsers(t, apitest.Opts{}, nil)
	for _, p := range []string{"/api/v1/pipelines/shop/tasks/sync/pause", "/api/v1/groups/etl/pause"} {
		if code, body := ae.as("ella", "", "POST", p, ""); code != 200 {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
	before := ae.State()
	for _, c := range []struct{ path, want string }{
		{"/api/v1/pipelines/crm/tasks/load/pause", "ella (operator of group etl) may not pause on pipeline crm, group sales: that needs a scope naming pipeline crm or group sales"},
		{"/api/v1/pipelines/crm/trigger", "may not trigger on pipeline crm: that needs a scope naming pipeline crm (or every group of its tasks: sales)"},
		{"/api/v1/groups/sales/pause", "may not pause on group sales: that needs a scope naming group sales"},
	} {
		if code, body := ae.as("ella", "", "POST", c.path, ""); code != 403 || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s; want 403 %q", c.path, code, body, c.want)
		}
	}
	if ae.State() != before {
		t.Error("a refused scoped write changed the store")
	}
}

// TestAdminTokenIsAnAdmin: AX_ADMIN_TOKEN beside a users file is the user
// admin, with every role.
func TestAdminTokenIsAnAdmin(t *testing.T) {
	t.Parallel()
	ae := setupUsers(t, apitest.Opts{Token: "s3cret"}, nil)
	if code, body := ae.CallAs("PUT", "/api/v1/limits", `{"global": 5}`, "s3cret"); code != 200 {
		t.Fatalf("limits with AX_ADMIN_TOKEN: %d %s", code, body)
	}
	acts, err := ae.St.Actions(t.Context(), store.LogFilter{Action: "limits"})
	if err != nil || len(acts) != 1 || acts[0].Actor != "admin" {
		t.Errorf("the limits action: %+v %v; want one by admin", acts, err)
	}
}

// TestTrustedProxy: behind a reverse proxy that names the user in
// X-Forwarded-User, the user is the one named, with their role; the header
// sent by anyone outside --auth-proxy-from is refused, and so is a name
// not in the users file.
func TestTrustedProxy(t *testing.T) {
	t.Parallel()
	ae := setupUsers(t, apitest.Opts{}, func(c *Config) {
		c.ProxyHeader, c.ProxyFrom = "X-Forwarded-User", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	target, _ := url.Parse(ae.Srv.URL)
	var who atomic.Value
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = target.Host
		pr.Out.Header.Set("X-Forwarded-User", who.Load().(string)) // as oauth2-proxy does, over what the client sent
	}}
	proxy := httptest.NewServer(rp)
	t.Cleanup(proxy.Close)
	call := func(user, method, path string) (int, string) {
		who.Store(user)
		req, _ := http.NewRequest(method, proxy.URL+path, strings.NewReader(""))
		req.Header.Set("X-Forwarded-User", "ada") // a client naming itself: the proxy overwrites it
		return send(t, proxy.Client(), req)
	}
	if code, body := call("vera", "GET", "/api/v1/session"); code != 200 || !strings.Contains(body, `"user": "vera"`) || !strings.Contains(body, `"how": "proxy"`) {
		t.Errorf("session through the proxy: %d %s", code, body)
	}
	before := ae.State()
	if code, body := call("vera", "POST", "/api/v1/pipelines/shop/tasks/sync/pause"); code != 403 || !strings.Contains(body, "vera (viewer) may not pause") {
		t.Errorf("vera's pause through the proxy: %d %s", code, body)
	}
	if code, body := call("mallory", "GET", "/api/v1/pipelines"); code != 403 || !strings.Contains(body, `the proxy names \"mallory\" (X-Forwarded-User), who is not in the users file`) {
		t.Errorf("an unknown user through the proxy: %d %s", code, body)
	}
	if ae.State() != before {
		t.Error("refused requests through the proxy changed the store")
	}
	if code, body := call("otto", "POST", "/api/v1/pipelines/shop/tasks/sync/pause"); code != 200 {
		t.Errorf("otto's pause through the proxy: %d %s", code, body)
	}
	if ps, _ := ae.St.Pauses(t.Context()); len(ps) != 1 || ps[0].Actor != "otto" {
		t.Errorf("pauses: %+v; want one by otto", ps)
	}

	// A server trusting another address refuses the header from here.
	far := setupUsers(t, apitest.Opts{}, func(c *Config) {
		c.ProxyHeader, c.ProxyFrom = "X-Forwarded-User", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	req, _ := http.NewRequest("GET", far.Srv.URL+"/api/v1/pipelines", nil)
	req.Header.Set("X-Forwarded-User", "ada")
	if code, body := send(t, far.Srv.Client(), req); code != 401 || !strings.Contains(body, "X-Forwarded-User came from 127.0.0.1, which is not a trusted proxy (--auth-proxy-from 10.0.0.0/8)") {
		t.Errorf("the header from outside --auth-proxy-from: %d %s", code, body)
	}
}

// TestBackfillApprovingGatesNeedsAdmin: a backfill started with
// approve_manual approves manual gates, which is the approve route's to
// do: an operator is refused with the role that is missing and nothing is
// created; an admin starts it.
func TestBackfillApprovingGatesNeedsAdmin(t *testing.T) {
	t.Parallel()
	ae := setupUsers(t, apitest.Opts{}, nil)
	approve := route{}
	for _, rt := range adminRoutes() {
		if rt.method == "POST" && rt.path == "/api/v1/backfills/{id}/approve" {
			approve = rt
		}
	}
	if approve.role != access.Admin {
		t.Fatalf("the approve route needs %s; this test assumes admin", approve.role)
	}
	body := `{"pipeline": "shop", "from": "2025-01-01", "to": "2025-01-01", "approve_manual": true}`
	before := ae.State()
	for _, c := range []struct{ user, want string }{
		{"otto", "otto (operator) may not start a backfill approving its manual gates (approve_manual): that needs the admin role"},
		{"ella", "ella (operator of group etl) may not start a backfill approving its manual gates (approve_manual): that needs the admin role"},
		{"vera", "vera (viewer) may not start a backfill approving its manual gates (approve_manual): that needs the admin role"},
	} {
		if code, got := ae.as(c.user, "", "POST", "/api/v1/backfills", body); code != 403 || !strings.Contains(got, c.want) {
			t.Errorf("%s: %d %s; want 403 %q", c.user, code, strings.TrimSpace(got), c.want)
		}
	}
	if code, got := ae.as("ci", "otto", "POST", "/api/v1/backfills", strings.ReplaceAll(body, "2025-01-01", "2024-01-01")); code != 403 || !strings.Contains(got, "that needs the admin role") {
		t.Errorf("ci for otto: %d %s; want 403 naming the admin role", code, got)
	}
	if after := ae.State(); after != before {
		t.Fatalf("refused backfills changed the store:\n%s\n→\n%s", before, after)
	}
	if bs, err := ae.St.Backfills(t.Context(), 0); err != nil || len(bs) != 0 {
		t.Fatalf("backfills after the refusals: %+v %v; want none", bs, err)
	}
	if code, got := ae.as("otto", "", "POST", "/api/v1/backfills", strings.Replace(body, "true", "false", 1)); code != 201 {
		t.Errorf("otto's backfill without approve_manual: %d %s", code, got)
	}
	if code, got := ae.as("ada", "", "POST", "/api/v1/backfills", strings.ReplaceAll(body, "2025-01-01", "2023-01-01")); code != 201 {
		t.Errorf("ada's backfill with approve_manual: %d %s", code, got)
	}
}

// mixedPipeline has tasks of two groups: compact (etl) and its downstream
// verify (ops).
const mixedPipeline = `pipeline: mixed
group: etl
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: compact, function: noop}
  - {name: verify, depends_on: [compact], group: ops, function: noop}
`

// TestScopeCoversEveryTaskARequestRuns: a scoped operator may run only
// tasks in scope: a trigger with its downstream or a backfill whose
// selection reaches a task of another group is refused naming that task,
// nothing created; a backfill selecting only tasks in scope starts.
func TestScopeCoversEveryTaskARequestRuns(t *testing.T) {
	t.Parallel()
	ae := setupUsers(t, apitest.Opts{Others: []string{crmPipeline, mixedPipeline}}, nil)
	before := ae.State()
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/api/v1/pipelines/mixed/tasks/compact/trigger", `{"downstream": true}`,
			"ella (operator of group etl) may not trigger on pipeline mixed: it runs task mixed.verify (group ops): that needs a scope naming pipeline mixed or group ops"},
		{"POST", "/api/v1/backfills", `{"pipeline": "mixed", "from": "2025-01-01", "to": "2025-01-01", "select": "compact+"}`,
			"ella (operator of group etl) may not start a backfill on pipeline mixed: it runs task mixed.verify (group ops): that needs a scope naming pipeline mixed or group ops"},
		{"POST", "/api/v1/backfills", `{"pipeline": "mixed", "from": "2025-01-01", "to": "2025-01-01"}`,
			"it runs task mixed.verify (group ops)"},
	} {
		if code, body := ae.as("ella", "", c.method, c.path, c.body); code != 403 || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s; want 403 %q", c.path, c.body, code, strings.TrimSpace(body), c.want)
		}
	}
	if after := ae.State(); after != before {
		t.Fatalf("refused requests changed the store:\n%s\n→\n%s", before, after)
	}
	if code, body := ae.as("ella", "", "POST", "/api/v1/pipelines/mixed/tasks/compact/trigger", ""); code != 200 {
		t.Errorf("ella's trigger of mixed.compact alone: %d %s", code, body)
	}
	for _, sel := range []string{"compact", "group:etl"} {
		code, body := ae.as("ella", "", "POST", "/api/v1/backfills", `{"pipeline": "mixed", "from": "2025-01-01", "to": "2025-01-01", "select": "`+sel+`", "dry_run": true}`)
		if code != 200 {
			t.Errorf("ella's backfill of mixed selecting %s (her group's tasks only): %d %s", sel, code, body)
		}
	}
}

// TestAuthHeaderForms: the bearer scheme is read in any case; a trusted
// proxy's header sent more than once is refused, not the first one taken.
func TestAuthHeaderForms(t *testing.T) {
	t.Parallel()
	ae := setupUsers(t, apitest.Opts{}, func(c *Config) {
		c.ProxyHeader, c.ProxyFrom = "X-Forwarded-User", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		req, _ := http.NewRequest("GET", ae.Srv.URL+"/api/v1/session", nil)
		req.Header.Set("Authorization", scheme+" vera-token")
		if code, body := send(t, ae.Srv.Client(), req); code != 200 || !strings.Contains(body, `"user": "vera"`) {
			t.Errorf("Authorization: %s TOKEN: %d %s", scheme, code, body)
		}
	}
	before := ae.State()
	req, _ := http.NewRequest("POST", ae.Srv.URL+"/api/v1/pipelines/shop/tasks/sync/pause", nil)
	req.Header.Add("X-Forwarded-User", "ada")
	req.Header.Add("X-Forwarded-User", "vera")
	if code, body := send(t, ae.Srv.Client(), req); code != 401 || !strings.Contains(body, "X-Forwarded-User came 2 times (ada, vera): a proxy names one user") {
		t.Errorf("two X-Forwarded-User headers: %d %s", code, body)
	}
	if ae.State() != before {
		t.Error("a refused request changed the store")
	}
}

// TestReloadSaysTheUsersFileWasRefused: GET /api/v1/reload says when the
// users file changed but was not loaded, without quoting its errors.
func TestReloadSaysTheUsersFileWasRefused(t *testing.T) {
	t.Parallel()
	var refused atomic.Pointer[error]
	ae := setupUsers(t, apitest.Opts{}, func(c *Config) {
		c.UsersRefused = func() error {
			if e := refused.Load(); e != nil {
				return *e
			}
			return nil
		}
	})
	if code, body := ae.as("vera", "", "GET", "/api/v1/reload", ""); code != 200 || strings.Contains(body, "users_refused") {
		t.Errorf("reload with the users file loaded: %d %s", code, body)
	}
	e := fmt.Errorf("users.yaml:3:40: token is a token in clear text")
	refused.Store(&e)
	code, body := ae.as("vera", "", "GET", "/api/v1/reload", "")
	if code != 200 || !strings.Contains(body, `"users_refused": "the users file changed but was not loaded`) || strings.Contains(body, "users.yaml:3:40") {
		t.Errorf("reload with the users file refused: %d %s", code, body)
	}
}
