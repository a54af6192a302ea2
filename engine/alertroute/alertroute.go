// Package alertroute sends the engine's alerts to webhooks, each route
// taking the alerts of some kinds and groups (all by default), in ax's JSON
// or as a Slack-compatible message: the --alert-webhook flag of ax server.
// Delivery is engine/webhook's (queued and retried, never blocking).
package alertroute

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/engine/webhook"
)

// Route is one --alert-webhook: the alerts it takes (by kind and by
// the task's group; empty takes all) and where they go, in ax's JSON or
// as a Slack-compatible message.
type Route struct {
	filter
	url   string
	slack bool
	hook  *webhook.Webhook
}

// Parse reads one --alert-webhook value: a bare URL (every alert,
// as JSON), or comma-separated key=value settings:
//
//	kind=task_failed|sla_missed,group=etl,url=https://hooks.example/x,format=slack
//
// kind and group take |-separated lists; format is json (default) or slack.
func Parse(spec string) (Route, error) {
	var r Route
	spec = strings.TrimSpace(spec)
	if !strings.Contains(spec, "=") || strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://") {
		r.url = spec
		return r, r.check(spec)
	}
	var last *string // a comma inside a URL belongs to it
	given := map[string]bool{}
	for _, part := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if known := k == "kind" || k == "group" || k == "url" || k == "format"; ok && known {
			// A repeated setting would silently replace the first.
			if given[k] {
				how := map[string]string{"kind": "write one kind=a|b", "group": "write one group=a|b",
					"url": "one route has one url (repeat --alert-webhook for another)", "format": "give one"}[k]
				return r, fmt.Errorf("%q: %s= is given twice: %s", spec, k, how)
			}
			given[k] = true
		}
		switch {
		case ok && k == "kind":
			r.kinds = splitList(v)
			if err := checkKinds(spec, r.kinds); err != nil {
				return r, err
			}
			last = nil
		case ok && k == "group":
			r.groups = splitList(v)
			last = nil
		case ok && k == "url":
			r.url = strings.TrimSpace(v)
			last = &r.url
		case ok && k == "format":
			switch v = strings.TrimSpace(v); v {
			case "json", "":
			case "slack":
				r.slack = true
			default:
				return r, fmt.Errorf("%q: format %q: use json or slack", spec, v)
			}
			last = nil
		case last != nil:
			*last += "," + part
		default:
			return r, fmt.Errorf("%q: %q is not a setting: write kind=…, group=…, url=…, format=json|slack, separated by commas", spec, part)
		}
	}
	return r, r.check(spec)
}

func (r Route) check(spec string) error {
	if r.url == "" {
		return fmt.Errorf("%q: no url=: say where to send the alerts", spec)
	}
	if !strings.HasPrefix(r.url, "http://") && !strings.HasPrefix(r.url, "https://") {
		return fmt.Errorf("%q: url %q: give an http:// or https:// URL", spec, r.url)
	}
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, "|") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// filter is which alerts a route takes: of its kinds and its tasks'
// groups (empty: all).
type filter struct {
	kinds, groups []string
}

// takes reports whether the route takes alert a.
func (f filter) takes(a engine.Alert) bool {
	return (len(f.kinds) == 0 || slices.Contains(f.kinds, a.Kind)) && (len(f.groups) == 0 || slices.Contains(f.groups, a.Group))
}

// payload is what the route POSTs for a.
func (r Route) payload(a engine.Alert) any {
	if !r.slack {
		return a
	}
	return slackMessage(a)
}

// slackMessage is a Slack incoming-webhook message (also understood by
// Mattermost, Rocket.Chat and Discord's /slack endpoints): text, with the
// details as fields.
func slackMessage(a engine.Alert) map[string]any {
	subject := a.Task
	if subject == "" {
		subject = a.Pipeline
	}
	text := fmt.Sprintf(":rotating_light: *%s*", a.Kind)
	if subject != "" {
		text += " `" + subject + "`"
	}
	text += ": " + a.Message
	var fields []map[string]any
	add := func(title, value string) {
		if value != "" {
			fields = append(fields, map[string]any{"title": title, "value": value, "short": true})
		}
	}
	add("group", a.Group)
	if a.Instance != 0 {
		add("instance", fmt.Sprint(a.Instance))
	}
	add("scheduler", a.Scheduler)
	add("at", a.At.UTC().Format(time.RFC3339))
	return map[string]any{"text": text, "attachments": []map[string]any{{"fallback": text, "fields": fields}}}
}

// Start starts a webhook per route and returns the sink that
// hands each alert to every route that takes it.
func Start(ctx context.Context, routes []Route, log *slog.Logger) (func(engine.Alert), error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}
	for i := range routes {
		hook, err := webhook.New(webhook.Config{URL: routes[i].url, Logger: log, Client: client})
		if err != nil {
			return nil, err
		}
		routes[i].hook = hook
		go func() { _ = hook.Run(ctx) }()
	}
	return func(a engine.Alert) {
		for _, r := range routes {
			if r.takes(a) {
				r.hook.Send(r.payload(a))
			}
		}
	}, nil
}
