package engine

import (
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/store"
)

// A primary whose store cannot take writes (every write transaction fails
// as with a full disk) stops being primary, and WriteFault says why, from
// the first failed write until writes succeed again; then it is primary
// again and WriteFault is nil.
func TestWriteFaultWhileTheStoreCannotWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var full atomic.Bool
		e := setup(t, Config{LeaseTTL: 3 * time.Second, LeaseRenew: time.Second}, nil, chain)
		store.SetFault(e.st, func(what string) error {
			if full.Load() {
				return errDiskFull
			}
			return nil
		})
		sleep(3 * time.Second)
		if err := e.eng.WriteFault(); err != nil || !e.eng.Primary() {
			t.Fatalf("healthy: WriteFault %v, primary %v", err, e.eng.Primary())
		}
		full.Store(true)
		sleep(1500 * time.Millisecond) // a renewal and a turn or two fail
		err := e.eng.WriteFault()
		if err == nil || !strings.Contains(err.Error(), "database or disk is full") {
			t.Errorf("the store cannot write: WriteFault = %v, want the disk-full error", err)
		}
		sleep(10 * time.Second)
		if e.eng.Primary() {
			t.Error("still primary 10 s after the store stopped taking writes")
		}
		if err := e.eng.WriteFault(); err == nil {
			t.Error("WriteFault cleared while every write fails")
		}
		full.Store(false)
		sleep(35 * time.Second) // past the longest backoff of the loop
		if err := e.eng.WriteFault(); err != nil {
			t.Errorf("writes succeed again, and WriteFault = %v", err)
		}
		if !e.eng.Primary() {
			t.Error("writes succeed again, and the engine is not primary")
		}
		e.stop()
	})
}

type diskFull struct{}

func (diskFull) Error() string { return "database or disk is full (13)" }

var errDiskFull error = diskFull{}
