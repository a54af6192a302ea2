package alertroute

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
)

// MailRoute is one --alert-mail: the alerts it takes (by kind and by the
// task's group; empty takes all), who receives them, and how often at
// most a mail goes (the alerts in between go in one digest).
type MailRoute struct {
	filter
	to    []string
	every time.Duration
}

// DefaultMailEvery is how often at most a route mails: the first alert at
// once, those that follow within it in one digest.
const DefaultMailEvery = 5 * time.Minute

// maxMailEvery bounds a route's every: an alert waits at most a week for
// its digest.
const maxMailEvery = 7 * 24 * time.Hour

// ParseMail reads one --alert-mail value, comma-separated key=value
// settings:
//
//	kind=task_failed|sla_missed,group=etl,to=oncall@example.com|data@example.com,every=10m
//
// kind, group and to take |-separated lists; to is required; every is
// how often at most the route mails (default 5m, at most a week).
func ParseMail(spec string) (MailRoute, error) {
	r := MailRoute{every: DefaultMailEvery}
	given := map[string]bool{}
	for _, part := range strings.Split(strings.TrimSpace(spec), ",") {
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok || !slices.Contains([]string{"kind", "group", "to", "every"}, k) {
			return r, fmt.Errorf("%q: %q is not a setting: write kind=…, group=…, to=…, every=…, separated by commas", spec, part)
		}
		if given[k] {
			return r, fmt.Errorf("%q: %s= is given twice: write one %s=a|b", spec, k, k)
		}
		given[k] = true
		switch k {
		case "kind":
			r.kinds = splitList(v)
			if err := checkKinds(spec, r.kinds); err != nil {
				return r, err
			}
		case "group":
			r.groups = splitList(v)
		case "to":
			r.to = splitList(v)
			for _, a := range r.to {
				if addr, err := mail.ParseAddress(a); err != nil || addr.Address != a {
					return r, fmt.Errorf("%q: to %q is not a mail address: write name@domain, several separated by |", spec, a)
				}
			}
		case "every":
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil || d < time.Second || d > maxMailEvery {
				return r, fmt.Errorf("%q: every %q: give a duration from 1s to %s, such as 5m", spec, v, maxMailEvery)
			}
			r.every = d
		}
	}
	if len(r.to) == 0 {
		return r, fmt.Errorf("%q: no to=: say who receives the alerts (to=name@domain)", spec)
	}
	return r, nil
}

// checkKinds refuses a kind that is not an alert kind.
func checkKinds(spec string, kinds []string) error {
	for _, kind := range kinds {
		if !slices.Contains(engine.AlertKinds(), kind) {
			return fmt.Errorf("%q: kind %q is not an alert kind: use one of %s%s", spec, kind, strings.Join(engine.AlertKinds(), ", "),
				defs.DidYouMean(kind, engine.AlertKinds()))
		}
	}
	return nil
}

// maxPending bounds the alerts a route keeps for its next mail; those
// beyond are counted in it, not listed.
const maxPending = 1000

// mailer sends one route's mails: Send queues, run mails, at most one mail
// per every, never blocking whoever raised the alert.
type mailer struct {
	route   MailRoute
	srv     *MailServer
	log     *slog.Logger
	failed  prometheus.Counter
	mu      sync.Mutex
	pending []engine.Alert
	more    int  // alerts beyond maxPending since the last mail
	closed  bool // run returned: nothing more is mailed
	wake    chan struct{}
}

// Send queues a for the route's next mail; it never blocks.
func (m *mailer) Send(a engine.Alert) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.lost(1, 0, errors.New("the server is stopping: its last mail went already"))
		return
	}
	if len(m.pending) < maxPending {
		m.pending = append(m.pending, a)
	} else {
		m.more++
	}
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// take returns the alerts queued, and how many more there were.
func (m *mailer) take() ([]engine.Alert, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out, more := m.pending, m.more
	m.pending, m.more = nil, 0
	return out, more
}

// run mails the queued alerts until ctx ends: the first at once, then at
// most one mail per every (a digest of what came in between). When ctx
// ends, the mail in flight goes on and what is still queued goes in a
// last mail, tried once, both through send: a context that ends a grace
// (the session's timeout) after ctx. An alert queued after run returned
// is counted and logged as not delivered.
func (m *mailer) run(ctx, send context.Context) {
	var next time.Time // the earliest the next mail may go
	for {
		select {
		case <-ctx.Done():
			m.mu.Lock()
			m.closed = true
			m.mu.Unlock()
			if as, more := m.take(); len(as) > 0 {
				m.deliver(ctx, send, as, more, 1)
			}
			return
		case <-m.wake:
		}
		if wait := next.Sub(time.Now()); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				continue // the last mail, above
			case <-t.C:
			}
		}
		as, more := m.take()
		if len(as) == 0 {
			continue
		}
		m.deliver(ctx, send, as, more, m.srv.attempts())
		next = time.Now().Add(m.route.every)
	}
}

// deliver sends the mail of as through send, trying up to attempts times
// with a doubling wait, no more tries once ctx ended; when it was not
// delivered it counts and logs the alerts lost.
func (m *mailer) deliver(ctx, send context.Context, as []engine.Alert, more, attempts int) {
	msg := compose(m.srv, m.route.to, as, more)
	wait := m.srv.backoff()
	for attempt := 1; ; attempt++ {
		err := m.srv.send(send, m.route.to, msg)
		if err == nil {
			return
		}
		if attempt >= attempts || ctx.Err() != nil {
			m.lost(len(as)+more, attempt, err)
			return
		}
		m.log.Warn("alert_mail_retry", "to", strings.Join(m.route.to, ","), "attempt", attempt, "retry_in", wait.String(), "err", err.Error())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		wait = min(wait*2, time.Minute)
	}
}

// lost counts and logs n alerts not delivered.
func (m *mailer) lost(n, attempts int, err error) {
	m.failed.Add(float64(n))
	m.log.Error("alert_delivery_failed", "target", "mail", "to", strings.Join(m.route.to, ","), "alerts", n,
		"attempts", attempts, "err", err.Error())
}

// StartMail starts a mailer per route, sending through srv until ctx
// ends, and returns the sink that hands each alert to every route that
// takes it, and wait, which returns when every mailer has finished: its
// mail in flight and its last mail sent, or given up a session timeout
// after ctx ended. Mails that cannot be delivered count in
// ax_alert_delivery_failed_total{target="mail"} (registered with reg, nil:
// none) and are logged as alert_delivery_failed.
func StartMail(ctx context.Context, routes []MailRoute, srv *MailServer, log *slog.Logger, reg prometheus.Registerer) (send func(engine.Alert), wait func(), err error) {
	if len(routes) == 0 {
		return func(engine.Alert) {}, func() {}, nil
	}
	if err := srv.Check(); err != nil {
		return nil, nil, err
	}
	failed := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_alert_delivery_failed_total",
		Help: "Alerts that could not be delivered to a route, by the route's target."}, []string{"target"})
	if reg != nil {
		if err := reg.Register(failed); err != nil {
			are := prometheus.AlreadyRegisteredError{}
			if !errors.As(err, &are) {
				return nil, nil, err
			}
			failed = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	sendCtx, stopSending := context.WithCancelCause(context.WithoutCancel(ctx))
	context.AfterFunc(ctx, func() {
		time.AfterFunc(srv.timeout(), func() {
			stopSending(fmt.Errorf("ax is stopping and the mail was not through %s after (the session's timeout)", srv.timeout()))
		})
	})
	var wg sync.WaitGroup
	ms := make([]*mailer, len(routes))
	for i, r := range routes {
		ms[i] = &mailer{route: r, srv: srv, log: log, failed: failed.WithLabelValues("mail"), wake: make(chan struct{}, 1)}
		wg.Go(func() { ms[i].run(ctx, sendCtx) })
	}
	return func(a engine.Alert) {
		for _, m := range ms {
			if m.route.takes(a) {
				m.Send(a)
			}
		}
	}, wg.Wait, nil
}
