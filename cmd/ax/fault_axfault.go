//go:build axfault

package main

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ax-sched/ax/store"
)

// A binary built with -tags axfault (for tests only, never shipped) fails
// or stalls its store's write transactions when a test asks, through its
// environment:
//
//   - AX_FAULT_STOP_IN_TX=FILE: it stops itself with SIGSTOP inside a fenced
//     write transaction (the creation of a run, which checks the epoch under
//     the lease row's lock), after its statements ran and before it commits,
//     once FILE exists (the file is removed first): a primary stalled
//     mid-write, holding the lease row's lock, at a moment the test chooses.
//   - AX_FAULT_FAIL_WRITES=FILE: while FILE exists, every write transaction
//     fails before its commit (rolled back) with the error AX_FAULT_ERROR
//     names: "1040" (MySQL's too many connections, the driver's own error),
//     "53300" (PostgreSQL's, pgconn's) or "full" (the default: SQLite's
//     disk-full text). With
//     AX_FAULT_SPARE_LEASE=1 the lease's own writes (acquire, renew,
//     release) still succeed: a primary that renews its lease and cannot
//     write anything else.
//
// The drivers are imported here, and only here outside store, to fail
// with their own error values as the database would.
func init() {
	storeOpened = func(st *store.Store) {
		stop, fail := os.Getenv("AX_FAULT_STOP_IN_TX"), os.Getenv("AX_FAULT_FAIL_WRITES")
		if stop == "" && fail == "" {
			return
		}
		var failWith error = errors.New("database or disk is full (13)")
		switch os.Getenv("AX_FAULT_ERROR") {
		case "1040":
			failWith = &mysql.MySQLError{Number: 1040, Message: "Too many connections"}
		case "53300":
			failWith = &pgconn.PgError{Severity: "FATAL", Code: "53300", Message: "sorry, too many clients already"}
		}
		spareLease := os.Getenv("AX_FAULT_SPARE_LEASE") == "1"
		store.SetFault(st, func(what string) error {
			if fail != "" && !(spareLease && strings.HasSuffix(what, " lease")) {
				if _, err := os.Stat(fail); err == nil {
					return failWith
				}
			}
			if stop != "" && what == "create run" && os.Remove(stop) == nil {
				// To this thread, so that it stops on its way back from the
				// call (a signal to the process may be taken by another thread
				// while this one goes on to commit); the sleep covers a late stop.
				runtime.LockOSThread()
				_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
				runtime.UnlockOSThread()
				time.Sleep(200 * time.Millisecond)
			}
			return nil
		})
	}
}
