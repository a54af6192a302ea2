package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/go-sql-driver/mysql"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DefaultPath is the SQLite file used when no store is configured.
const DefaultPath = "ax.db"

// Options tunes a Store. The zero value means the documented defaults.
type Options struct {
	// BusyTimeout is how long SQLite waits for another process's write lock
	// before failing with ErrUnavailable. Zero means 5 s.
	BusyTimeout time.Duration
	// MaxConns bounds the write connections of MySQL and PostgreSQL. Zero means 8. Reads have
	// a pool of their own (readConns), and so have the lease's renewals and
	// takeovers (two each).
	MaxConns int
	// Now is the clock used for the schema version record at open. Zero means time.Now.
	Now func() time.Time
	// Existing refuses to create a store: an SQLite path with no file, or
	// an empty one, is ErrNotFound and nothing is written. For commands that
	// read or queue work on a scheduler's store, where a mistyped path
	// must not become a new, empty store.
	Existing bool
	// Logger receives the MySQL driver's own messages (a dead connection
	// dropped, a malformed packet) as warnings, event mysql_driver. Nil
	// leaves them to the driver's default, standard error.
	Logger *slog.Logger
}

// driverLog hands the MySQL driver's messages to a structured logger.
type driverLog struct{ log *slog.Logger }

// Print logs one message of the driver (its file:line prefix included).
func (d driverLog) Print(v ...any) {
	d.log.Warn("mysql_driver", "message", strings.TrimSpace(fmt.Sprint(v...)))
}

// Store is the persistence of ax on SQLite, MySQL or PostgreSQL. It is safe for
// concurrent use; open it with [Open] and close it with [Store.Close].
type Store struct {
	d      dialect
	db     *sql.DB // writes; on SQLite a single connection, the one writer
	read   *sql.DB // reads; on SQLite a pool of read-only connections in WAL mode
	sb     sq.StatementBuilderType
	target string      // for messages, without secrets
	wstmts *stmtCache  // statements prepared on db
	rstmts *stmtCache  // on read (the same cache when read is db)
	file   os.FileInfo // the SQLite file as opened, to notice it deleted or replaced
	// rowsRead counts the rows every query has scanned (RowsRead).
	rowsRead atomic.Int64
	// leases is the view of the store its lease methods use: on MySQL a pool
	// of its own, so that renewing the lease never waits for a connection
	// behind a burst of dispatch, result and output transactions; on SQLite
	// the store itself (there is one writer).
	leases *Store
	// acquire is the view AcquireLease uses: on MySQL a pool whose sessions
	// wait at most acquireLockWait for a row lock; else leases.
	acquire *Store

	// gate orders SQLite's writers, the lease's first (nil on MySQL).
	gate *writeGate

	// afterUpdate, set only by tests, runs between a transition's UPDATE and
	// its history INSERT, to break the connection at the worst moment.
	afterUpdate func(ctx context.Context, tx *sql.Tx) error
	// faults, set only by the simulator (SetFault), fails commits on purpose.
	faults faultHook
	// commits counts the write transactions committed through this view.
	commits atomic.Uint64
}

// Commits returns how many write transactions have committed on s since it
// was opened (its lease's aside, on MySQL): a write succeeded since a
// moment when the count has grown.
func (s *Store) Commits() uint64 { return s.commits.Load() }

// Open opens (and migrates) the store named by target:
//   - "" or a path, or "sqlite:PATH": an embedded SQLite file (default ax.db);
//   - "mysql://DSN", where DSN is a go-sql-driver DSN such as
//     root@tcp(127.0.0.1:3306)/ax;
//   - "postgres://user:password@host:5432/database" (or postgresql://).
//
// A file that is not an ax store, a database with a newer schema, or an
// unreachable server is a clear error, and nothing is written.
func Open(ctx context.Context, target string, opts Options) (*Store, error) {
	if opts.BusyTimeout == 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = 8
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var (
		s   *Store
		err error
	)
	if dsn, ok := strings.CutPrefix(target, "mysql://"); ok {
		s, err = openMySQL(ctx, dsn, opts)
	} else if isPostgres(target) {
		s, err = openPostgres(ctx, target, opts)
	} else {
		s, err = openSQLite(ctx, strings.TrimPrefix(target, "sqlite:"), opts)
	}
	if err != nil {
		return nil, err
	}
	if err := s.migrate(ctx, opts.Now()); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: open %s: %w", s.target, err)
	}
	return s, nil
}

// IsServer reports whether target names a database server (mysql://,
// postgres://, postgresql://) rather than a SQLite file: a store with no
// directory of its own, shared by servers on several hosts.
func IsServer(target string) bool {
	return strings.HasPrefix(target, "mysql://") || isPostgres(target)
}

func isPostgres(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://")
}

func openSQLite(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		path = DefaultPath
	}
	info, statErr := os.Stat(path)
	if statErr == nil && info.IsDir() {
		return nil, fmt.Errorf("store: open %s: %w: it is a directory; give a file path", path, ErrUnavailable)
	}
	if opts.Existing {
		switch {
		case errors.Is(statErr, fs.ErrNotExist):
			return nil, fmt.Errorf("store: open %s: %w: no such file; give the --store the scheduler runs on (ax server creates it)", path, ErrNotFound)
		case statErr == nil && info.Size() == 0:
			return nil, fmt.Errorf("store: open %s: %w: the file is empty, not an ax store; give the --store the scheduler runs on", path, ErrNotFound)
		}
	}
	if err := precheckSQLite(ctx, path); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	w, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1) // SQLite has one writer: queue writers here, not in busy waits
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	rq := url.Values{}
	rq.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
	rq.Add("_pragma", "query_only(1)")
	r, err := sql.Open("sqlite", "file:"+path+"?"+rq.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	s := &Store{d: dialectSQLite, db: w, read: r, sb: sq.StatementBuilder.PlaceholderFormat(sq.Question), target: path,
		wstmts: newStmtCache(w), rstmts: newStmtCache(r), gate: &writeGate{}}
	if err := w.PingContext(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, s.d.translate(err))
	}
	if info, err := os.Stat(path); err == nil {
		s.file = info
	}
	return s, nil
}

// precheckSQLite refuses an existing SQLite file of another application
// before anything is written to it: the connections of the store switch a
// file to WAL as they open, so the check reads it first through a
// read-only connection with no pragmas. Files that are not SQLite at all
// are left to the normal open, which reports them.
func precheckSQLite(ctx context.Context, path string) error {
	info, err := os.Stat(path)
	if err != nil || info.Size() == 0 {
		return nil // a new file: nothing to protect
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil
	}
	defer conn.Close()
	s := &Store{d: dialectSQLite}
	if err := s.checkForeignSQLite(ctx, conn); errors.Is(err, ErrSchema) {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	return nil
}

// ErrStoreFileGone is Check's error when the SQLite file was deleted or
// replaced under the open store: writes would go to an unlinked inode that
// nobody will ever read again.
var ErrStoreFileGone = errors.New("store: the SQLite file is gone")

// Check reports whether the store's SQLite file is still the one it opened
// (not deleted, moved away or replaced). It reads no row; on a database server it
// always succeeds (the lease renewal is the check there).
func (s *Store) Check() error {
	if s.file == nil {
		return nil
	}
	now, err := os.Stat(s.target)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s was deleted (%v): stop ax, restore the file from a backup or remove the -wal and -shm files, and start again", ErrStoreFileGone, s.target, err)
	case !os.SameFile(s.file, now):
		return fmt.Errorf("%w: %s was replaced by another file: stop ax and start it again on the file you mean", ErrStoreFileGone, s.target)
	}
	return nil
}

func openMySQL(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: mysql DSN: %w; write mysql://user:password@tcp(host:3306)/database", err)
	}
	if cfg.DBName == "" {
		return nil, fmt.Errorf("store: mysql DSN %q names no database: write mysql://user:password@tcp(host:3306)/database", redact(cfg))
	}
	// One round trip per statement instead of prepare/execute/close.
	cfg.InterpolateParams = true
	// Rows affected counts matched rows, as on SQLite: an UPDATE that sets a
	// value it already had still proves the row exists.
	cfg.ClientFoundRows = true
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if opts.Logger != nil {
		cfg.Logger = driverLog{opts.Logger}
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("store: mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(opts.MaxConns)
	db.SetMaxIdleConns(opts.MaxConns)
	db.SetConnMaxLifetime(time.Hour)
	// Reads have a pool of their own, so that the API and the CLI never
	// wait for a connection behind the primary's dispatch, result and
	// output transactions (which can hold every write connection during a
	// burst). Statements are not prepared on MySQL (see stmtCache).
	rdb := sql.OpenDB(conn)
	rdb.SetMaxOpenConns(readConns)
	rdb.SetMaxIdleConns(readConns)
	rdb.SetConnMaxLifetime(time.Hour)
	s := &Store{d: dialectMySQL, db: db, read: rdb, sb: sq.StatementBuilder.PlaceholderFormat(sq.Question), target: "mysql://" + redact(cfg)}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		rdb.Close()
		return nil, fmt.Errorf("store: open %s: %w", s.target, s.d.translate(err))
	}
	ldb := sql.OpenDB(conn)
	ldb.SetMaxOpenConns(2)
	ldb.SetMaxIdleConns(2)
	ldb.SetConnMaxLifetime(time.Hour)
	s.leases = &Store{d: s.d, db: ldb, read: ldb, sb: s.sb, target: s.target}
	// Taking the lease waits at most a second for the lease row's lock (not
	// the server's 50 s): a holder stalled inside a fenced write keeps it
	// locked, and AcquireLease then ends that holder's connections (see
	// breakStalledHolder) instead of waiting for it to wake.
	acfg := cfg.Clone()
	if acfg.Params == nil {
		acfg.Params = map[string]string{}
	}
	acfg.Params["innodb_lock_wait_timeout"] = strconv.Itoa(acquireLockWait)
	aconn, err := mysql.NewConnector(acfg)
	if err != nil {
		return nil, fmt.Errorf("store: mysql: %w", err)
	}
	adb := sql.OpenDB(aconn)
	adb.SetMaxOpenConns(2) // one waits for the lock while the other finds who holds it
	adb.SetMaxIdleConns(2)
	adb.SetConnMaxLifetime(time.Hour)
	s.acquire = &Store{d: s.d, db: adb, read: adb, sb: s.sb, target: s.target}
	return s, nil
}

// readConns bounds the MySQL read pool's connections.
const readConns = 4

// acquireLockWait is how long, in seconds, taking the lease waits for the
// lease row's lock on MySQL.
const acquireLockWait = 1

// acquireView returns the store AcquireLease runs on.
func (s *Store) acquireView() *Store {
	if s.acquire != nil {
		return s.acquire
	}
	return s.leaseView()
}

// leaseView returns the store its lease methods run on.
func (s *Store) leaseView() *Store {
	if s.leases != nil {
		return s.leases
	}
	return s
}

// redact renders a MySQL config without its password.
func redact(cfg *mysql.Config) string {
	c := cfg.Clone()
	if c.Passwd != "" {
		c.Passwd = "xxx"
	}
	c.Params = nil
	return strings.SplitN(c.FormatDSN(), "?", 2)[0]
}

// Close closes the database handles.
func (s *Store) Close() error {
	err := s.wstmts.close()
	if s.rstmts != s.wstmts {
		err = errors.Join(err, s.rstmts.close())
	}
	err = errors.Join(err, s.db.Close())
	if s.read != s.db {
		err = errors.Join(err, s.read.Close())
	}
	if s.acquire != nil {
		err = errors.Join(err, s.acquire.Close())
	}
	if s.leases != nil {
		err = errors.Join(err, s.leases.Close())
	}
	return err
}

// Dialect returns "sqlite", "mysql" or "postgres".
func (s *Store) Dialect() string { return s.d.name }

// String names the store for logs, without secrets.
func (s *Store) String() string { return s.target }

// DB returns the handle for writes, for benchmarks that compare the store
// with raw SQL on the same database. Code outside tests must not use it.
func (s *Store) DB() *sql.DB { return s.db }

// Bind rewrites the `?` placeholders of a hand-written query into the
// store's ($1, $2 … on PostgreSQL), for the benchmarks and tests that run
// raw SQL through DB.
func (s *Store) Bind(q string) string { return s.d.bind(q) }

// Ping checks that the database answers: what a standby's readiness rests
// on. It asks on the read pool, which no write holds. The error is the
// driver's.
func (s *Store) Ping(ctx context.Context) error { return s.read.PingContext(ctx) }

// inTx runs fn in a write transaction and commits it; any error rolls back.
func (s *Store) inTx(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	return s.inTxTurn(ctx, what, false, fn)
}

// inTxLease is inTx for the lease's own writes: on SQLite they wait only
// for the write in progress, ahead of every other writer (writeGate).
func (s *Store) inTxLease(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	return s.inTxTurn(ctx, what, true, fn)
}

func (s *Store) inTxTurn(ctx context.Context, what string, urgent bool, fn func(tx *sql.Tx) error) error {
	if err := s.gate.enter(ctx, urgent); err != nil {
		return fmt.Errorf("store: %s: waiting for the writer: %w", what, err)
	}
	defer s.gate.leave()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: %s: begin: %w", what, s.d.translate(err))
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback() // the error that matters is fn's
		return err
	}
	if err := s.fault(what); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: %s: commit: %w", what, s.d.translate(err))
	}
	s.commits.Add(1)
	s.wstmts.prepareWanted(ctx) // the writer is free again
	return nil
}

// exec runs a built statement in tx and returns the rows affected.
func (s *Store) exec(ctx context.Context, tx *sql.Tx, what string, b sq.Sqlizer) (int64, error) {
	q, args, err := b.ToSql()
	if err != nil {
		return 0, fmt.Errorf("store: %s: build query: %w", what, err)
	}
	q = s.d.bind(q) // a bare sq.Expr has `?` still
	var res sql.Result
	if st := s.wstmts.get(q); st != nil {
		res, err = tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	} else {
		res, err = tx.ExecContext(ctx, q, args...)
	}
	if err != nil {
		return 0, fmt.Errorf("store: %s: %w", what, s.d.translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: %s: %w", what, s.d.translate(err))
	}
	return n, nil
}

// insertID runs the INSERT b of one row in tx and returns the id the
// database gave it: PostgreSQL's driver has no LastInsertId, so there the
// statement returns it.
func (s *Store) insertID(ctx context.Context, tx *sql.Tx, b sq.InsertBuilder) (int64, error) {
	if s.d == dialectPostgres {
		q, args, err := b.Suffix("RETURNING id").ToSql()
		if err != nil {
			return 0, err
		}
		var id int64
		return id, s.d.translate(tx.QueryRowContext(ctx, q, args...).Scan(&id))
	}
	q, args, err := b.ToSql()
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, s.d.translate(err)
	}
	id, err := res.LastInsertId()
	return id, s.d.translate(err)
}

// querier is what reads need: a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// query runs a built SELECT and calls scan for each row.
func (s *Store) query(ctx context.Context, q querier, what string, b sq.Sqlizer, scan func(*sql.Rows) error) error {
	text, args, err := b.ToSql()
	if err != nil {
		return fmt.Errorf("store: %s: build query: %w", what, err)
	}
	text = s.d.bind(text)
	rows, err := s.queryPrepared(ctx, q, text, args)
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, s.d.translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		s.rowsRead.Add(1)
		if err := scan(rows); err != nil {
			return fmt.Errorf("store: %s: %w", what, s.d.translate(err))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: %s: %w", what, s.d.translate(err))
	}
	return nil
}

// RowsRead is how many rows the store's queries have scanned since it was
// opened: what a read costs, counted.
func (s *Store) RowsRead() int64 { return s.rowsRead.Load() }

// queryPrepared runs text on q with a cached prepared statement when there
// is one: in a write transaction the writer's, on the read pool the reader's.
func (s *Store) queryPrepared(ctx context.Context, q querier, text string, args []any) (*sql.Rows, error) {
	switch h := q.(type) {
	case *sql.Tx:
		if st := s.wstmts.get(text); st != nil {
			return h.StmtContext(ctx, st).QueryContext(ctx, args...)
		}
	case *sql.DB:
		if h == s.read {
			if st := s.rstmts.prepareNow(ctx, text); st != nil {
				return st.QueryContext(ctx, args...)
			}
		}
	}
	return q.QueryContext(ctx, text, args...)
}

// queryRowTx is tx.QueryRowContext with the writer's cached statement.
func (s *Store) queryRowTx(ctx context.Context, tx *sql.Tx, q string, args ...any) *sql.Row {
	q = s.d.bind(q)
	if st := s.wstmts.get(q); st != nil {
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, q, args...)
}

// ms converts a time to stored UTC milliseconds; the zero time is NULL.
func ms(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// fromMS converts stored milliseconds back; NULL is the zero time.
func fromMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

// nullStr stores "" as NULL.
func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}
