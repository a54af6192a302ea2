//go:build axfault

package main

import (
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/ax-sched/ax/store"
)

// A binary built with -tags axfault (for tests only, never shipped) stops
// itself with SIGSTOP inside a fenced write transaction (the creation of a
// run, which checks the epoch under the lease row's lock), after its
// statements ran and before it commits, once the file named by
// AX_FAULT_STOP_IN_TX exists (the file is removed first): a primary stalled
// mid-write, holding the lease row's lock, at a moment the test chooses.
func init() {
	storeOpened = func(st *store.Store) {
		trigger := os.Getenv("AX_FAULT_STOP_IN_TX")
		if trigger == "" {
			return
		}
		store.SetFault(st, func(what string) error {
			if what == "create run" && os.Remove(trigger) == nil {
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
