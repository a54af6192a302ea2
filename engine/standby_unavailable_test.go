package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/ax-sched/ax/store"
)

// A standby whose database answers "too many connections" (MySQL 1040) when
// it asks for the lease keeps asking, less often while it lasts, and takes
// the lease once the database answers again; it never exits.
func TestStandbyOutlastsTooManyConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var asked atomic.Int32
		var full atomic.Bool
		full.Store(true)
		e := setupOn(t, Config{LeaseTTL: 4 * time.Second, LeaseRenew: time.Second}, nil, func(st *store.Store) {
			store.SetFault(st, func(what string) error {
				if what == "acquire lease" && full.Load() {
					asked.Add(1)
					return &mysql.MySQLError{Number: 1040, Message: "Too many connections"}
				}
				return nil
			})
		}, chain)
		sleep(60 * time.Second)
		select {
		case err := <-e.done:
			t.Fatalf("the standby exited on an unavailable store: %v", err)
		default:
		}
		if e.eng.Primary() {
			t.Fatal("primary without the lease")
		}
		// Asked at least every TTL, and backing off from every renewal period.
		if n := asked.Load(); n < 15 || n > 40 {
			t.Errorf("asked for the lease %d times in 60 s, want 15 to 40 (backoff from 1 s, capped at the 4 s TTL)", n)
		}
		full.Store(false)
		sleep(5 * time.Second)
		if !e.eng.Primary() {
			t.Error("the database answers again, and the standby did not take the lease within a TTL")
		}
		if _, err := e.st.GetLease(context.Background(), ""); err != nil {
			t.Error(err)
		}
		e.stop()
	})
}

// A term whose start meets an unavailable store (MySQL 1040 while it
// creates its window) stands by again and takes the lease back once the
// store answers, instead of ending the process.
func TestUnavailableStartStandsBy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hits atomic.Int32
		e := setupOn(t, Config{}, nil, func(st *store.Store) {
			store.SetFault(st, func(what string) error {
				if what == "create run" && hits.Add(1) <= 3 {
					return &mysql.MySQLError{Number: 1040, Message: "Too many connections"}
				}
				return nil
			})
		}, "pipeline: s\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: a, function: record}\n")
		sleep(30 * time.Second)
		select {
		case err := <-e.done:
			t.Fatalf("the engine stopped on an unavailable store in its start: %v", err)
		default:
		}
		if hits.Load() < 3 {
			t.Fatalf("%d failed creations: the test needs the start's writes to fail", hits.Load())
		}
		if !e.eng.Primary() {
			t.Error("not primary 30 s after the store answered again")
		}
		e.stop()
	})
}
