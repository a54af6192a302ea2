package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect holds every difference between SQLite and MySQL that the store
// needs: DDL types, upsert and insert-ignore syntax, locking reads, and the
// translation of driver errors. Nothing else in the package branches on the
// database.
type dialect struct {
	name string // "sqlite" or "mysql"
}

var (
	dialectSQLite = dialect{name: "sqlite"}
	dialectMySQL  = dialect{name: "mysql"}
)

// column types of the schema, rendered per dialect.
func (d dialect) typ(t string) string {
	if d.name == "sqlite" {
		switch {
		case t == "id":
			return "INTEGER PRIMARY KEY AUTOINCREMENT"
		case strings.HasPrefix(t, "str"), t == "text":
			return "TEXT"
		case t == "blob":
			return "BLOB"
		default:
			return "INTEGER"
		}
	}
	switch {
	case t == "id":
		return "BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY"
	case strings.HasPrefix(t, "str"):
		return "VARCHAR(" + strings.TrimPrefix(t, "str") + ")"
	case t == "text":
		return "MEDIUMTEXT"
	case t == "blob":
		return "MEDIUMBLOB"
	case t == "int":
		return "INT"
	default:
		return "BIGINT"
	}
}

// insertIgnore is the verb of an INSERT that skips rows whose key exists.
func (d dialect) insertIgnore() string {
	if d.name == "sqlite" {
		return "INSERT OR IGNORE"
	}
	return "INSERT IGNORE"
}

// upsert returns the clause that turns an INSERT into an update of cols when
// the row with key exists. MariaDB has no `AS new` alias: use VALUES(col).
func (d dialect) upsert(key []string, cols []string) string {
	set := make([]string, len(cols))
	for i, c := range cols {
		if d.name == "sqlite" {
			set[i] = c + " = excluded." + c
		} else {
			set[i] = c + " = VALUES(" + c + ")"
		}
	}
	if d.name == "sqlite" {
		return "ON CONFLICT (" + strings.Join(key, ", ") + ") DO UPDATE SET " + strings.Join(set, ", ")
	}
	return "ON DUPLICATE KEY UPDATE " + strings.Join(set, ", ")
}

// upsertAdd is upsert where the add columns are summed with the existing
// row's (counters) and the set columns replaced.
func (d dialect) upsertAdd(key, add, set []string) string {
	var parts []string
	for _, c := range add {
		if d.name == "sqlite" {
			parts = append(parts, c+" = "+c+" + excluded."+c)
		} else {
			parts = append(parts, c+" = "+c+" + VALUES("+c+")")
		}
	}
	for _, c := range set {
		if d.name == "sqlite" {
			parts = append(parts, c+" = excluded."+c)
		} else {
			parts = append(parts, c+" = VALUES("+c+")")
		}
	}
	if d.name == "sqlite" {
		return "ON CONFLICT (" + strings.Join(key, ", ") + ") DO UPDATE SET " + strings.Join(parts, ", ")
	}
	return "ON DUPLICATE KEY UPDATE " + strings.Join(parts, ", ")
}

// forUpdate is the suffix of a locking read. SQLite needs none: a write
// transaction (BEGIN IMMEDIATE) holds the database's single write lock.
func (d dialect) forUpdate() string {
	if d.name == "sqlite" {
		return ""
	}
	return " FOR UPDATE"
}

// translate maps a driver error to the store's sentinels, keeping the
// driver's text for people. Context errors pass through unchanged.
func (d dialect) translate(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
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
		if se.Code()&0xff == sqlite3.SQLITE_BUSY {
			return fmt.Errorf("%w: %v: another process holds the write lock", ErrUnavailable, err)
		}
		if c := se.Code() & 0xff; c == sqlite3.SQLITE_CORRUPT || c == sqlite3.SQLITE_IOERR || c == sqlite3.SQLITE_CANTOPEN {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		return err
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1062: // ER_DUP_ENTRY
			return fmt.Errorf("%w: %v", ErrDuplicate, err)
		case 1213, 1205: // deadlock, lock wait timeout: the race was lost
			return fmt.Errorf("%w: %v", ErrConflict, err)
		case 1927, 1053, 2006, 2013: // connection killed, server shutdown, gone away, lost
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		case 1146: // no such table
			return fmt.Errorf("%w: %v: the database has no ax schema (it is created at start)", ErrSchema, err)
		}
		return err
	}
	var ne net.Error
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) || strings.Contains(err.Error(), "connection refused") {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return err
}

// lockShared is the suffix of a read that must block a concurrent writer of
// the row until this transaction ends: the lease check of a fenced write.
func (d dialect) lockShared() string {
	if d.name == "sqlite" {
		return ""
	}
	return " LOCK IN SHARE MODE"
}
