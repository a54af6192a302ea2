package engine

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// TestQueuedRequestAppliedOnceWhenItsOutcomeIsLost: a request queued in the
// store (ax trigger --store) whose outcome the primary cannot record (the
// store fails as it writes it) is not applied a second time on the next
// poll: the trigger makes one manual run, not one per attempt to record it.
func TestQueuedRequestAppliedOnceWhenItsOutcomeIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		yearly := strings.Replace(chain, `"@every 10s"`, `"0 0 1 1 *"`, 1)
		e := setup(t, Config{}, nil, yearly)
		var failed atomic.Int32
		store.SetFault(e.st, func(what string) error {
			if what == "finish op" && failed.Add(1) == 1 {
				return errors.New("injected: the outcome is lost")
			}
			return nil
		})
		ctx := context.Background()
		verb, args, err := EncodeRequest(Trigger{Target: "chain.a"}, By{Actor: "operator:test"})
		if err != nil {
			t.Fatal(err)
		}
		id, err := e.st.EnqueueOp(ctx, store.Op{Kind: verb, Target: "chain.a", Args: string(args), Actor: "operator:test"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		sleep(10 * time.Second)
		e.stop()
		if failed.Load() == 0 {
			t.Fatal("the fault was never injected: the request was not applied")
		}
		runs, err := e.st.Runs(ctx, "chain", 100)
		if err != nil {
			t.Fatal(err)
		}
		manual := 0
		for _, r := range runs {
			if r.Kind == axtype.RunManual {
				manual++
			}
		}
		o, _ := e.st.GetOp(ctx, id)
		if manual != 1 {
			t.Errorf("one queued trigger made %d manual runs (request %d is %s %q %q)", manual, id, o.State, o.Result, o.Error)
		}
	})
}
