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
// creates its window, for 40 s) stands by again, asks for the lease again
// after a pause that grows (5, 10, 15 s: not in a tight loop, although the
// lease itself can be written), and takes it for good once the store
// answers, instead of ending the process.
func TestUnavailableStartStandsBy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hits atomic.Int32
		until := time.Now().Add(40 * time.Second)
		e := setupOn(t, Config{}, nil, func(st *store.Store) {
			store.SetFault(st, func(what string) error {
				if what == "create run" && time.Now().Before(until) {
					hits.Add(1)
					return &mysql.MySQLError{Number: 1040, Message: "Too many connections"}
				}
				return nil
			})
		}, "pipeline: s\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: a, function: record}\n")
		sleep(60 * time.Second)
		select {
		case err := <-e.done:
			t.Fatalf("the engine stopped on an unavailable store in its start: %v", err)
		default:
		}
		if n := hits.Load(); n < 3 || n > 6 {
			t.Errorf("%d term starts failed in 40 s, want 3 to 6 (pauses of 5, 10, 15, 15 s)", n)
		}
		if !e.eng.Primary() {
			t.Error("not primary 20 s after the store answered again")
		}
		e.stop()
	})
}
