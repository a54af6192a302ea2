package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMySQLDriverLogsThroughSlog: the MySQL driver's own messages (here, a
// pooled connection the server killed) go to the store's logger as
// structured lines, not to standard error in the driver's format.
func TestMySQLDriverLogsThroughSlog(t *testing.T) {
	dsn := storetest.MySQLDSN(t)
	var buf syncBuffer
	ctx := context.Background()
	s, err := store.Open(ctx, "mysql://"+dsn, store.Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SchemaVersion(ctx); err != nil { // a pooled, idle read connection
		t.Fatal(err)
	}
	cfg, _ := mysql.ParseDSN(dsn)
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	rows, err := admin.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()", cfg.DBName)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		admin.ExecContext(ctx, "KILL CONNECTION ?", id) //nolint:errcheck // one may be gone already
	}
	if _, err := s.SchemaVersion(ctx); err != nil { // the driver drops the dead connection and retries
		t.Fatal(err)
	}
	got := buf.String()
	if !strings.Contains(got, `"msg":"mysql_driver"`) || !strings.Contains(got, "bad idle connection") {
		t.Errorf("the driver's message is not a structured line of the store's logger:\n%s", got)
	}
}
