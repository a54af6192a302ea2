package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// defaultServer is the admin API that ax server listens on by default.
const defaultServer = "http://127.0.0.1:8080"

// apiClient calls a running ax server's admin API (the CLI's default way to
// reach the scheduler; --store reads and queues through a store instead).
type apiClient struct {
	base  string
	token string // AX_ADMIN_TOKEN
	hc    *http.Client
}

// newAPIClient returns a client for server, else $AX_SERVER, else the default.
func newAPIClient(server string) (*apiClient, error) {
	base := strings.TrimRight(cmp.Or(server, os.Getenv("AX_SERVER"), defaultServer), "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErr("--server %q: give the URL of ax server's API, such as %s", base, defaultServer)
	}
	return &apiClient{base: base, token: os.Getenv("AX_ADMIN_TOKEN"), hc: &http.Client{Timeout: 60 * time.Second}}, nil
}

// call sends body (nil for none) as JSON and returns the answer's JSON. An
// error answer becomes an error carrying the server's message.
func (c *apiClient) call(ctx context.Context, method, path string, body any) (json.RawMessage, error) {
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
	req.Header.Set("X-Ax-Actor", actor())
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &exitError{code: exitFailed, err: fmt.Errorf("cannot reach ax server at %s: %v (start one with make run; point elsewhere with --server or AX_SERVER; or read a store directly with --store)", c.base, err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, &exitError{code: exitFailed, err: fmt.Errorf("read the answer of %s %s: %w", method, path, err)}
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error   string `json:"error"`
			Primary string `json:"primary"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if resp.StatusCode == http.StatusUnauthorized && c.token == "" {
			msg += " (set AX_ADMIN_TOKEN)"
		}
		if e.Primary != "" {
			msg += " (try --server " + e.Primary + ")"
		}
		return nil, &exitError{code: exitFailed, err: &apiStatusError{code: resp.StatusCode, msg: msg}}
	}
	return data, nil
}

// apiStatusError is an error answer of the API: its status and message.
type apiStatusError struct {
	code int
	msg  string
}

func (e *apiStatusError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.msg, e.code) }

// isNotFound says whether err is the API's 404.
func isNotFound(err error) bool {
	var se *apiStatusError
	return errors.As(err, &se) && se.code == http.StatusNotFound
}

// get decodes the answer of GET path into out.
func (c *apiClient) get(ctx context.Context, path string, out any) error {
	data, err := c.call(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// apiFlags are the flags of the commands that talk to the API.
type apiFlags struct {
	server string
	json   bool
	utc    bool
}

func (f *apiFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.server, "server", "", "URL of ax server's admin API (default $AX_SERVER, else "+defaultServer+")")
	cmd.Flags().BoolVar(&f.json, "json", false, "print the API's JSON answer")
	cmd.Flags().BoolVar(&f.utc, "utc", false, "print times in UTC rather than in each pipeline's zone")
}

// viaStore reports whether the command was told to use a store directly.
func viaStore(cmd *cobra.Command) bool {
	f := cmd.Flags().Lookup("store")
	return f != nil && f.Changed
}

// printJSON writes raw JSON as is (the API indents it).
func printJSON(w io.Writer, raw json.RawMessage) error {
	_, err := w.Write(append(bytes.TrimSpace(raw), '\n'))
	return err
}

// splitTask splits `pipeline.task`.
func splitTask(id string) (string, string, error) {
	p, t, ok := strings.Cut(id, ".")
	if !ok || p == "" || t == "" {
		return "", "", usageErr("%q: write PIPELINE.TASK", id)
	}
	return p, t, nil
}
