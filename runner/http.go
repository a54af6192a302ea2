package runner

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ProtocolVersion is the version of the dispatch protocol spoken over HTTP.
const ProtocolVersion = 1

// Dispatch is what the scheduler POSTs to an HTTP executor, as JSON,
// with the header X-Ax-Protocol: 1.
type Dispatch struct {
	Version     int            `json:"version"`
	Pipeline    string         `json:"pipeline"`
	Task        string         `json:"task"`
	InstanceID  int64          `json:"instance_id"`
	Ticket      string         `json:"ticket"`
	LogicalTime time.Time      `json:"logical_time"`
	Deadline    time.Time      `json:"deadline"`
	Params      map[string]any `json:"params,omitempty"`
	// Env is the task's environment (its `env:`, rendered, with its
	// secrets' values): the executor gives it to the work, never logs it.
	Env map[string]string `json:"env,omitempty"`
	// SecretEnv names the variables of Env that hold a secret: the
	// executor masks their values (***) in the output and the error it
	// reports, as the scheduler does.
	SecretEnv []string `json:"secret_env,omitempty"`
	// Callback, when set, asks for the asynchronous form: answer 202 at once
	// and POST the Report there (at least once) when the work ends.
	Callback string `json:"callback,omitempty"`
	// TicketTTLMS is how long to remember the ticket's result, in ms.
	TicketTTLMS int64 `json:"ticket_ttl_ms,omitempty"`
}

// Report is an executor's answer: the result of the attempt, for its ticket.
type Report struct {
	Ticket     string `json:"ticket"`
	Status     Status `json:"status"` // success or failed
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
	Permanent  bool   `json:"permanent,omitempty"`
	Output     string `json:"output,omitempty"`
	// Log is the task's output as records (see Output and DecodeLines;
	// base64 in JSON), what its function logged through Logger(ctx): the SDK
	// sends it. LogDropped counts the bytes dropped over the executor's limit.
	Log        []byte `json:"log,omitempty"`
	LogDropped int64  `json:"log_dropped,omitempty"`
	// InstanceID, when set, is the instance of the dispatch (the SDK sends
	// it): a result whose ticket belongs to another instance is refused.
	InstanceID int64 `json:"instance_id,omitempty"`
}

// StatusQuery is what a scheduler POSTs to an executor's /status: the
// tickets it inherited in RUNNING and must resolve.
type StatusQuery struct {
	Tickets []string `json:"tickets"`
}

// StatusAnswer is the executor's answer, by ticket, from its ticket cache.
type StatusAnswer struct {
	Boot    string                  `json:"boot,omitempty"`
	Tickets map[string]TicketStatus `json:"tickets"`
}

// TicketStatus is what an executor knows of one ticket.
type TicketStatus struct {
	State  string  `json:"state"`            // TicketDone, TicketRunning or TicketUnknown
	Result *Report `json:"result,omitempty"` // when done
}

// Ticket states in a StatusAnswer.
const (
	TicketDone    = "done"    // ran here: the result is attached
	TicketRunning = "running" // runs here now: its result will be delivered
	TicketUnknown = "unknown" // never started here (or forgotten after its TTL)
)

// MaxReportOutput bounds the output a report may carry, in bytes (64 KiB,
// output and log together): an executor keeps the tail of longer output; a
// report with more is refused.
const MaxReportOutput = 64 << 10

// maxReport bounds the body read from an executor.
const maxReport = 1 << 20

// HTTP runs attempts on HTTP executors: it POSTs a Dispatch to the task's
// URL and reads the Report from the response, under the attempt's deadline.
// A 429 or 503 answer is a refusal (try later), any other non-2xx answer or
// a connection error fails the attempt (retried per its policy), and a
// malformed report fails it with the reason.
type HTTP struct {
	client   *http.Client
	url      func(Attempt) (string, error)
	callback string // asynchronous form when set: where executors POST results
	token    string // sent as a bearer token with dispatches and kills, when set
	waiters  *waiters
	accepted func(ticket, boot string) // when set: told the boot id (or "") of the process that accepted an asynchronous dispatch
	unkilled func(ticket string)       // when set: told of a kill that did not reach the executor, to be sent again
}

// waiters holds the attempts waiting for their result by callback, by ticket.
type waiters struct {
	mu sync.Mutex
	m  map[string]chan Report
}

func (w *waiters) add(ticket string) chan Report {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan Report, 1)
	w.m[ticket] = ch
	return ch
}

func (w *waiters) remove(ticket string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, ticket)
}

// deliver hands rep to the attempt waiting for it; false when none waits.
func (w *waiters) deliver(rep Report) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.m[rep.Ticket]
	if !ok {
		return false
	}
	delete(w.m, rep.Ticket)
	ch <- rep
	return true
}

var _ Executor = (*HTTP)(nil)

// NewHTTP returns an HTTP executor; url gives an attempt's endpoint.
func NewHTTP(client *http.Client, url func(Attempt) (string, error)) *HTTP {
	return &HTTP{client: client, url: url, waiters: &waiters{m: map[string]chan Report{}}}
}

// WithToken returns a copy of h that sends token (AX_EXECUTOR_TOKEN) as a
// bearer token with every dispatch and kill, so that executors can tell the
// scheduler from anyone else.
func (h *HTTP) WithToken(token string) *HTTP {
	c := *h
	c.token = token
	return &c
}

// WithCallback returns a copy of h that asks executors for the asynchronous
// form, with results POSTed to callback and handed in through Deliver.
func (h *HTTP) WithCallback(callback string) *HTTP {
	c := *h
	c.callback = callback
	return &c
}

// Deliver hands a result that arrived at the callback to the attempt
// waiting for it, and reports whether one was.
func (h *HTTP) Deliver(rep Report) bool { return h.waiters.deliver(rep) }

// ParseReport checks a result posted to the callback, as strictly as an
// answer: unknown fields, a missing ticket or an unknown status are malformed.
func ParseReport(data []byte) (Report, error) {
	var probe struct {
		Ticket string `json:"ticket"`
	}
	_ = json.Unmarshal(data, &probe)
	if probe.Ticket == "" {
		return Report{}, errors.New("malformed report: no ticket")
	}
	return parseReport(data, probe.Ticket)
}

// Execute posts the dispatch and waits for the report.
func (h *HTTP) Execute(ctx context.Context, a Attempt) (Result, error) {
	url, err := h.url(a)
	if err != nil {
		return Result{}, err
	}
	r, err := h.send(ctx, a, url)
	r.Executor = url // which executor ran it
	return r, err
}

// send dispatches a to url and waits for its report.
func (h *HTTP) send(ctx context.Context, a Attempt, url string) (Result, error) {
	if !a.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, a.Deadline)
		defer cancel()
	}
	body, err := json.Marshal(Dispatch{Version: ProtocolVersion, Pipeline: a.Pipeline, Task: a.Task, InstanceID: a.InstanceID,
		Ticket: a.Ticket, LogicalTime: a.LogicalTime, Deadline: a.Deadline, Params: a.Params, Env: a.Env, SecretEnv: a.SecretEnv, Callback: h.callback,
		TicketTTLMS: a.TicketTTL.Milliseconds()})
	if err != nil {
		return Result{Ticket: a.Ticket, Status: StatusFailed, Error: "encode dispatch: " + err.Error(), Permanent: true}, nil
	}
	start := time.Now()
	var result chan Report
	if h.callback != "" {
		result = h.waiters.add(a.Ticket) // before the dispatch: the result may come back before the answer
		defer h.waiters.remove(a.Ticket)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Result{Ticket: a.Ticket, Status: StatusFailed, Error: "build request: " + err.Error(), Permanent: true}, nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Ax-Protocol", fmt.Sprint(ProtocolVersion))
	h.authorize(req)
	resp, err := h.client.Do(req)
	if err != nil {
		if stopsRemote(ctx) {
			h.stop(url, a.Ticket) // the dispatch may have reached the executor before the hang-up
		}
		r := finish(ctx, a, start, fmt.Errorf("dispatch to %s: %w", url, err))
		var op *net.OpError
		r.Refused = r.Status == StatusFailed && errors.As(err, &op) && op.Op == "dial" // never reached it: try another
		return r, nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReport+1))
	if err != nil {
		return finish(ctx, a, start, fmt.Errorf("read report from %s: %w", url, err)), nil
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusConflict:
		// Busy, full or re-entrant: not the task's failure.
		r := finish(ctx, a, start, fmt.Errorf("executor %s refused the dispatch (%s): %s", url, resp.Status, refusalReason(data)))
		r.Refused = r.Status == StatusFailed
		return r, nil
	case resp.StatusCode/100 != 2:
		return finish(ctx, a, start, fmt.Errorf("executor %s answered %s: %s", url, resp.Status, firstLine(data))), nil
	}
	if resp.StatusCode == http.StatusAccepted && result != nil {
		return h.await(ctx, a, url, data, start, result), nil
	}
	rep, err := parseReport(data, a.Ticket)
	if err != nil {
		return finish(ctx, a, start, fmt.Errorf("executor %s: %w", url, err)), nil
	}
	return reportResult(rep, start), nil
}

// Result converts an executor's report into a result.
func (rep Report) Result() Result {
	return Result{Ticket: rep.Ticket, Status: rep.Status, Duration: time.Duration(rep.DurationMS) * time.Millisecond,
		Error: rep.Error, Permanent: rep.Permanent, Output: []byte(rep.Output), Log: rep.Log, LogDropped: rep.LogDropped}
}

// parseReport decodes and checks a report strictly: unknown fields, another
// ticket or an unknown status make it malformed.
func parseReport(data []byte, ticket string) (Report, error) {
	if len(data) > maxReport {
		return Report{}, fmt.Errorf("malformed report: larger than %d bytes", maxReport)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var rep Report
	if err := dec.Decode(&rep); err != nil {
		return Report{}, fmt.Errorf("malformed report: %v (body starts %q)", err, firstLine(data))
	}
	if dec.More() {
		return Report{}, errors.New("malformed report: data after the JSON object")
	}
	switch {
	case rep.Ticket != ticket:
		return Report{}, fmt.Errorf("malformed report: ticket %q, want %q", rep.Ticket, ticket)
	case rep.Status != StatusSuccess && rep.Status != StatusFailed:
		return Report{}, fmt.Errorf("malformed report: status %q, want success or failed", rep.Status)
	case rep.DurationMS < 0:
		return Report{}, fmt.Errorf("malformed report: negative duration_ms %d", rep.DurationMS)
	}
	return rep, nil
}

func firstLine(b []byte) string {
	line, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte("\n"))
	if len(line) > 200 {
		line = line[:200]
	}
	return string(line)
}

// refusalReason reads the reason of an SDK refusal ({"reason": …}), or the body's first line.
func refusalReason(data []byte) string {
	var ans struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal(data, &ans) == nil && ans.Reason != "" {
		return ans.Reason
	}
	return firstLine(data)
}

// await waits for the result of an accepted asynchronous dispatch until
// the attempt's deadline; a kill or a shutdown is forwarded to the executor.
// ch is the channel the result is delivered on; it may hold it already.
func (h *HTTP) await(ctx context.Context, a Attempt, url string, answer []byte, start time.Time, ch chan Report) Result {
	var ans struct {
		Accepted bool    `json:"accepted"`
		Result   *Report `json:"result"`
		Boot     string  `json:"boot"`
	}
	if err := json.Unmarshal(answer, &ans); err == nil && ans.Result != nil && ans.Result.Ticket == a.Ticket {
		return reportResult(*ans.Result, start) // a ticket the executor ran already: its earlier result
	}
	if h.accepted != nil {
		h.accepted(a.Ticket, ans.Boot)
	}
	select {
	case rep := <-ch:
		return reportResult(rep, start)
	case <-ctx.Done():
		if stopsRemote(ctx) {
			h.stop(url, a.Ticket)
		}
		return finish(ctx, a, start, ctx.Err())
	}
}

// stopsRemote reports whether the attempt's context ended in a way that
// must stop its work on the executor too: a kill, or the scheduler's
// shutdown, which gives the attempt back to run again (the work must not
// run on beside the next attempt). A deadline needs nothing: the executor
// has it.
func stopsRemote(ctx context.Context) bool {
	cause := context.Cause(ctx)
	return errors.Is(cause, ErrKilled) || errors.Is(cause, ErrInterrupted)
}

func reportResult(rep Report, start time.Time) Result {
	r := rep.Result()
	if r.Duration == 0 {
		r.Duration = time.Since(start)
	}
	return r
}

// stop asks the executor to cancel the ticket's work; a kill that does not
// reach it is handed to unkilled, when set, to be sent again when the
// executor is heard from (the instance ends KILLED either way).
func (h *HTTP) stop(dispatchURL, ticket string) {
	if err := h.kill(dispatchURL, ticket); err != nil && h.unkilled != nil {
		h.unkilled(ticket)
	}
}

// kill asks the executor to cancel the ticket's work; an error when the
// request did not reach it (or it could not take it: 5xx). A ticket it does
// not know (404) has nothing to stop there.
func (h *HTTP) kill(dispatchURL, ticket string) error {
	base := strings.TrimSuffix(dispatchURL, "/dispatch")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"ticket": ticket})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/kill", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	h.authorize(req)
	resp, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("kill of %s at %s: %w", ticket, base, err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 == 5 {
		return fmt.Errorf("kill of %s at %s: %s", ticket, base, resp.Status)
	}
	return nil
}

func (h *HTTP) authorize(req *http.Request) {
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
}

// BearerOK reports whether r carries token as its bearer token, compared in
// constant time; an empty token asks for none. Both ends of the protocol,
// and the admin API, check tokens with it.
func BearerOK(r *http.Request, token string) bool {
	if token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// DecodeStrict reads one JSON object of at most limit bytes from r's body
// into v: unknown fields, trailing data and oversized bodies are errors.
// Both ends of the protocol decode requests with it.
func DecodeStrict(r *http.Request, v any, limit int64) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON object")
	}
	return nil
}
