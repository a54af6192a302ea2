package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// TestTxSizeFollowsTheDurationOfTransactions: a transaction over the target
// cuts the next to what fits in it, never below the minimum; full ones well
// under it double the size back, up to the maximum; partial ones (the queue
// ran dry) and ones near the target leave it.
func TestTxSizeFollowsTheDurationOfTransactions(t *testing.T) {
	const target = 100 * time.Millisecond
	steps := []struct {
		n    int
		took time.Duration
		want int
	}{
		{1000, 400 * time.Millisecond, 250}, // four times the target: a quarter
		{250, 300 * time.Millisecond, 83},   // still slow: what fits at the rate seen
		{83, 2 * time.Second, 16},           // a stalled store: the minimum, not 4
		{16, 10 * time.Millisecond, 32},     // full and fast: doubles
		{10, 1 * time.Millisecond, 32},      // partial: says nothing of a full one
		{32, 70 * time.Millisecond, 32},     // between half the target and the target: kept
		{32, 10 * time.Millisecond, 64},
		{64, 10 * time.Millisecond, 128},
		{128, 10 * time.Millisecond, 256},
		{256, 10 * time.Millisecond, 512},
		{512, 10 * time.Millisecond, 1000}, // capped at the maximum
		{1000, 10 * time.Millisecond, 1000},
		{1000, 150 * time.Millisecond, 666},
		{0, time.Second, 666}, // nothing recorded: nothing learnt
	}
	s := newTxSize(1000, target)
	if s.next() != 1000 {
		t.Fatalf("starts at %d, want the maximum 1000", s.next())
	}
	for i, st := range steps {
		s.took(st.n, st.took)
		if got := s.next(); got != st.want {
			t.Fatalf("step %d: %d instances in %s: next size %d, want %d", i, st.n, st.took, got, st.want)
		}
	}
	small := newTxSize(8, target)
	small.took(8, time.Second)
	if small.next() != 8 {
		t.Errorf("a maximum under the minimum: next %d, want 8 (never above the maximum)", small.next())
	}
}

// TestSlowTransactionsAreCutShort: when the store takes a second for each
// batch of transitions (a loaded machine), the loop records its later
// dispatch and result batches a few instances at a time, so that none holds
// the store's writer (SQLite) or the lease row (MySQL) for seconds in front
// of a lease renewal. Three waves of 200 functions, every 30 s: only the
// first dispatch and the first result transaction, before anything was
// measured, may hold more than what fits in the turn budget (100 ms) at
// the rate they showed (200 a second): 20. Before: every wave went in one
// dispatch and one result transaction of 200.
func TestSlowTransactionsAreCutShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var src strings.Builder
		src.WriteString("pipeline: wide\ntimezone: UTC\nschedule: \"*/30 * * * * *\"\ndefaults: {function: record}\ntasks:\n")
		for i := range 200 {
			fmt.Fprintf(&src, "  - {name: t%03d}\n", i)
		}
		e := setup(t, Config{MaxRunning: -1}, nil, src.String())
		store.SetFault(e.st, func(what string) error {
			if what == "transition batch" {
				time.Sleep(time.Second) // every batch takes a second, whatever its size
			}
			return nil
		})
		sleep(150 * time.Second)
		e.stop()
		h, err := e.st.History(context.Background(), store.LogFilter{Limit: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		type batch struct {
			to axtype.State
			at time.Time
		}
		size := map[batch]int{}
		var order []batch
		for _, r := range h { // oldest first
			if r.To != axtype.Running && r.To != axtype.Success {
				continue
			}
			b := batch{r.To, r.At}
			if size[b] == 0 {
				order = append(order, b)
			}
			size[b]++
		}
		// What fits in the turn budget at the rate the first batch showed:
		// 200 in a second.
		fits := 200 * int(100*time.Millisecond) / int(time.Second)
		done, first := 0, map[axtype.State]bool{}
		for _, b := range order {
			if b.to == axtype.Success {
				done += size[b]
			}
			if !first[b.to] {
				first[b.to] = true
				continue
			}
			if size[b] > fits {
				t.Errorf("%d transitions to %s recorded together at %s after slow transactions, want at most %d", size[b], b.to, b.at.Format("15:04:05.000"), fits)
			}
		}
		if done < 600 {
			t.Fatalf("%d instances succeeded, want the 600 of three waves", done)
		}
	})
}
