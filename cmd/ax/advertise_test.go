package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/cli"
)

// TestServerAdvertiseURL: a --listen on every address needs --advertise-url
// (executors would be given an address they cannot call back), and a bad
// one is refused, as are out-of-range --breaker-*, --command-nice and --max-running flags; nothing is started
// and no store is created.
func TestServerAdvertiseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unspecified host", []string{"--listen", "0.0.0.0:18151", "--insecure"}, "--listen 0.0.0.0:18151 listens on every address, so executors cannot be told where to call back: give --advertise-url, such as --advertise-url http://10.0.0.5:18151"},
		{"no host", []string{"--listen", ":18152", "--insecure"}, "give --advertise-url"},
		{"not http", []string{"--listen", "127.0.0.1:18153", "--advertise-url", "ftp://10.0.0.5:8080"}, `--advertise-url "ftp://10.0.0.5:8080": give the base URL executors reach this server at`},
		{"with a path", []string{"--listen", "127.0.0.1:18154", "--advertise-url", "http://10.0.0.5:8080/api/v1/results"}, "give the base URL"},
		{"breaker window", []string{"--listen", "", "--breaker-window", "5s"}, "--breaker-window 5s: use at least 10s"},
		{"breaker outcomes", []string{"--listen", "", "--breaker-min-outcomes", "0"}, "--breaker-min-outcomes 0: use 1 to 10000"},
		{"breaker ratio", []string{"--listen", "", "--breaker-ratio", "1"}, "--breaker-ratio 1: use a failure ratio above 0 and below 1"},
		{"command nice below", []string{"--listen", "", "--command-nice", "-1"}, "--command-nice -1: give 0 (the server's own) to 19"},
		{"command nice above", []string{"--listen", "", "--command-nice", "20"}, "--command-nice 20: give 0 (the server's own) to 19"},
		{"max running below", []string{"--listen", "", "--max-running", "-2"}, "--max-running -2: give 0 (unlimited) to 1000000"},
		{"max running above", []string{"--listen", "", "--max-running", "2000000"}, "--max-running 2000000: give 0 (unlimited) to 1000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "ax.db")
			code, _, stderr := runAx(t, append([]string{"server", "--store", db, "--pipelines", "../../examples"}, tc.args...)...)
			if code != cli.ExitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant %d and %q", code, stderr, cli.ExitUsage, tc.want)
			}
			if _, err := os.Stat(db); !os.IsNotExist(err) {
				t.Errorf("store %s was created (err %v)", db, err)
			}
		})
	}
}
