package api

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// TestSummaryReadsWhatItShows: summarizing a run of 2,000 gates awaiting
// approval reads a few hundred rows of the store (its counts, the gates
// and the waiting instances it names, and what judging those needs), not
// every instance of the run, and still counts them all.
func TestSummaryReadsWhatItShows(t *testing.T) {
	t.Parallel()
	const n = 2000
	e := setupBig(t, n, 0)
	ctx := context.Background()
	// A store of its own on the same file, so that only this test's reads
	// are counted, not the engine's beside it.
	st, err := store.Open(ctx, e.Path, store.Options{Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run, err := st.Run(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	read0 := st.RowsRead()
	counts, err := st.RunStateCounts(ctx, []int64{run.ID})
	if err != nil {
		t.Fatal(err)
	}
	v, err := Summarize(ctx, st, e.Graph, run, counts[run.ID], time.Now())
	if err != nil {
		t.Fatal(err)
	}
	read := st.RowsRead() - read0
	t.Logf("summarizing a run of %d instances read %d rows", n, read)
	if read > 4*RunListed {
		t.Errorf("summarizing a run of %d instances read %d rows, want at most %d", n, read, 4*RunListed)
	}
	if v.State != "awaiting approval" || v.Over || v.Counts[axtype.Waiting] != n || v.WaitingCount != n || v.AwaitingCount != n ||
		len(v.Waiting) != RunListed || len(v.Awaiting) != RunListed || v.Awaiting[0] != "big.t000000" || v.Awaiting[RunListed-1] != fmt.Sprintf("big.t%06d", RunListed-1) ||
		v.Waiting["big.t000000"] != "awaiting approval" || v.FailureCount != 0 {
		t.Errorf("summary = state %q over %v counts %v waiting %d (%d named, t000000: %q) awaiting %d (%d named, %v…) failures %d; want %d gates awaiting approval, %d named",
			v.State, v.Over, v.Counts, v.WaitingCount, len(v.Waiting), v.Waiting["big.t000000"], v.AwaitingCount, len(v.Awaiting), v.Awaiting[:min(2, len(v.Awaiting))], v.FailureCount, n, RunListed)
	}
}
