// Package webhook delivers alerts to an HTTP endpoint as JSON POSTs.
//
// Send only queues: the scheduler loop never waits for a slow or dead
// endpoint. Run delivers the queue in order, retrying each alert with
// backoff; an alert that still fails after the last attempt, or that finds
// the queue full, is dropped with a log line and counted — the action log
// keeps every alert regardless.
//
// A Webhook is safe for concurrent use; Run has one owner.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"
)

// Config configures a Webhook. A zero field means its default.
type Config struct {
	URL    string       // where to POST; http or https
	Client *http.Client // required: no http.DefaultClient
	// Queue is how many alerts wait for delivery. Default 1,000.
	Queue int
	// Attempts is how many times one alert is tried. Default 6.
	Attempts int
	// Backoff is the wait after the first failure; it doubles up to MaxBackoff. Default 1 s.
	Backoff time.Duration
	// MaxBackoff caps the wait. Default 1 min.
	MaxBackoff time.Duration
	Logger     *slog.Logger // default: discard
}

// Webhook is an alert sink.
type Webhook struct {
	cfg       Config
	ch        chan []byte
	delivered atomic.Int64
	dropped   atomic.Int64
}

// New validates cfg and returns a Webhook; call Run to deliver.
func New(cfg Config) (*Webhook, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("webhook: URL %q: give an http:// or https:// URL", cfg.URL)
	}
	if cfg.Client == nil {
		return nil, fmt.Errorf("webhook: Client is required")
	}
	if cfg.Queue == 0 {
		cfg.Queue = 1000
	}
	if cfg.Attempts == 0 {
		cfg.Attempts = 6
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Webhook{cfg: cfg, ch: make(chan []byte, cfg.Queue)}, nil
}

// Send queues v, encoded as JSON, and reports whether it was queued; it
// never blocks.
func (w *Webhook) Send(v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		w.cfg.Logger.Error("webhook_unencodable", "err", err)
		w.dropped.Add(1)
		return false
	}
	select {
	case w.ch <- b:
		return true
	default:
		w.dropped.Add(1)
		w.cfg.Logger.Warn("webhook_queue_full", "queue", w.cfg.Queue, "dropped_total", w.dropped.Load())
		return false
	}
}

// Delivered and Dropped count alerts so far.
func (w *Webhook) Delivered() int64 { return w.delivered.Load() }
func (w *Webhook) Dropped() int64   { return w.dropped.Load() }

// Run delivers queued alerts until ctx ends.
func (w *Webhook) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-w.ch:
			w.deliver(ctx, b)
		}
	}
}

func (w *Webhook) deliver(ctx context.Context, body []byte) {
	wait := w.cfg.Backoff
	for attempt := 1; ; attempt++ {
		err := w.post(ctx, body)
		if err == nil {
			w.delivered.Add(1)
			return
		}
		if attempt >= w.cfg.Attempts {
			w.dropped.Add(1)
			w.cfg.Logger.Error("webhook_gave_up", "url", w.cfg.URL, "attempts", attempt, "err", err.Error())
			return
		}
		w.cfg.Logger.Warn("webhook_retry", "url", w.cfg.URL, "attempt", attempt, "retry_in", wait.String(), "err", err.Error())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(wait*2, w.cfg.MaxBackoff)
	}
}

func (w *Webhook) post(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}
