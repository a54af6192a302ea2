package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store/storetest"
)

// TestReloadRefusedByMySQL: on MariaDB, a live reload that adds a pipeline
// whose name is longer than the store's column (128) is refused: GET
// /api/v1/reload reports it failed (not ok) with the reason, the running
// set stays, and the other pipeline keeps running. Before, the reload
// reported ok, failed every turn on the store (store_error, backoff) and
// held up every other pipeline. Validation now knows the store's limits, so
// the name is refused before any write; a set the store itself refuses is
// TestReloadRefusedByTheStoreKeepsTheRunningSet's (engine).
func TestReloadRefusedByMySQL(t *testing.T) {
	t.Parallel()
	target := "mysql://" + storetest.MySQLDSN(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), reloadA)
	addr := freeAddr(t)
	srv := startServer(t, target, dir, "--listen", addr, "--watch", "0")
	st := openStore(t, target)
	waitFor(t, func() bool { return len(instancesOf(t, st, "a.x", axtype.Success)) > 0 })
	long := strings.Repeat("p", 200)
	write(t, filepath.Join(dir, "long.yaml"), "pipeline: "+long+"\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: z, function: noop}\n")
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	var view api.ReloadView
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + addr + "/api/v1/reload")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		view = api.ReloadView{}
		return json.Unmarshal(raw, &view) == nil && view.Last != nil && (!view.Last.OK || time.Since(view.Last.At) > 3*time.Second)
	})
	if view.Last.OK || len(view.Last.Errors) != 1 || !strings.Contains(view.Last.Errors[0], "use at most 128 (the store keeps names in columns of 128)") {
		t.Errorf("reload of a name too long for the store: %+v; want not ok, with the limit named", view.Last)
	}
	if _, ok := view.Running.Tasks[long+".z"]; ok {
		t.Error("the refused pipeline is in the running set")
	}
	n := len(instancesOf(t, st, "a.x", axtype.Success))
	waitFor(t, func() bool { return len(instancesOf(t, st, "a.x", axtype.Success)) >= n+3 })
	srv.stop(t)
}
