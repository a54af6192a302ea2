// Package storetest opens stores for tests — a SQLite file always, a MySQL
// database when AX_TEST_MYSQL_DSN is set, a PostgreSQL one when
// AX_TEST_PG_DSN is — and holds the conformance suite that every store
// must pass. Each server store is a database of its own, dropped when the
// test ends, so tests never see each other's rows.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/ax-sched/ax/store"
)

// DSNEnv names the environment variable with the MySQL test DSN, such as
// root@tcp(127.0.0.1:3306)/test.
const DSNEnv = "AX_TEST_MYSQL_DSN"

// SQLite opens a store on a new file in the test's temporary directory.
func SQLite(t testing.TB) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "ax.db"), store.Options{})
	if err != nil {
		t.Fatalf("open sqlite store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// MySQLDSN returns a DSN for a new, empty database of the test's own on the
// server of AX_TEST_MYSQL_DSN, dropped when the test ends. Without the
// variable it skips the test, except under CI, where a missing database is
// a failure.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(DSNEnv)
	if base == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set under CI: the MySQL tests must run (see .ci/run)", DSNEnv)
		}
		t.Skipf("MySQL tests skipped: set %s (for example root@tcp(127.0.0.1:3306)/test) to run them", DSNEnv)
	}
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("%s: %v", DSNEnv, err)
	}
	name := scratchDatabase(t, "mysql", base, cfg.Addr, "MariaDB", "")
	cfg.DBName = name
	return cfg.FormatDSN()
}

// scratchDatabase creates a database of a random name on the server of
// base (at host, a server of kind), dropped (with dropSuffix) when the test
// ends, and returns its name.
func scratchDatabase(t testing.TB, driver, base, host, kind, dropSuffix string) string {
	t.Helper()
	admin, err := sql.Open(driver, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	buf := make([]byte, 6)
	_, _ = rand.Read(buf)
	name := "ax_test_" + hex.EncodeToString(buf)
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create test database on %s: %v (is %s running? .ci/run starts it)", host, err, kind)
	}
	t.Cleanup(func() {
		db, err := sql.Open(driver, base)
		if err == nil {
			db.Exec("DROP DATABASE IF EXISTS " + name + dropSuffix) //nolint:errcheck // best effort
			db.Close()
		}
	})
	return name
}

// ddlMu serializes the creation and migration of test databases: MariaDB
// takes many seconds for a dozen concurrent CREATE DATABASE + CREATE TABLE
// runs, and a fraction of a second for the same run one after the other.
var ddlMu sync.Mutex

// MySQL opens a store on a new database of the test's own; see MySQLDSN.
func MySQL(t testing.TB) *store.Store {
	t.Helper()
	ddlMu.Lock()
	defer ddlMu.Unlock()
	dsn := MySQLDSN(t)
	s, err := store.Open(context.Background(), "mysql://"+dsn, store.Options{})
	if err != nil {
		t.Fatalf("open mysql store: %v", err)
	}
	dsns.Store(s, dsn)
	t.Cleanup(func() { s.Close() })
	return s
}

// Opener opens a fresh store for one test.
type Opener func(t testing.TB) *store.Store

// All returns an opener per store kind: "sqlite" always, "mysql" and
// "postgres" always too (their tests skip, or fail under CI, without a DSN).
func All() map[string]Opener {
	return map[string]Opener{"sqlite": SQLite, "mysql": MySQL, "postgres": Postgres}
}

// Servers returns the openers of the database servers, "mysql" and
// "postgres": for tests of what only a server does (connections ended,
// row locks, pools of their own).
func Servers() map[string]Opener {
	return map[string]Opener{"mysql": MySQL, "postgres": Postgres}
}

// dsns remembers the DSN of each MySQL test store, and the target of each
// PostgreSQL one, for tests that reopen it.
var dsns sync.Map // *store.Store → string

// DSNOf returns the DSN a MySQL test store was opened with.
func DSNOf(t testing.TB, s *store.Store) string {
	t.Helper()
	v, ok := dsns.Load(s)
	if !ok || s.Dialect() != "mysql" {
		t.Fatal("storetest: not a MySQL test store")
	}
	return v.(string)
}

// Target returns what store.Open takes to open test store s again: its
// file, or its database's DSN with the scheme.
func Target(t testing.TB, s *store.Store) string {
	t.Helper()
	switch s.Dialect() {
	case "mysql":
		return "mysql://" + DSNOf(t, s)
	case "postgres":
		v, ok := dsns.Load(s)
		if !ok {
			t.Fatal("storetest: not a PostgreSQL test store")
		}
		return v.(string)
	}
	return s.String()
}

// PGDSNEnv names the environment variable with the PostgreSQL test DSN,
// such as postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
const PGDSNEnv = "AX_TEST_PG_DSN"

// PostgresDSN returns the DSN (postgres://…) of a new, empty database of
// the test's own on the server of AX_TEST_PG_DSN, dropped when the test
// ends. Without the variable it skips the test, except under CI, where a
// missing database is a failure.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(PGDSNEnv)
	if base == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set under CI: the PostgreSQL tests must run (see .ci/run)", PGDSNEnv)
		}
		t.Skipf("PostgreSQL tests skipped: set %s (for example postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run them", PGDSNEnv)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", PGDSNEnv, err)
	}
	name := scratchDatabase(t, "pgx", base, u.Host, "PostgreSQL", " WITH (FORCE)")
	u.Path = "/" + name
	return u.String()
}

// Postgres opens a store on a new database of the test's own; see
// PostgresDSN.
func Postgres(t testing.TB) *store.Store {
	t.Helper()
	dsn := PostgresDSN(t)
	s, err := store.Open(context.Background(), dsn, store.Options{})
	if err != nil {
		t.Fatalf("open postgres store: %v", err)
	}
	dsns.Store(s, dsn)
	t.Cleanup(func() { s.Close() })
	return s
}
