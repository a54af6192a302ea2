package main

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/engine/alertroute"
	"github.com/ax-sched/ax/runner"
)

// mailFlags are the flags of alert mails: the routes and the SMTP server.
type mailFlags struct {
	routes                   []string
	server, from, user, pass string
}

func addMailFlags(fl *pflag.FlagSet, f *mailFlags) {
	fl.StringArrayVar(&f.routes, "alert-mail", nil, "who alerts are mailed to, repeatable: to=A@X|B@Y[,kind=K1|K2][,group=G1|G2][,every=5m] (the first alert at once, then at most one mail per every: a digest; retried; never blocks dispatch); needs --smtp-server and --smtp-from")
	fl.StringVar(&f.server, "smtp-server", "", "the SMTP server alert mails go through, host:port (STARTTLS whenever it offers it)")
	fl.StringVar(&f.from, "smtp-from", "", "the sender of alert mails, name@domain")
	fl.StringVar(&f.user, "smtp-user", "", "the user alert mails authenticate as (with --smtp-password; only over TLS)")
	fl.StringVar(&f.pass, "smtp-password", "", "the SMTP password, as a secret reference: NAME (a file of --secrets-dir) or env:NAME (this process's environment), read when a mail goes")
}

// alertSetup is the alert routes of the flags, checked.
type alertSetup struct {
	hooks []alertroute.Route
	mails []alertroute.MailRoute
	smtp  alertroute.MailServer
	pass  defs.SecretRef // of smtp's user; zero: none
}

// alertRoutes parses and checks every --alert-webhook and --alert-mail,
// and the SMTP server's settings.
func alertRoutes(f serverFlags) (alertSetup, error) {
	var a alertSetup
	for _, spec := range f.webhooks {
		r, err := alertroute.Parse(spec)
		if err != nil {
			return a, cli.Usage("--alert-webhook %v", err)
		}
		a.hooks = append(a.hooks, r)
	}
	m := f.mail
	for _, spec := range m.routes {
		r, err := alertroute.ParseMail(spec)
		if err != nil {
			return a, cli.Usage("--alert-mail %v", err)
		}
		a.mails = append(a.mails, r)
	}
	if len(a.mails) == 0 {
		if m.server != "" || m.from != "" || m.user != "" || m.pass != "" {
			return a, cli.Usage("--smtp-* is given but no --alert-mail: say who receives the alerts (--alert-mail to=name@domain)")
		}
		return a, nil
	}
	a.smtp = alertroute.MailServer{Addr: m.server, From: m.from, User: m.user}
	if m.pass != "" {
		ref, err := defs.ParseSecretRef(m.pass)
		if err != nil {
			return a, cli.Usage("--smtp-password: %v", err)
		}
		a.pass = ref
		a.smtp.Password = func(context.Context) (string, error) { return "", nil } // for Check; set in alertSinks
	}
	if err := a.smtp.Check(); err != nil {
		return a, cli.Usage("%v", err)
	}
	return a, nil
}

// alertSinks starts the alert routes, which run until ctx ends, and
// returns what hands each alert to every one of them, and wait, which
// returns once the mails in flight when ctx ended and the last mails are
// sent or given up (logged). The SMTP password is read from secrets when a
// mail goes; the mails link to the console at self.
func alertSinks(ctx context.Context, a alertSetup, secrets runner.Secrets, self string, log *slog.Logger, reg prometheus.Registerer) (func(engine.Alert), func(), error) {
	var sinks []func(engine.Alert)
	wait := func() {}
	if len(a.hooks) > 0 {
		send, err := alertroute.Start(ctx, a.hooks, log)
		if err != nil {
			return nil, nil, cli.Usage("--alert-webhook: %v", err)
		}
		sinks = append(sinks, send)
	}
	if len(a.mails) > 0 {
		srv := a.smtp
		srv.Console = self
		if srv.User != "" {
			srv.Password = func(ctx context.Context) (string, error) { return secrets.Resolve(ctx, a.pass) }
			if _, err := srv.Password(ctx); err != nil {
				log.Warn("secret_unresolved", "flag", "--smtp-password", "err", err) // mails fail until it resolves
			}
		}
		send, waitMail, err := alertroute.StartMail(ctx, a.mails, &srv, log, reg)
		if err != nil {
			return nil, nil, cli.Usage("--alert-mail: %v", err)
		}
		sinks = append(sinks, send)
		wait = waitMail
	}
	return func(a engine.Alert) {
		for _, s := range sinks {
			s(a)
		}
	}, wait, nil
}
