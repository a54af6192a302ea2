package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Client calls a running ax server's admin API: the CLI's default way to
// reach the scheduler. It decodes answers into the same types the server
// encodes, so the two cannot drift apart.
type Client struct {
	base  string
	token string // AX_ADMIN_TOKEN
	actor string // sent as X-Ax-Actor, recorded with every write
	hc    *http.Client
}

// NewClient returns a client of the API at base (such as
// http://127.0.0.1:8080), sending token when it is set.
func NewClient(base, token, actor string) *Client {
	return &Client{base: base, token: token, actor: actor, hc: &http.Client{Timeout: 60 * time.Second}}
}

// Base is the URL the client calls.
func (c *Client) Base() string { return c.base }

// UnreachableError says that the server could not be called at all.
type UnreachableError struct {
	Base string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach ax server at %s: %v (start one with make run; point elsewhere with --server or AX_SERVER; or read a store directly with --store)", e.Base, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// StatusError is an error answer of the API: its status and message.
type StatusError struct {
	Code int
	Msg  string
}

func (e *StatusError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Msg, e.Code) }

// IsNotFound says whether err is the API's 404.
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

// request builds a request of the API with its headers.
func (c *Client) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json") // the server refuses other mutations (CSRF)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("X-Ax-Actor", c.actor)
	return req, nil
}

// Call sends body (nil for none) as JSON and returns the answer's JSON. An
// error answer becomes a *StatusError carrying the server's message.
func (c *Client) Call(ctx context.Context, method, path string, body any) (json.RawMessage, error) {
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &UnreachableError{Base: c.base, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, c.statusError(resp.StatusCode, data)
	}
	return data, nil
}

// statusError turns an error answer into a *StatusError whose message says
// what to do: set the token, or call the primary.
func (c *Client) statusError(code int, data []byte) error {
	var e ErrorBody
	msg := string(bytes.TrimSpace(data))
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	if code == http.StatusUnauthorized && c.token == "" {
		msg += " (set AX_ADMIN_TOKEN)"
	}
	if e.Primary != "" {
		msg += " (try --server " + e.Primary + ")"
	}
	return &StatusError{Code: code, Msg: msg}
}

// Get decodes the answer of GET path into out.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	data, err := c.Call(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// ErrStreamBroken says that a stream ended before its end: the connection
// broke off.
var ErrStreamBroken = errors.New("the log stream broke off")

// Stream GETs path and calls each for every line of the NDJSON answer,
// until the answer ends, each fails or ctx ends. It has no time limit: a
// follow lasts as long as what it follows.
func (c *Client) Stream(ctx context.Context, path string, each func([]byte) error) error {
	req, err := c.request(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	hc := *c.hc
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return &UnreachableError{Base: c.base, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return c.statusError(resp.StatusCode, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if err := each(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("%w: %w", ErrStreamBroken, err)
	}
	return nil
}
