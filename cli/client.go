package cli

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

// DefaultServer is the admin API that ax server listens on by default.
const DefaultServer = "http://127.0.0.1:8080"

// NewAPIClient returns a client for server, else $AX_SERVER, else the
// default, with the token of AX_TOKEN (a users file's), else AX_ADMIN_TOKEN.
func NewAPIClient(server string) (*api.Client, error) {
	base := strings.TrimRight(cmp.Or(server, os.Getenv("AX_SERVER"), DefaultServer), "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, Usage("--server %q: give the URL of ax server's API, such as %s", base, DefaultServer)
	}
	return api.NewClient(base, cmp.Or(os.Getenv("AX_TOKEN"), os.Getenv("AX_ADMIN_TOKEN")), Actor()), nil
}

// APIOptions are the flags of the commands that talk to the API.
type APIOptions struct {
	Server string // the API's URL ("": $AX_SERVER, else DefaultServer)
	JSON   bool   // print the API's JSON answer
	UTC    bool   // print times in UTC rather than in each pipeline's zone
}

// PrintJSON writes raw JSON as is (the API indents it).
func PrintJSON(w io.Writer, raw json.RawMessage) error {
	_, err := w.Write(append(bytes.TrimSpace(raw), '\n'))
	return err
}

// SplitTask splits `pipeline.task`.
func SplitTask(id string) (string, string, error) {
	p, t, ok := strings.Cut(id, ".")
	if !ok || p == "" || t == "" {
		return "", "", Usage("%q: write PIPELINE.TASK", id)
	}
	return p, t, nil
}

// addAPIFlags adds the flags of the commands that talk to the API.
func addAPIFlags(cmd *cobra.Command, f *APIOptions) {
	cmd.Flags().StringVar(&f.Server, "server", "", "URL of ax server's admin API (default $AX_SERVER, else "+DefaultServer+")")
	cmd.Flags().BoolVar(&f.JSON, "json", false, "print the API's JSON answer")
	cmd.Flags().BoolVar(&f.UTC, "utc", false, "print times in UTC rather than in each pipeline's zone")
}

// viaStore reports whether the command was told to use a store directly.
func viaStore(cmd *cobra.Command) bool {
	f := cmd.Flags().Lookup("store")
	return f != nil && f.Changed
}
