package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/ax-sched/ax/api"
	"github.com/spf13/cobra"
)

// defaultServer is the admin API that ax server listens on by default.
const defaultServer = "http://127.0.0.1:8080"

// newAPIClient returns a client for server, else $AX_SERVER, else the
// default, with the token of AX_ADMIN_TOKEN.
func newAPIClient(server string) (*api.Client, error) {
	base := strings.TrimRight(cmp.Or(server, os.Getenv("AX_SERVER"), defaultServer), "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErr("--server %q: give the URL of ax server's API, such as %s", base, defaultServer)
	}
	return api.NewClient(base, os.Getenv("AX_ADMIN_TOKEN"), actor()), nil
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
