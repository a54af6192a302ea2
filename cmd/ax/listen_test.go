package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/cli"
)

// TestServerBusyPort: a port someone else holds stops ax server before it
// opens its store or starts a scheduler, with a message that says what to do.
func TestServerBusyPort(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	db := filepath.Join(t.TempDir(), "ax.db")
	code, _, stderr := runAx(t, "server", "--store", db, "--pipelines", "../../examples", "--listen", ln.Addr().String())
	if code != cli.ExitFailed {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, cli.ExitFailed, stderr)
	}
	for _, want := range []string{ln.Addr().String(), "address already in use", "--listen", "PORT="} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("store %s was created (err %v): a server that cannot listen must not have started", db, err)
	}
}

func TestCheckListen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr, token string
		insecure    bool
		want        string // "" for allowed
	}{
		{"127.0.0.1:8080", "", false, ""},
		{"localhost:8080", "", false, ""},
		{"[::1]:8080", "", false, ""},
		{"0.0.0.0:8080", "", false, "not a loopback address: set AX_ADMIN_TOKEN"},
		{":8080", "", false, "not a loopback address"},
		{"0.0.0.0:8080", "t", false, ""},
		{"0.0.0.0:8080", "", true, ""},
		{"8080", "", false, "give host:port"},
	} {
		err := checkListen(tc.addr, tc.token, tc.insecure)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("checkListen(%q, token %q, insecure %v) = %v, want %q", tc.addr, tc.token, tc.insecure, err, tc.want)
		}
	}
}
