package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/store"
)

// storeSnapshot is every table of the SQLite store at path: its row count
// and a digest of its rows (so every version column too), read on a
// read-only connection. The lease rows are taken without their expiry and
// renewal times, which the holder's renewals move.
// commandGroupsRecorded counts the process groups of commands recorded in
// the SQLite store at path (procs rows of a group, not a server's claim).
func commandGroupsRecorded(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM procs WHERE pgid > 0").Scan(&n); err != nil {
		return 0 // not created yet
	}
	return n
}

func storeSnapshot(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	out := map[string]string{}
	for _, table := range tables {
		q := "SELECT * FROM " + table + " ORDER BY rowid"
		if table == "leases" {
			q = "SELECT name, holder, epoch FROM leases ORDER BY name"
		}
		rs, err := db.QueryContext(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		cols, _ := rs.Columns()
		h, n := sha256.New(), 0
		for rs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(h, "%v\n", vals)
			n++
		}
		rs.Close()
		out[table] = fmt.Sprintf("%d rows, %x", n, h.Sum(nil)[:8])
	}
	return out
}

// Every command that runs its own engine refuses while a server holds the
// lease on its store, and writes nothing: ax backfill --standalone, ax run
// FILE --store, ax backfill resume --standalone. Before, the backfill (or
// the resume request) was stored first and the engine refused after, so the
// server ran what the user was told was refused.
func TestStandaloneRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	dir, _ := backfillPipeline(t, "2026-03-02")
	db := filepath.Join(t.TempDir(), "ax.db")
	code, out, errOut := runAx(t, "backfill", "daily", "--from", "2026-03-01", "--to", "2026-03-03", "--pipelines", dir, "--store", db,
		"--standalone", "--stop-on-failure")
	if code != cli.ExitFailed || !strings.Contains(errOut, "backfill 1 failed") {
		t.Fatalf("setup: exit %d\n%s\n%s", code, out, errOut)
	}
	srv := startServer(t, db, dir)
	st := openStore(t, db)
	waitFor(t, func() bool {
		l, err := st.GetLease(context.Background(), "")
		return err == nil && !strings.HasPrefix(l.Holder, "backfill:") && l.ExpiresAt.After(time.Now())
	})
	waitFor(t, func() bool { ts, _ := st.Tasks(context.Background(), store.TaskFilter{}); return len(ts) == 3 })
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"backfill --standalone", []string{"backfill", "daily", "--from", "2026-02-01", "--to", "2026-02-02", "--pipelines", dir, "--store", db, "--standalone"},
			"drop --standalone to queue the backfill for it (nothing was written)"},
		{"run FILE --store", []string{"run", filepath.Join(dir, "daily.yaml"), "--store", db},
			"ax run needs a store no scheduler runs on"},
		{"backfill resume --standalone", []string{"backfill", "resume", "1", "--pipelines", dir, "--store", db, "--standalone"},
			"drop --standalone to have it resume the backfill (nothing was written)"},
	} {
		before := storeSnapshot(t, db)
		code, out, errOut := runAx(t, tc.args...)
		if code != cli.ExitFailed || !strings.Contains(errOut, store.ErrLeaseHeld.Error()) || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, want %d with %q\n%s%s", tc.name, code, cli.ExitFailed, tc.want, out, errOut)
		}
		after := storeSnapshot(t, db)
		for table, b := range before {
			if after[table] != b {
				t.Errorf("%s changed table %s: %s, was %s", tc.name, table, after[table], b)
			}
		}
	}
	srv.stop(t)
}

// A second ax run on a store another ax run is running on refuses, and
// writes nothing. Before, both took the lease under the one holder name
// "run", and each engine would dispatch the other's runs.
func TestSecondRunOnOneStoreRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	write(t, filepath.Join(dir, "hold.yaml"), "pipeline: hold\ntimezone: UTC\ntasks:\n  - name: w\n    timeout: 1m\n    command: [\"sh\", \"-c\", \"while [ ! -f "+release+" ]; do sleep 0.05; done\"]\n")
	db := filepath.Join(dir, "ax.db")
	first := exec.Command(axBinary, "run", filepath.Join(dir, "hold.yaml"), "--store", db)
	logf, err := os.Create(filepath.Join(dir, "first.log"))
	if err != nil {
		t.Fatal(err)
	}
	first.Stdout, first.Stderr = logf, logf
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Process.Kill(); _ = first.Wait() })
	printed := func() string { b, _ := os.ReadFile(logf.Name()); return string(b) }
	waitFor(t, func() bool { return strings.Contains(printed(), "start  hold.w") })
	// The first run records its command's process group once the command
	// has started, just after it prints the start: wait for that write, so
	// that what the snapshots compare is what the second run did.
	waitFor(t, func() bool { return commandGroupsRecorded(t, db) == 1 })
	before := storeSnapshot(t, db)
	code, sout, serr := runAx(t, "run", filepath.Join(dir, "hold.yaml"), "--store", db)
	if code != cli.ExitFailed || !strings.Contains(serr, "lease held") {
		t.Errorf("second ax run: exit %d, want %d and the lease held\n%s%s", code, cli.ExitFailed, sout, serr)
	}
	after := storeSnapshot(t, db)
	for table, b := range before {
		if after[table] != b {
			t.Errorf("the second ax run changed table %s: %s, was %s", table, after[table], b)
		}
	}
	write(t, release, "")
	if err := first.Wait(); err != nil {
		t.Errorf("the first ax run: %v\n%s", err, printed())
	}
}
