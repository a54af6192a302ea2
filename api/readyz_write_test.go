package api

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/store"
)

// TestReadyzFailsWhileTheStoreCannotWrite: a store that answers reads but
// refuses every write (a full disk: injected as the failure of every
// write transaction) makes /readyz answer 503 saying why, until writes
// succeed again. Before, the server turned standby (its renewals failed)
// and /readyz answered 200, as a standby whose store answers reads.
func TestReadyzFailsWhileTheStoreCannotWrite(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{})
	if code, body := e.Call("GET", "/readyz", ""); code != 200 {
		t.Fatalf("readyz before: %d %s", code, body)
	}
	var full atomic.Bool
	full.Store(true)
	store.SetFault(e.St, func(string) error {
		if full.Load() {
			return errors.New("database or disk is full (13)")
		}
		return nil
	})
	waitFor(t, func() bool { code, _ := e.Call("GET", "/readyz", ""); return code != 200 })
	code, body := e.Call("GET", "/readyz", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"ready": false`) ||
		!strings.Contains(body, "cannot write to the store since") || !strings.Contains(body, "disk is full") {
		t.Errorf("readyz while the store cannot write: %d %s; want 503 saying why", code, body)
	}
	full.Store(false)
	waitFor(t, func() bool { code, _ := e.Call("GET", "/readyz", ""); return code == 200 })
	if code, body := e.Call("GET", "/readyz", ""); code != 200 || !strings.Contains(body, `"role": "primary"`) {
		t.Errorf("readyz once writes succeed: %d %s", code, body)
	}
}
