package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/store/storetest"
)

// roleSays reads what a server says of its role at addr: /api/v1/status's
// role, /readyz's role and the ax_leader metric ("primary", "standby", or
// "" when it did not answer).
func roleSays(addr string) (status, ready, metric string) {
	c := &http.Client{Timeout: 500 * time.Millisecond}
	get := func(path string) []byte {
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	var m struct {
		Role string `json:"role"`
	}
	if json.Unmarshal(get("/api/v1/status"), &m) == nil {
		status = m.Role
	}
	m.Role = ""
	if json.Unmarshal(get("/readyz"), &m) == nil {
		ready = m.Role
	}
	for _, l := range strings.Split(string(get("/metrics")), "\n") {
		switch l {
		case "ax_leader 1":
			metric = "primary"
		case "ax_leader 0":
			metric = "standby"
		}
	}
	return status, ready, metric
}

// waitPrimary waits until the server at addr says in /readyz that it is the
// primary. Holding the lease in the store is not enough: until it has loaded
// its term, a new primary answers writes as a standby (503, "retry shortly").
func waitPrimary(t testing.TB, addr string) {
	t.Helper()
	waitFor(t, func() bool { _, ready, _ := roleSays(addr); return ready == "primary" })
}

// TestHAStalledPrimaryReportsStandbyOnWaking: a primary SIGSTOPped past its
// lease while the other server takes over says standby — in /api/v1/status,
// /readyz and ax_leader — within one renewal period (TTL/3 = 1 s) of
// waking, and never primary again meanwhile. On MariaDB and on one SQLite
// file shared by two servers.
func TestHAStalledPrimaryReportsStandbyOnWaking(t *testing.T) {
	t.Parallel()
	const renewal = ttl / 3
	for _, tc := range []struct{ name, target string }{{"mariadb", ""}, {"sqlite", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target := "mysql://" + "x"
			if tc.name == "mariadb" {
				target = "mysql://" + storetest.MySQLDSN(t)
			} else {
				target = t.TempDir() + "/ax.db"
			}
			dir, _ := e2ePipeline(t)
			st := openStore(t, target)
			addrs := map[string]string{"a": freeAddr(t), "b": freeAddr(t)}
			servers := map[string]*server{"a": startServer(t, target, dir, "--holder", "a", "--listen", addrs["a"])}
			waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder == "a" })
			servers["b"] = startServer(t, target, dir, "--holder", "b", "--listen", addrs["b"])
			waitRuns(t, st, 2)
			old := lease(t, st)
			stalled := servers[old.Holder]
			if s, r, m := roleSays(addrs[old.Holder]); s != "primary" || r != "primary" || m != "primary" {
				t.Fatalf("before the stall, the primary says %q %q %q", s, r, m)
			}
			if err := stalled.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			now, took := takeover(t, st, old, time.Now())
			t.Logf("%s took over from the stalled %s in %s", now.Holder, old.Holder, took)
			if err := stalled.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			woke := time.Now()
			var s, r, m string
			for {
				s, r, m = roleSays(addrs[old.Holder])
				if s == "primary" || r == "primary" || m == "primary" {
					t.Errorf("%s after waking, the stalled server says primary (status %q, readyz %q, ax_leader %q) while %s holds the lease",
						time.Since(woke).Round(time.Millisecond), s, r, m, now.Holder)
				}
				if s == "standby" && r == "standby" && m == "standby" {
					break
				}
				if time.Since(woke) > 10*time.Second {
					t.Fatalf("10 s after waking: status %q, readyz %q, ax_leader %q", s, r, m)
				}
				time.Sleep(20 * time.Millisecond)
			}
			after := time.Since(woke)
			t.Logf("standby everywhere %s after waking", after.Round(time.Millisecond))
			if after > renewal {
				t.Errorf("standby %s after waking, more than one renewal period (%s)", after.Round(time.Millisecond), renewal)
			}
			if s, r, m := roleSays(addrs[now.Holder]); s != "primary" || r != "primary" || m != "primary" {
				t.Errorf("the new primary says %q %q %q", s, r, m)
			}
			for _, sv := range servers {
				sv.stop(t)
			}
		})
	}
}
