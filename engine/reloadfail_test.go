package engine

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/ax-sched/ax/store"
)

// A reload whose definitions the store refuses for good (MySQL 1406: a
// pipeline name longer than its column) keeps the running set, reports the
// refusal through ReloadFailure, and holds up no other pipeline: chain
// keeps running every 10 s. Before, the reload stayed waiting and failed
// every turn (store_error, backoff), and chain's runs stopped.
func TestReloadRefusedByTheStoreKeepsTheRunningSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, chain)
		var refused atomic.Int32
		store.SetFault(e.st, func(what string) error {
			if what == "sync definitions" {
				refused.Add(1)
				return &mysql.MySQLError{Number: 1406, Message: "Data too long for column 'pipeline' at row 1"}
			}
			return nil
		})
		sleep(5 * time.Second)
		old := e.eng.Graph()
		g := compile(t, chain, "pipeline: a_name_the_store_refuses\ntimezone: UTC\nschedule: \"@every 10s\"\ntasks:\n  - {name: x, function: record}\n")
		if _, err := e.eng.Reload(g); err != nil {
			t.Fatal(err)
		}
		before := len(e.rec.snapshot())
		sleep(60 * time.Second)
		ran := len(e.rec.snapshot()) - before
		if ran < 15 {
			t.Errorf("chain ran %d tasks in the 60 s after the refused reload, want 18 (3 tasks every 10 s)", ran)
		}
		if e.eng.Graph() != old {
			t.Error("the refused set replaced the running one")
		}
		err := e.eng.ReloadFailure(g)
		if err == nil || !strings.Contains(err.Error(), "Data too long") {
			t.Errorf("ReloadFailure = %v, want the store's refusal", err)
		}
		if n := refused.Load(); n != 2 {
			t.Errorf("%d sync transactions, want 2: the refused set once, then the running set written back once", n)
		}
		for _, c := range e.rec.snapshot() {
			if c.task == "x" {
				t.Fatal("a task of the refused set ran")
			}
		}
		e.stop()
	})
}

// A reload the store refuses for good in the middle of its sync (written
// a definition per transaction here, the second refused) leaves the stored
// definitions those of the running set: what the first transaction wrote
// of the refused set is written back, and nothing of it is listed.
func TestReloadRefusedMidwayLeavesTheRunningDefinitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{CreateChunk: 1}, nil, chain)
		var syncs atomic.Int32
		store.SetFault(e.st, func(what string) error {
			if what == "sync definitions" && syncs.Add(1) == 2 {
				return &mysql.MySQLError{Number: 1406, Message: "Data too long for column 'pipeline' at row 1"}
			}
			return nil
		})
		sleep(5 * time.Second)
		g := compile(t, chain, "pipeline: extra\ntimezone: UTC\nschedule: \"@every 10s\"\ntasks:\n  - {name: x, function: record}\n  - {name: y, function: record}\n")
		if _, err := e.eng.Reload(g); err != nil {
			t.Fatal(err)
		}
		sleep(5 * time.Second)
		e.stop()
		if err := e.eng.ReloadFailure(g); err == nil {
			t.Fatal("the reload was not refused: the test needs it refused")
		}
		ts, err := e.st.Tasks(context.Background(), store.TaskFilter{Pipeline: "extra"})
		if err != nil || len(ts) != 0 {
			var ids []string
			for _, x := range ts {
				ids = append(ids, x.ID)
			}
			t.Errorf("tasks of the refused set stored after the refusal: %v (%v); want none", ids, err)
		}
		all, err := e.st.Tasks(context.Background(), store.TaskFilter{})
		if err != nil || len(all) != 3 {
			t.Errorf("%d tasks stored (%v), want chain's 3", len(all), err)
		}
		if n := syncs.Load(); n < 3 {
			t.Errorf("%d sync transactions, want at least 3: one written before the refusal, the refused one, the write-back", n)
		}
	})
}
