package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if code != exitFailed {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitFailed, stderr)
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
