package store_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// assertUntouched checks that a failed transition left state and history
// agreeing: the instance still SCHEDULED at version 1, one history row.
func assertUntouched(t *testing.T, s *store.Store, id int64) {
	t.Helper()
	got, err := s.Instance(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.History(context.Background(), store.LogFilter{InstanceID: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != axtype.Scheduled || got.Version != 1 || len(h) != 1 || h[0].To != axtype.Scheduled {
		t.Fatalf("state and history disagree after a failed transition: %s v%d, history %+v", got.State, got.Version, h)
	}
}

func dispatch(s *store.Store, in axtype.Instance) error {
	ticket := "t-fault"
	_, err := s.Transition(context.Background(), store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Scheduled,
		To: axtype.Running, Set: store.Changes{Ticket: &ticket}, Now: storetest.T0, Actor: "scheduler"})
	return err
}

// TestFaultBetweenUpdateAndHistory: a failure after the UPDATE and before
// the history row rolls back both, on every store.
func TestFaultBetweenUpdateAndHistory(t *testing.T) {
	t.Parallel()
	for name, open := range storetest.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			x := storetest.Seed(t, s)["a.x"]
			boom := errors.New("injected fault")
			store.SetAfterUpdateHook(s, func(context.Context, *sql.Tx) error { return boom })
			if err := dispatch(s, x); !errors.Is(err, boom) {
				t.Fatalf("err = %v, want the injected fault", err)
			}
			assertUntouched(t, s, x.ID)
			store.SetAfterUpdateHook(s, nil)
			if err := dispatch(s, x); err != nil {
				t.Fatalf("the store did not recover: %v", err)
			}
		})
	}
}

// TestMySQLConnectionKilledMidTransition kills the transition's own
// connection from a second connection between its UPDATE and its history
// INSERT: the call fails with ErrUnavailable and nothing is half-written.
func TestMySQLConnectionKilledMidTransition(t *testing.T) {
	t.Parallel()
	dsn := storetest.MySQLDSN(t)
	s, err := store.Open(context.Background(), "mysql://"+dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	killer, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close()
	x := storetest.Seed(t, s)["a.x"]
	var killed int64
	store.SetAfterUpdateHook(s, func(ctx context.Context, tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&killed); err != nil {
			return err
		}
		_, err := killer.ExecContext(ctx, "KILL ?", killed)
		return err
	})
	err = dispatch(s, x)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if killed == 0 {
		t.Fatal("the hook did not run")
	}
	store.SetAfterUpdateHook(s, nil)
	assertUntouched(t, s, x.ID)
	if err := dispatch(s, x); err != nil {
		t.Fatalf("the store did not recover on a new connection: %v", err)
	}
}

func TestOpenRefusesWhatIsNotAnAxStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()

	garbage := filepath.Join(dir, "garbage.db")
	junk := []byte(strings.Repeat("this is not a database\n", 300))
	if err := os.WriteFile(garbage, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := store.Open(ctx, garbage, store.Options{})
	if !errors.Is(err, store.ErrSchema) || !strings.Contains(err.Error(), "not an ax store (or is corrupted)") || !strings.Contains(err.Error(), garbage) {
		t.Errorf("garbage file: %v", err)
	}
	if after, _ := os.ReadFile(garbage); string(after) != string(junk) {
		t.Error("the garbage file was modified")
	}

	foreign := filepath.Join(dir, "foreign.db")
	db, err := sql.Open("sqlite", foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	orig, err := os.ReadFile(foreign)
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.Open(ctx, foreign, store.Options{})
	if !errors.Is(err, store.ErrSchema) || !strings.Contains(err.Error(), "belongs to another application (tables: users)") {
		t.Errorf("foreign file: %v", err)
	}
	// Refused before anything was written to it: not even switched to WAL.
	if after, _ := os.ReadFile(foreign); string(after) != string(orig) {
		t.Errorf("the foreign file was modified (journal mode byte %d, was %d)", after[18], orig[18])
	}
	if _, err := os.Stat(foreign + "-wal"); err == nil {
		t.Error("the foreign file got a -wal file")
	}
	db, _ = sql.Open("sqlite", foreign)
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").Scan(&n); err != nil || n != 1 {
		t.Errorf("the foreign file got tables: %d, %v", n, err)
	}
	db.Close()

	if _, err := store.Open(ctx, dir, store.Options{}); !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	for name, open := range storetest.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			if _, err := s.DB().Exec("INSERT INTO ax_schema (version, applied_at) VALUES (99, 0)"); err != nil {
				t.Fatal(err)
			}
			target := storetest.Target(t, s)
			if name == "sqlite" {
				s.Close()
			}
			_, err := store.Open(context.Background(), target, store.Options{})
			if !errors.Is(err, store.ErrSchema) || !strings.Contains(err.Error(), "schema version 99, newer than this ax knows ("+strconv.Itoa(store.SchemaVersion)+"): upgrade ax") {
				t.Errorf("err = %v", err)
			}
		})
	}
}

func TestOpenMySQLErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct{ target, want string }{
		{"mysql://root@tcp(127.0.0.1:1)/test", "store: database unavailable"},
		{"mysql://root@tcp(127.0.0.1:3306)/", "names no database"},
		{"mysql://root@tcp(127.0.0.1:3306", "write mysql://user:password@tcp(host:3306)/database"},
	} {
		_, err := store.Open(ctx, tc.target, store.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want %q", tc.target, err, tc.want)
		}
	}
	_, err := store.Open(ctx, "mysql://root:secret@tcp(127.0.0.1:1)/test", store.Options{})
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("the password leaks into the error: %v", err)
	}
}

// TestReopenIsIdempotent: migrations applied at every start leave data and
// the recorded version as they were.
func TestReopenIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ax.db")
	s, err := store.Open(ctx, "sqlite:"+path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := storetest.Seed(t, s)["a.x"]
	s.Close()
	for range 2 {
		s, err = store.Open(ctx, path, store.Options{})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		v, err := s.SchemaVersion(ctx)
		got, gerr := s.Instance(ctx, x.ID)
		if err != nil || v != store.SchemaVersion || gerr != nil || got.State != axtype.Scheduled {
			t.Fatalf("after reopen: version %d (%v), instance %+v (%v)", v, err, got, gerr)
		}
		s.Close()
	}
}

// TestUpgradeFromVersion1: a database at schema version 1 (before the ops
// table) is migrated to the current version at open, keeping its data.
func TestUpgradeFromVersion1(t *testing.T) {
	t.Parallel()
	for name, open := range storetest.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			x := storetest.Seed(t, s)["a.x"]
			for _, q := range []string{"DROP TABLE ops", "DELETE FROM ax_schema WHERE version > 1"} {
				if _, err := s.DB().Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			target := storetest.Target(t, s)
			if name == "sqlite" {
				s.Close()
			}
			s2, err := store.Open(context.Background(), target, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if v, err := s2.SchemaVersion(context.Background()); err != nil || v != store.SchemaVersion {
				t.Errorf("version after upgrade = %d, %v", v, err)
			}
			if _, err := s2.EnqueueOp(context.Background(), store.Op{Kind: "pause", Target: "a.x"}, storetest.T0); err != nil {
				t.Errorf("ops table missing after upgrade: %v", err)
			}
			if in, err := s2.Instance(context.Background(), x.ID); err != nil || in.State != axtype.Scheduled {
				t.Errorf("data lost in the upgrade: %+v, %v", in, err)
			}
		})
	}
}

// TestUpgradeKeepsProcs: a store written at version 9 (procs without a
// kind or epoch, no hand-outs) is upgraded at open; its rows read back as
// process groups, which is what version 9 recorded, and the new kinds can
// be written.
func TestUpgradeKeepsProcs(t *testing.T) {
	t.Parallel()
	for name, open := range storetest.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			x := storetest.Seed(t, s)["a.x"]
			for _, q := range []string{
				"ALTER TABLE procs DROP COLUMN kind", "ALTER TABLE procs DROP COLUMN epoch", "DROP TABLE handouts", "DELETE FROM ax_schema WHERE version >= 11",
				"INSERT INTO procs (ticket, instance_id, run_id, host, boot, pid_ns, pgid, start_ticks, at) VALUES ('t-v9', " +
					strconv.FormatInt(x.ID, 10) + ", " + strconv.FormatInt(x.RunID, 10) + ", 'h', 'b', 'ns', 42, 7, 1000)",
			} {
				if _, err := s.DB().Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			target := storetest.Target(t, s)
			if name == "sqlite" {
				s.Close()
			}
			s2, err := store.Open(context.Background(), target, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if v, err := s2.SchemaVersion(context.Background()); err != nil || v != store.SchemaVersion {
				t.Errorf("version after upgrade = %d, %v", v, err)
			}
			got, err := s2.Procs(context.Background(), []string{"t-v9"})
			if err != nil || got["t-v9"].Kind != store.ProcGroup || got["t-v9"].Pgid != 42 {
				t.Fatalf("version 9 row after the upgrade: %+v, %v; want a process group 42", got, err)
			}
			held := store.ProcRecord{Ticket: "t-held", InstanceID: x.ID, RunID: x.RunID, Host: "h", Pgid: 1, At: storetest.T0, Kind: store.ProcHeld, Epoch: 3}
			if err := s2.WriteLogs(context.Background(), store.LogWrite{Procs: []store.ProcRecord{held}}); err != nil {
				t.Fatal(err)
			}
			if got, err := s2.Procs(context.Background(), []string{"t-held"}); err != nil || got["t-held"] != held {
				t.Errorf("a held row after the upgrade: %+v, %v; want %+v", got, err, held)
			}
			if got, err := s2.HandOuts(context.Background()); err != nil || len(got) != 0 {
				t.Errorf("hand-outs after the upgrade: %v, %v; want none", got, err)
			}
		})
	}
}

// TestUpgradeCountsOutcomes: a store written before version 8 gets its
// tasks' outcome counts from its instances at the upgrade.
func TestUpgradeCountsOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ax.db")
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := storetest.Seed(t, s)["a.x"]
	// As a version 7 store: outcomes written without counts, no table (nor
	// the later ones).
	for _, q := range []string{
		"UPDATE instances SET state = 'SUCCESS' WHERE id = " + strconv.FormatInt(x.ID, 10),
		"UPDATE instances SET state = 'FAILED' WHERE task_id = 'a.y'",
		"DROP TABLE task_outcomes", "DROP TABLE procs", "DELETE FROM ax_schema WHERE version >= 8",
	} {
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s, err = store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for task, want := range map[string][2]int64{"a.x": {1, 0}, "a.y": {0, 1}, "a.z": {0, 0}} {
		succ, fail, err := s.Outcomes(ctx, task)
		if err != nil || [2]int64{succ, fail} != want {
			t.Errorf("%s after the upgrade: %d/%d (%v), want %v", task, succ, fail, err, want)
		}
	}
}

// TestOpenExistingCreatesNothing: a command that reads or queues work on a
// scheduler's store (ax status --store, ax history --store, ax pause
// --store …) opens it with Existing. A mistyped path made a new, empty ax
// store there and reported "never started"; now it is refused, and no file
// is created or written.
func TestOpenExistingCreatesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()

	missing := filepath.Join(dir, "typo.db")
	_, err := store.Open(ctx, missing, store.Options{Existing: true})
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v, want ErrNotFound naming the path", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("opening a missing store created %d file(s): %v", len(entries), entries)
	}

	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = store.Open(ctx, empty, store.Options{Existing: true})
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty file: %v, want ErrNotFound saying it is empty", err)
	}
	if info, err := os.Stat(empty); err != nil || info.Size() != 0 {
		t.Errorf("the empty file was written: %v %v", info, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("opening an empty store left %d file(s), want only it: %v", len(entries), entries)
	}

	made := filepath.Join(dir, "made.db")
	s, err := store.Open(ctx, made, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = store.Open(ctx, made, store.Options{Existing: true})
	if err != nil {
		t.Fatalf("an existing store with Existing: %v", err)
	}
	s.Close()
}
