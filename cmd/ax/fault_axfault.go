//go:build axfault

package main

import (
	"os"
	"syscall"

	"github.com/ax-sched/ax/store"
)

// A binary built with -tags axfault (for tests only, never shipped) stops
// itself with SIGSTOP inside a write transaction, after its statements ran
// and before it commits, once the file named by AX_FAULT_STOP_IN_TX exists
// (the file is removed first): a primary stalled mid-write, holding the
// lease row's lock, at a moment the test chooses.
func init() {
	storeOpened = func(st *store.Store) {
		trigger := os.Getenv("AX_FAULT_STOP_IN_TX")
		if trigger == "" {
			return
		}
		store.SetFault(st, func(what string) error {
			if os.Remove(trigger) == nil {
				_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			}
			return nil
		})
	}
}
