// Package store persists ax behind one contract, with two implementations of
// the same SQL: an embedded SQLite file (modernc.org/sqlite, the default) and
// MySQL/MariaDB (github.com/go-sql-driver/mysql). It is the only package that
// imports a database driver; it translates driver errors into the sentinels
// of this package so that nothing else needs to know which database runs.
//
// The store is the source of truth of the scheduler. Its central operation is
// [Store.Transition]: a compare-and-set of an instance's state on its version
// number that writes the new state and its history row in one
// transaction, conditioned in the same statement on the caller's lease
// epoch still being current. The states and the transition table of the
// eight-state machine, and the Instance and Run values, live in package
// axtype, apart from the rows: this package maps its rows into those values
// and refuses, before any write, a move the table does not allow; the engine
// decides which transition to ask for.
//
// Queries are built with github.com/Masterminds/squirrel; MySQL and SQLite
// both take `?` placeholders, so one builder serves both, and the few dialect
// differences (DDL, upsert, insert-ignore, locking reads, error codes) live in
// dialect.go. Times are stored as UTC Unix milliseconds and every "now" comes
// from the caller: the store never asks the database for the time.
//
// A Store is safe for concurrent use.
package store
