package store

import (
	"context"
	"database/sql"
)

// SetAfterUpdateHook installs a fault-injection hook for tests: it runs
// inside every transition between the UPDATE and the history INSERT.
func SetAfterUpdateHook(s *Store, fn func(ctx context.Context, tx *sql.Tx) error) { s.afterUpdate = fn }
