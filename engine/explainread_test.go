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

// TestExplainReadsWhatItJudges: explaining a waiting task of a run of
// 2,000 tasks reads the task's instance and its upstreams' in the run, not
// every instance of the run.
func TestExplainReadsWhatItJudges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 2000
		var src strings.Builder
		src.WriteString("pipeline: big\ntimezone: UTC\nschedule: \"0 0 1 1 *\"\ndefaults: {function: record}\ntasks:\n")
		src.WriteString("  - {name: gate, manual: true}\n")
		for i := range n - 1 {
			fmt.Fprintf(&src, "  - {name: t%04d, depends_on: [gate]}\n", i)
		}
		e := setup(t, Config{}, nil, src.String())
		if _, err := e.do(Trigger{Target: "big"}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Second)
		if ins := e.instances(store.InstanceFilter{Pipeline: "big", States: []axtype.State{axtype.Waiting}, Limit: n + 1}); len(ins) != n {
			t.Fatalf("%d waiting instances, want %d", len(ins), n)
		}
		synctest.Wait()
		read0 := e.st.RowsRead()
		x, err := e.eng.Explain(context.Background(), "big.t0001")
		read := e.st.RowsRead() - read0
		if err != nil || !strings.Contains(x.Verdict, "waiting for upstream big.gate") {
			t.Fatalf("explain big.t0001: verdict %q, %v; want it waiting for upstream big.gate", x.Verdict, err)
		}
		if read > 50 {
			t.Errorf("explaining big.t0001 read %d rows, want at most 50 (its instance and its upstream's, not the run's %d)", read, n)
		}
		e.stop()
	})
}
