package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// stmtCacheSize bounds the statements one handle keeps prepared.
const stmtCacheSize = 256

// stmtCache keeps prepared statements by their SQL text, so that the driver
// does not parse a statement again each time it runs: the pure-Go SQLite
// prepares every statement anew (a sixth of a chain step's time), and MySQL
// saves the prepare and close round trips of each query.
//
// A statement first seen inside a transaction is not prepared there: on
// SQLite the transaction holds the one writer connection, and preparing on
// the pool would wait for it forever. It runs unprepared and is prepared
// after the commit (prepareWanted). Statements are never evicted, so one in
// use is never closed under its caller; past stmtCacheSize, new texts run
// unprepared.
//
// A stmtCache is safe for concurrent use. A nil *stmtCache prepares
// nothing: every statement runs unprepared. MySQL's stores use none: with
// the driver's client-side interpolation an unprepared statement is one
// round trip, while a prepared one costs a prepare per connection and
// statement text, and the batch statements' texts vary with their row
// counts (preparing them took 2.4 s of the loop's 11 s during the
// 10,000-command burst on MariaDB).
type stmtCache struct {
	db   *sql.DB
	mu   sync.Mutex
	m    map[string]*sql.Stmt
	want map[string]bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}, want: map[string]bool{}}
}

// get returns q's prepared statement, or nil and remembers q to be
// prepared after the current transaction.
func (c *stmtCache) get(q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.m[q]; st != nil {
		return st
	}
	if len(c.m)+len(c.want) < stmtCacheSize {
		c.want[q] = true
	}
	return nil
}

// prepareNow returns q's prepared statement, preparing it on the pool (no
// transaction holds a connection of it here); nil when the cache is full or
// the prepare failed (the query then runs unprepared and reports its error).
func (c *stmtCache) prepareNow(ctx context.Context, q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	if st := c.get(q); st != nil {
		return st
	}
	c.mu.Lock()
	wanted := c.want[q]
	delete(c.want, q)
	c.mu.Unlock()
	if !wanted {
		return nil
	}
	return c.prepare(ctx, q)
}

// prepareWanted prepares the statements met inside transactions so far.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	if c == nil {
		return
	}
	c.mu.Lock()
	qs := make([]string, 0, len(c.want))
	for q := range c.want {
		qs = append(qs, q)
	}
	clear(c.want)
	c.mu.Unlock()
	for _, q := range qs {
		c.prepare(ctx, q)
	}
}

func (c *stmtCache) prepare(ctx context.Context, q string) *sql.Stmt {
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[q]; old != nil {
		_ = st.Close() // prepared twice concurrently: keep the first
		return old
	}
	c.m[q] = st
	return st
}

func (c *stmtCache) close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	for q, st := range c.m {
		err = errors.Join(err, st.Close())
		delete(c.m, q)
	}
	return err
}
