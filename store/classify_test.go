package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	sqlite3 "modernc.org/sqlite/lib"
)

// TestClassifyDriverErrors: the one reading of driver errors, against the
// documented codes of MySQL/MariaDB and SQLite and the errors of a broken
// connection.
func TestClassifyDriverErrors(t *testing.T) {
	t.Parallel()
	my := func(n uint16) error { return &mysql.MySQLError{Number: n, Message: "m"} }
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "m"} }
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		{"1040 too many connections", my(1040), Unavailable},
		{"1040 at begin, wrapped", fmt.Errorf("begin: %w", my(1040)), Unavailable},
		{"1203 too many user connections", my(1203), Unavailable},
		{"1226 user limit reached", my(1226), Unavailable},
		{"1053 server shutdown", my(1053), Unavailable},
		{"1927 connection killed", my(1927), Unavailable},
		{"2006 gone away", my(2006), Unavailable},
		{"2013 lost connection", my(2013), Unavailable},
		{"1021 disk full", my(1021), Unavailable},
		{"1114 table full", my(1114), Unavailable},
		{"1290 read-only", my(1290), Unavailable},
		{"1836 read-only mode", my(1836), Unavailable},
		{"1317 query interrupted", my(1317), Unavailable},
		{"4031 client interaction timeout", my(4031), Unavailable},
		{"1205 lock wait timeout", my(1205), Conflict},
		{"1213 deadlock", my(1213), Conflict},
		{"1062 duplicate", my(1062), Permanent},
		{"1146 no such table", my(1146), Permanent},
		{"1406 data too long", my(1406), Permanent},
		{"1045 access denied", my(1045), Permanent},
		{"1064 syntax", my(1064), Permanent},
		{"pg 53300 too many connections", pg("53300"), Unavailable},
		{"pg 53300 at begin, wrapped", fmt.Errorf("begin: %w", pg("53300")), Unavailable},
		{"pg 53100 disk full", pg("53100"), Unavailable},
		{"pg 08006 connection failure", pg("08006"), Unavailable},
		{"pg 57P01 admin shutdown", pg("57P01"), Unavailable},
		{"pg 57P03 cannot connect now", pg("57P03"), Unavailable},
		{"pg 25006 read-only transaction", pg("25006"), Unavailable},
		{"pg 57014 query canceled", pg("57014"), Unavailable},
		{"pg 55P03 lock timeout", pg("55P03"), Conflict},
		{"pg 40P01 deadlock", pg("40P01"), Conflict},
		{"pg 40001 serialization failure", pg("40001"), Conflict},
		{"pg 23505 duplicate", pg("23505"), Permanent},
		{"pg 42P01 no such table", pg("42P01"), Permanent},
		{"pg 22001 value too long", pg("22001"), Permanent},
		{"pg 28P01 wrong password", pg("28P01"), Permanent},
		{"pg 42601 syntax", pg("42601"), Permanent},
		{"driver.ErrBadConn", fmt.Errorf("exec: %w", driver.ErrBadConn), Unavailable},
		{"mysql.ErrInvalidConn", mysql.ErrInvalidConn, Unavailable},
		{"io.EOF", io.EOF, Unavailable},
		{"io.ErrUnexpectedEOF", io.ErrUnexpectedEOF, Unavailable},
		{"net.OpError", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("refused")}, Unavailable},
		{"ECONNRESET", fmt.Errorf("read: %w", syscall.ECONNRESET), Unavailable},
		{"ErrUnavailable", fmt.Errorf("x: %w", ErrUnavailable), Unavailable},
		{"ErrConflict", fmt.Errorf("x: %w", ErrConflict), Conflict},
		{"ErrNotLeader", ErrNotLeader, Permanent},
		{"ErrLeaseHeld", ErrLeaseHeld, Permanent},
		{"context.Canceled", context.Canceled, Permanent},
		{"plain", errors.New("something else"), Permanent},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify = %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		code int
		want Class
	}{
		{"SQLITE_BUSY", sqlite3.SQLITE_BUSY, Unavailable},
		{"SQLITE_BUSY_SNAPSHOT", sqlite3.SQLITE_BUSY_SNAPSHOT, Unavailable},
		{"SQLITE_LOCKED", sqlite3.SQLITE_LOCKED, Unavailable},
		{"SQLITE_FULL", sqlite3.SQLITE_FULL, Unavailable},
		{"SQLITE_IOERR", sqlite3.SQLITE_IOERR, Unavailable},
		{"SQLITE_IOERR_WRITE", sqlite3.SQLITE_IOERR_WRITE, Unavailable},
		{"SQLITE_READONLY", sqlite3.SQLITE_READONLY, Unavailable},
		{"SQLITE_READONLY_DBMOVED", sqlite3.SQLITE_READONLY_DBMOVED, Unavailable},
		{"SQLITE_NOMEM", sqlite3.SQLITE_NOMEM, Unavailable},
		{"SQLITE_CANTOPEN", sqlite3.SQLITE_CANTOPEN, Unavailable},
		{"SQLITE_CORRUPT", sqlite3.SQLITE_CORRUPT, Unavailable},
		{"SQLITE_ERROR", sqlite3.SQLITE_ERROR, Permanent},
		{"SQLITE_CONSTRAINT_NOTNULL", sqlite3.SQLITE_CONSTRAINT_NOTNULL, Permanent},
		{"SQLITE_TOOBIG", sqlite3.SQLITE_TOOBIG, Permanent},
		{"SQLITE_MISMATCH", sqlite3.SQLITE_MISMATCH, Permanent},
	} {
		if got := sqliteClass(tc.code); got != tc.want {
			t.Errorf("%s: sqliteClass = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestClassifyRealSQLiteFull: a database that cannot grow (max_page_count,
// as a full disk) fails a write with the driver's own SQLITE_FULL, read as
// unavailable.
func TestClassifyRealSQLiteFull(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "full.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	for _, q := range []string{"CREATE TABLE t (b BLOB)", "PRAGMA max_page_count = 3"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	_, err = db.ExecContext(ctx, "INSERT INTO t VALUES (?)", make([]byte, 1<<20))
	if err == nil {
		t.Fatal("a 1 MiB row fitted in 3 pages")
	}
	if got := Classify(err); got != Unavailable {
		t.Errorf("Classify(%v) = %v, want unavailable", err, got)
	}
}
