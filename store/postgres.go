package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// postgresDSNHint is how a PostgreSQL DSN is written, for messages.
const postgresDSNHint = "write postgres://user:password@host:5432/database"

// openPostgres opens the store on the PostgreSQL database of dsn, a URL
// postgres://user:password@host:port/database?param=value (postgresql://
// too). It opens the same pools as MySQL: writes, reads, the lease's
// renewals, and its takeovers, whose sessions wait at most acquireLockWait
// for a row lock (lock_timeout).
func openPostgres(ctx context.Context, dsn string, opts Options) (*Store, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: postgres DSN: %w; %s", err, postgresDSNHint)
	}
	target := redactURL(u)
	if strings.Trim(u.Path, "/") == "" && u.Query().Get("dbname") == "" {
		// pgx would fall back to a database named after the user (or
		// PGDATABASE): never guess where ax's tables go.
		return nil, fmt.Errorf("store: postgres DSN %s names no database: %s (create it first: createdb NAME)", target, postgresDSNHint)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: postgres DSN %s: %w; %s", target, err, postgresDSNHint)
	}
	// One round trip per statement, no server-side prepare: parameter
	// types follow the Go values (int64 is bigint, string is text).
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	pool := func(c *pgx.ConnConfig, n int) *sql.DB {
		db := stdlib.OpenDB(*c)
		db.SetMaxOpenConns(n)
		db.SetMaxIdleConns(n)
		db.SetConnMaxLifetime(time.Hour)
		return db
	}
	db := pool(cfg, opts.MaxConns)
	rdb := pool(cfg, readConns)
	s := &Store{d: dialectPostgres, db: db, read: rdb, sb: sq.StatementBuilder.PlaceholderFormat(sq.Dollar), target: target}
	if err := db.PingContext(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: open %s: %w", s.target, s.d.translate(err))
	}
	s.leases = &Store{d: s.d, db: pool(cfg, 2), sb: s.sb, target: s.target}
	s.leases.read = s.leases.db
	acfg := cfg.Copy()
	acfg.RuntimeParams["lock_timeout"] = strconv.Itoa(acquireLockWait*1000) + "ms"
	s.acquire = &Store{d: s.d, db: pool(acfg, 2), sb: s.sb, target: s.target}
	s.acquire.read = s.acquire.db
	return s, nil
}

// redactURL renders a PostgreSQL DSN without its password and parameters.
func redactURL(u *url.URL) string {
	c := *u
	if _, set := c.User.Password(); set {
		c.User = url.UserPassword(c.User.Username(), "xxx")
	}
	c.RawQuery, c.Fragment = "", ""
	return c.String()
}

// migrateLockPostgres takes the session-level advisory lock that orders
// the migrations of processes starting at once, waiting at most 30 s, and
// returns its release.
func migrateLockPostgres(ctx context.Context, conn *sql.Conn) (func(), error) {
	const key = 0x6178 // "ax"
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var got bool
		if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&got); err != nil {
			return nil, translate(err)
		}
		if got {
			return func() {
				conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", key) //nolint:errcheck // released with the session anyway
			}, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: another process has held the migration lock for 30 s", ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// checkForeignPostgres refuses a database whose schema holds another
// program's tables: ax must not write into a database that is not its own.
func (s *Store) checkForeignPostgres(ctx context.Context, conn *sql.Conn) error {
	return s.checkForeign(ctx, conn, "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()",
		"the database belongs to another program", "give ax a database of its own (CREATE DATABASE ax)")
}

// translatePostgres maps a PostgreSQL server error to the store's
// sentinels. The codes: https://www.postgresql.org/docs/current/errcodes-appendix.html.
func translatePostgres(pe *pgconn.PgError, err error) error {
	switch pe.Code {
	case "23505": // unique_violation
		return fmt.Errorf("%w: %v", ErrDuplicate, err)
	case "42P01": // undefined_table
		return fmt.Errorf("%w: %v: the database has no ax schema (it is created at start)", ErrSchema, err)
	case "28P01", "28000": // invalid_password, invalid_authorization_specification
		return fmt.Errorf("%w: check the user and password of the DSN (and pg_hba.conf)", err)
	case "3D000": // invalid_catalog_name
		return fmt.Errorf("%w: create the database first (createdb NAME), or name one that exists", err)
	}
	return withClass(postgresClass(pe.Code), err, "")
}

// postgresClass is the class of a PostgreSQL SQLSTATE.
func postgresClass(code string) Class {
	switch code {
	case "40001", // serialization_failure
		"40P01", // deadlock_detected
		"55P03": // lock_not_available: lock_timeout
		return Conflict
	case "25006", // read_only_sql_transaction: a standby, or a failover in progress
		"57014",                   // query_canceled: statement_timeout
		"57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
		"58030": // io_error
		return Unavailable
	}
	switch code[:min(2, len(code))] {
	case "08", // connection_exception
		"53": // insufficient_resources: disk full, out of memory, too many connections
		return Unavailable
	}
	return Permanent
}

// isPostgresError reports whether err carries a PostgreSQL server error.
func isPostgresError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// duplicateColumnPostgres reports whether err is PostgreSQL's
// duplicate_column.
func duplicateColumnPostgres(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42701"
}
