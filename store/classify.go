package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Class says what a caller can do about a failed store call.
type Class int

const (
	// Permanent: the same call fails the same way until something else
	// changes (a bad value, a schema mismatch, a duplicate key, a refusal).
	Permanent Class = iota
	// Unavailable: the database cannot be reached or cannot take the write
	// for now (down, overloaded, out of connections or disk, read-only,
	// another process holds its write lock); nothing was half-applied. Try
	// again later, with backoff.
	Unavailable
	// Conflict: the transaction lost a race (a deadlock, a lock wait that
	// timed out, a version that changed). Try again now, after reading again.
	Conflict
)

func (c Class) String() string {
	switch c {
	case Unavailable:
		return "unavailable"
	case Conflict:
		return "conflict"
	}
	return "permanent"
}

// Classify says what err, returned by the store, means for its caller: the
// one reading of ErrUnavailable and ErrConflict. Context errors are
// Permanent: the caller ended the call.
func Classify(err error) Class {
	err = translate(err)
	switch {
	case errors.Is(err, ErrUnavailable):
		return Unavailable
	case errors.Is(err, ErrConflict):
		return Conflict
	}
	return Permanent
}

// sqliteClass is the class of a SQLite result code (extended codes are
// judged by their primary code). The codes: https://sqlite.org/rescode.html.
func sqliteClass(code int) Class {
	switch code & 0xff {
	case sqlite3.SQLITE_BUSY, // another process holds the write lock
		sqlite3.SQLITE_LOCKED,   // a table is locked by another statement
		sqlite3.SQLITE_NOMEM,    // out of memory
		sqlite3.SQLITE_READONLY, // the file or its directory cannot be written
		sqlite3.SQLITE_IOERR,    // the operating system failed a read or write
		sqlite3.SQLITE_CORRUPT,  // the file is damaged (or was replaced under us)
		sqlite3.SQLITE_FULL,     // the disk (or max_page_count) is full
		sqlite3.SQLITE_CANTOPEN, // the file cannot be opened
		sqlite3.SQLITE_PROTOCOL, // a locking race between processes
		sqlite3.SQLITE_NOLFS:    // the file is too large for the host
		return Unavailable
	}
	return Permanent
}

// mysqlClass is the class of a MySQL or MariaDB server error number. The
// numbers: https://dev.mysql.com/doc/mysql-errors/8.0/en/server-error-reference.html
// and https://mariadb.com/kb/en/mariadb-error-codes/.
func mysqlClass(number uint16) Class {
	switch number {
	case 1205, // ER_LOCK_WAIT_TIMEOUT
		1213: // ER_LOCK_DEADLOCK
		return Conflict
	case 1021, // ER_DISK_FULL
		1037, 1038, 1041, // ER_OUTOFMEMORY, ER_OUT_OF_SORTMEMORY, ER_OUT_OF_RESOURCES
		1040,       // ER_CON_COUNT_ERROR: too many connections
		1042, 1043, // ER_BAD_HOST_ERROR, ER_HANDSHAKE_ERROR
		1053,                   // ER_SERVER_SHUTDOWN
		1077, 1078, 1079, 1080, // server starting, shutting down, forcing close
		1114,                   // ER_RECORD_FILE_FULL: the table's storage is full
		1129,                   // ER_HOST_IS_BLOCKED: too many connection errors
		1135,                   // ER_CANT_CREATE_THREAD
		1152, 1153, 1154, 1155, // aborted connection, packet too large, network read and write
		1156, 1157, 1158, 1159, 1160, 1161, // network errors
		1180, 1181, // ER_ERROR_DURING_COMMIT, ER_ERROR_DURING_ROLLBACK
		1203,                   // ER_TOO_MANY_USER_CONNECTIONS
		1226,                   // ER_USER_LIMIT_REACHED: max_user_connections and the like
		1290,                   // ER_OPTION_PREVENTS_STATEMENT: --read-only (a failover in progress)
		1317,                   // ER_QUERY_INTERRUPTED
		1836,                   // ER_READ_ONLY_MODE
		1927,                   // ER_CONNECTION_KILLED (MariaDB)
		2002, 2003, 2006, 2013, // client: cannot connect, server gone away, lost connection
		4031: // ER_CLIENT_INTERACTION_TIMEOUT
		return Unavailable
	}
	return Permanent
}

// translate maps a driver error to the store's sentinels, keeping the
// driver's text for people: a duplicate key is ErrDuplicate, a missing or
// foreign schema ErrSchema, and the rest by sqliteClass, mysqlClass and
// postgresClass, or,
// for a connection that broke (driver.ErrBadConn, a net.Error, an EOF, a
// refused or reset connection), ErrUnavailable. Context errors and errors
// already translated pass through unchanged.
func translate(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, ErrUnavailable) || errors.Is(err, ErrConflict) || errors.Is(err, ErrDuplicate) || errors.Is(err, ErrSchema) {
		return err
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %v", ErrDuplicate, err)
		case sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("%w: %v: the file is not an ax store (or is corrupted)", ErrSchema, err)
		}
		return withClass(sqliteClass(se.Code()), err, sqliteHint(se.Code()))
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return translatePostgres(pe, err)
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1062: // ER_DUP_ENTRY
			return fmt.Errorf("%w: %v", ErrDuplicate, err)
		case 1146: // no such table
			return fmt.Errorf("%w: %v: the database has no ax schema (it is created at start)", ErrSchema, err)
		}
		return withClass(mysqlClass(me.Number), err, "")
	}
	var ne net.Error
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || strings.Contains(err.Error(), "connection refused") {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return err
}

// isDriverError reports whether err is an error of a database driver.
func isDriverError(err error) bool {
	var se *sqlite.Error
	var me *mysql.MySQLError
	return errors.As(err, &se) || errors.As(err, &me) || isPostgresError(err) || errors.Is(err, driver.ErrBadConn)
}

// withClass wraps err in the sentinel of class c, with hint after it.
func withClass(c Class, err error, hint string) error {
	switch c {
	case Unavailable:
		return fmt.Errorf("%w: %v%s", ErrUnavailable, err, hint)
	case Conflict:
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	return err
}

// sqliteHint tells people what to do about an unavailable SQLite store.
func sqliteHint(code int) string {
	switch code & 0xff {
	case sqlite3.SQLITE_BUSY:
		return ": another process holds the write lock"
	case sqlite3.SQLITE_FULL:
		return ": the disk is full; free space where the store lives"
	case sqlite3.SQLITE_READONLY:
		return ": the store cannot be written; check the permissions of the file and its directory"
	}
	return ""
}
