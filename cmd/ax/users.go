package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ax-sched/ax/access"
	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/engine"
)

// authFlags are ax server's flags of who may use the API.
type authFlags struct {
	users       string
	proxyHeader string
	proxyFrom   []string
	sessionTTL  time.Duration
}

func addAuthFlags(fl *pflag.FlagSet, f *authFlags) {
	fl.StringVar(&f.users, "users", "", "users file: each user or service with a role (viewer, operator, admin), an optional scope of groups and pipelines, and a hashed token (ax users add writes entries); reloaded when it changes and on SIGHUP")
	fl.StringVar(&f.proxyHeader, "auth-proxy-header", "", "trusted-proxy sign-in: the header in which a proxy in front (oauth2-proxy and the like) names the user, such as X-Forwarded-User; needs --users and --auth-proxy-from")
	fl.StringSliceVar(&f.proxyFrom, "auth-proxy-from", nil, "addresses (CIDR, such as 127.0.0.1/32) of the trusted proxy: the --auth-proxy-header from anywhere else is refused")
	fl.DurationVar(&f.sessionTTL, "session-ttl", 12*time.Hour, "how long a console sign-in lasts")
}

// signInRequired reports whether the server asks who calls it: with
// AX_ADMIN_TOKEN (token) or a users file (which the proxy mode needs).
func (f authFlags) signInRequired(token string) bool { return token != "" || f.users != "" }

// serverAuth is what the server's API authenticates with.
type serverAuth struct {
	file      *access.File // nil: no users file
	proxyFrom []netip.Prefix
}

// openAuth checks the auth flags and loads the users file, whose scopes
// name groups and pipelines of graph() (the pipelines in force).
func openAuth(f authFlags, graph func() *dag.Graph, log *slog.Logger) (serverAuth, error) {
	var sa serverAuth
	if f.sessionTTL <= 0 {
		return sa, cli.Usage("--session-ttl %s: give a positive duration, such as 12h", f.sessionTTL)
	}
	if (f.proxyHeader == "") != (len(f.proxyFrom) == 0) {
		return sa, cli.Usage("--auth-proxy-header and --auth-proxy-from go together: give the header the proxy names the user in and the proxy's addresses")
	}
	for _, s := range f.proxyFrom {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return sa, cli.Usage("--auth-proxy-from %q: give an address range such as 127.0.0.1/32 or 10.0.0.0/8", s)
		}
		sa.proxyFrom = append(sa.proxyFrom, p)
	}
	if f.proxyHeader != "" && f.users == "" {
		return sa, cli.Usage("--auth-proxy-header needs --users: the users file gives each name the proxy sends its role")
	}
	if f.users == "" {
		return sa, nil
	}
	file, err := access.Open(f.users, knownIn(graph), log)
	if err != nil {
		return sa, cli.Usage("--users: %v", err)
	}
	sa.file = file
	return sa, nil
}

// knownIn checks a users file's scopes against the pipelines in force.
func knownIn(graph func() *dag.Graph) access.Known {
	return func(kind, name string) (bool, []string) {
		var names []string
		g := graph()
		if kind == "pipeline" {
			for _, p := range g.Pipelines() {
				names = append(names, p.Name)
			}
		} else {
			for _, t := range g.Order() {
				if !slices.Contains(names, t.Group) {
					names = append(names, t.Group)
				}
			}
		}
		return slices.Contains(names, name), names
	}
}

// config fills the API's authentication settings; c.Store is set.
func (sa serverAuth) config(c *api.Config, f authFlags) {
	c.Sessions = api.StoredSessions(c.Store, f.sessionTTL, c.Now)
	c.ProxyHeader, c.ProxyFrom = f.proxyHeader, sa.proxyFrom
	if sa.file != nil {
		c.Users, c.UsersRefused = sa.file.Users, sa.file.Refused
		sa.file.OnLeave(c.Sessions.Left) // a user removed and restored signs in again
	}
}

// watch reloads the users file every interval when it changed, and on
// SIGHUP, until ctx ends.
func (sa serverAuth) watch(ctx context.Context, interval time.Duration) {
	if sa.file == nil {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var ticks <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		ticks = t.C
	}
	sa.file.Watch(ctx, ticks, hup)
}

func newUsersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "users",
		Short: "Manage the users file of ax server --users FILE",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newUsersAddCmd())
	return cmd
}

func newUsersAddCmd() *cobra.Command {
	var (
		file, role        string
		groups, pipelines []string
		actFor            bool
	)
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a user or service with a new token: the token is printed once, the file keeps its hash",
		Long: `Add a user or service to the users file with a role (viewer, operator,
admin), optionally scoped to groups and pipelines, and a new random token.
The token is printed once, on standard output; the file keeps only its
sha256 hash. A running server reloads the file within --watch.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usersAdd(cmd.OutOrStdout(), cmd.ErrOrStderr(), cmp.Or(file, os.Getenv("AX_USERS_FILE"), "users.yaml"), args[0], role, groups, pipelines, actFor)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&file, "file", "", "the users file (default $AX_USERS_FILE, else ./users.yaml); created when missing")
	fl.StringVar(&role, "role", "", "viewer (reads), operator (trigger, pause, kill, rerun, mark, cancel, backfill) or admin (also limits, prune, executors, approving backfills)")
	fl.StringSliceVar(&groups, "group", nil, "scope the user's actions to these groups (repeatable)")
	fl.StringSliceVar(&pipelines, "pipeline", nil, "scope the user's actions to these pipelines (repeatable)")
	fl.BoolVar(&actFor, "act-for", false, "a service that may name the person it acts for (X-Ax-Actor): the action needs both their roles and the action log records both")
	return cmd
}

func usersAdd(stdout, stderr io.Writer, file, name, role string, groups, pipelines []string, actFor bool) error {
	if role == "" {
		return cli.Usage("give --role: viewer, operator or admin")
	}
	r, err := access.ParseRole(role)
	if err != nil {
		return cli.Usage("--role: %v", err)
	}
	tok, err := access.Add(file, access.User{Name: name, Role: r, Groups: groups, Pipelines: pipelines, ActFor: actFor})
	if err != nil {
		return cli.Fail(err)
	}
	fmt.Fprintf(stderr, "added %s to %s; its token (shown once, kept nowhere):\n", name, file)
	_, err = fmt.Fprintln(stdout, strings.TrimSpace(tok))
	return err
}

// graphInForce is the engine's pipelines once it runs (a reload replaces
// them), g before.
func graphInForce(eng *engine.Engine, g *dag.Graph) *dag.Graph {
	if eng != nil {
		return eng.Graph()
	}
	return g
}
