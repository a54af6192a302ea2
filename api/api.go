// Package api is ax server's HTTP surface and its client: the admin API
// under /api/v1, the executor endpoints, /metrics, /healthz, /readyz and
// the web console, with the wire types they encode and the Client the CLI
// decodes them with (one set of types for both sides). Reads come from the
// store, so a standby answers them; writes go through the primary's engine
// loop. The package imports engine and store; they never import it.
package api

import (
	"context"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/access"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/reload"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// Config is what the server's HTTP surface serves and from where.
type Config struct {
	Store  *store.Store
	Graph  *dag.Graph     // the pipelines at start; the engine's replace them after a reload
	Engine *engine.Engine // nil: no scheduler in this process (reads only, writes refused)
	Reload *reload.Watcher
	Gather prometheus.Gatherer // what /metrics serves
	// Registerer takes the API's own metrics (ax_results_repeated_total);
	// nil: they are not registered.
	Registerer prometheus.Registerer
	// Token is AX_ADMIN_TOKEN: the user "admin", with the admin role. With
	// a token, a users file or a trusted proxy every request needs a user
	// (reads none when OpenReads) whose role the route table asks. ExecToken is the executor credential
	// (AX_EXECUTOR_TOKEN, or the server's token file), required on the
	// executor endpoints: ax server always sets it; empty asks none (tests).
	Token, ExecToken string
	OpenReads        bool
	// Users returns the users file in force (it is reloaded); nil: none.
	Users func() *access.Users
	// Sessions signs the console's session cookies; nil: StoredSessions
	// of the Store (the key every server on it shares), lasting 12 hours.
	Sessions *access.Sessions
	// UsersRefused is why the users file's last reload was refused (nil
	// error: it loaded); GET /api/v1/reload says when it was.
	UsersRefused func() error
	// SessionTTL is how long a session of StoredSessions lasts (zero: 12 hours).
	SessionTTL time.Duration
	// ProxyHeader, when set, names the header in which a trusted proxy
	// (one at an address of ProxyFrom) names the user; from anywhere else
	// the header is refused.
	ProxyHeader string
	ProxyFrom   []netip.Prefix
	// Self is this server's base URL, recorded with the results it receives.
	Self string
	// WhoIs asks the executor at an address for its boot id (its /status):
	// a registration that claims a live executor's address with another
	// boot id is taken only when the executor answers with that boot id.
	// Nil: nobody is asked, and such a registration is taken (tests
	// without executors).
	WhoIs func(ctx context.Context, address string) (boot string, err error)
	// Deliver hands a result to the attempt waiting for it in this process.
	Deliver func(runner.Report) bool
	// Secrets resolve the secrets of the tasks whose results executors
	// post: masked (***) in each report before the inbox stores it. Nil:
	// reports are stored as sent.
	Secrets runner.Secrets
	Now     func() time.Time // default time.Now
	OpWait  time.Duration    // how long a write waits for the engine loop (default 15 s)
	Retain  time.Duration    // the server's --retain, for dry runs (0: keeps everything)
	// PruneBudget bounds an operator's pruning pass (zero: 45 s).
	PruneBudget time.Duration
}

// Handler returns everything ax server serves over HTTP.
func Handler(cfg Config) http.Handler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.OpWait == 0 {
		cfg.OpWait = 15 * time.Second
	}
	ex := &executorAPI{st: cfg.Store, g: cfg.Graph, self: cfg.Self, token: cfg.ExecToken, deliver: cfg.Deliver, repeats: newRepeatsCounter(), whoIs: cfg.WhoIs, secrets: cfg.Secrets, pools: &pools{}}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(ex.repeats)
	}
	if cfg.Engine != nil {
		ex.graphOf = cfg.Engine.Graph
	}
	if cfg.Sessions == nil {
		cfg.Sessions = StoredSessions(cfg.Store, cfg.SessionTTL, cfg.Now)
	}
	auth := authConfig{token: cfg.Token, users: cfg.Users, usersRefused: cfg.UsersRefused, sessions: cfg.Sessions, proxyHeader: cfg.ProxyHeader, proxyFrom: cfg.ProxyFrom}
	if auth.on() { // read (or make) the key now, so that signing in writes nothing; failing, the first sign-in retries
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = cfg.Sessions.Ready(ctx)
		cancel()
	}
	adm := &admin{st: cfg.Store, g: cfg.Graph, eng: cfg.Engine, reload: cfg.Reload, gather: cfg.Gather, auth: auth,
		openReads: cfg.OpenReads, now: cfg.Now, opWait: cfg.OpWait, retain: cfg.Retain, pruneBudget: cfg.PruneBudget, pools: ex.pools}
	return adm.handler(ex)
}
