package store_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// tablesOf lists the tables of the PostgreSQL database of dsn.
func tablesOf(t *testing.T, dsn string) []string {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// TestPostgresBadDSN: a DSN that names no database, a user the server
// refuses, a database that does not exist, or a database of another
// program fails at open with a message that says what to do, and nothing
// is created.
func TestPostgresBadDSN(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(u *url.URL)) string {
		c := *u
		f(&c)
		return c.String()
	}
	foreign := storetest.PostgresDSN(t)
	db, err := sql.Open("pgx", foreign)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE orders (id BIGINT PRIMARY KEY); CREATE TABLE customers (id BIGINT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dsn, want string
		is              error
		check           string // the DSN whose tables must stay as they were
	}{
		{"no database", with(func(u *url.URL) { u.Path = "" }),
			"names no database: write postgres://user:password@host:5432/database (create it first: createdb NAME)", nil, ""},
		{"only a slash", strings.Replace(with(func(u *url.URL) { u.Path = "/" }), "postgres://", "postgresql://", 1),
			"names no database", nil, ""},
		{"refused user", with(func(u *url.URL) { u.User = url.UserPassword("ax_no_such_user", "wrong") }),
			"check the user and password of the DSN (and pg_hba.conf)", nil, dsn},
		{"no such database", with(func(u *url.URL) { u.Path = "/ax_no_such_database" }),
			"create the database first (createdb NAME), or name one that exists", nil, ""},
		{"another program's database", foreign,
			"the database belongs to another program (tables: customers, orders): give ax a database of its own", store.ErrSchema, foreign},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before []string
			if tc.check != "" {
				before = tablesOf(t, tc.check)
			}
			s, err := store.Open(context.Background(), tc.dsn, store.Options{})
			if err == nil {
				s.Close()
				t.Fatalf("opened %s; want it refused", tc.dsn)
			}
			t.Logf("refused: %v", err)
			if !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("err = %v\nwant it to say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "wrong") {
				t.Errorf("err = %v: it shows the password", err)
			}
			if tc.check != "" {
				if after := tablesOf(t, tc.check); !slices.Equal(before, after) {
					t.Errorf("tables %v became %v: the refused open wrote", before, after)
				}
			}
		})
	}
	if got := tablesOf(t, dsn); len(got) != 0 {
		t.Errorf("the test's own database has tables %v: a refused open wrote", got)
	}
}
