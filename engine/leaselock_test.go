package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// On MySQL every fenced transaction holds a shared lock on the lease row
// until it commits, and a renewal of the lease waits for it: 1,000 due
// instances are dispatched in transactions of at most 250, never one of
// 1,000 (which held the lock 100-300 ms on a loaded MariaDB; the renewal
// waited as long). Read from the history: the RUNNING rows of one dispatch
// transaction share its time to the millisecond.
func TestMySQLDispatchTransactionsStaySmall(t *testing.T) {
	st := storetest.MySQL(t)
	const n = 1000
	var src strings.Builder
	src.WriteString("pipeline: wide\ntimezone: UTC\nschedule: \"@daily\"\ndefaults: {function: record}\ntasks:\n")
	var names []string
	for i := range n {
		fmt.Fprintf(&src, "  - {name: t%04d}\n", i)
		names = append(names, fmt.Sprintf("t%04d", i))
	}
	g := compile(t, src.String())
	funcs := runner.NewFunctions(func(runner.Attempt) string { return "record" })
	_ = funcs.Register("record", func(context.Context, runner.Attempt) error { return nil })
	ctx := context.Background()
	id, err := CreateBackfill(ctx, st, g, BackfillSpec{Pipeline: "wide", Tasks: names, Times: []time.Time{time.Now().Truncate(time.Second)}, MaxActiveRuns: 1, Rerun: RerunAll}, "test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	eng, err := New(Config{NoSchedules: true, FailIfHeld: true, Holder: "test", MaxRunning: -1}, st, g, Executors{defs.ExecFunction: funcs})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- eng.Run(runCtx) }()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		bs, err := st.Backfills(ctx, id)
		if err == nil && len(bs) == 1 && (bs[0].State == BackfillDone || bs[0].State == BackfillFailed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the backfill did not finish within a minute")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h, err := st.History(ctx, store.LogFilter{Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	per := map[int64]int{}
	runs := 0
	for _, r := range h {
		if r.To == axtype.Running && strings.HasPrefix(r.TaskID, "wide.") {
			per[r.At.UnixMilli()]++
			runs++
		}
	}
	biggest := 0
	for _, c := range per {
		biggest = max(biggest, c)
	}
	if runs != n || biggest > 250 {
		t.Errorf("%d dispatches, the most in one transaction %d; want %d, at most 250 per transaction", runs, biggest, n)
	}
}
