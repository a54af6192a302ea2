package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store/storetest"
)

// BenchmarkTaskOutput: a run of 1,000 function instances that each print
// 16 KiB (160 lines of 100 bytes) to their output, end to end through a real
// engine that stores it (compressed, in chunks, with an attempt record),
// against the same run printing nothing, on the same database. Figures:
// output stored per second (MB/s) and what output costs per attempt (ms).
func BenchmarkTaskOutput(b *testing.B) {
	const n, lines = 1000, 160
	line := strings.Repeat("x", 90) + " row 0042\n" // 100 bytes, compressible as real logs are
	printer := func(ctx context.Context, a runner.Attempt) error {
		w := runner.OutputFrom(ctx).Writer(runner.StreamStdout)
		for range lines {
			w.Write([]byte(line))
		}
		return nil
	}
	silent := func(context.Context, runner.Attempt) error { return nil }
	for name, open := range storetest.All() {
		b.Run(name, func(b *testing.B) {
			st := open(b)
			g := benchGraph(b, n)
			var with, without time.Duration
			runs := 0
			for b.Loop() {
				at := time.Now().Add(-time.Second).Add(-time.Duration(runs) * time.Hour)
				without += runOnceWith(b, st, g, silent, at)
				with += runOnceWith(b, st, g, printer, at.Add(-30*time.Minute))
				runs++
			}
			bytes := float64(runs * n * lines * len(line))
			b.ReportMetric(bytes/with.Seconds()/1e6, "MB/s")
			b.ReportMetric(float64(with-without)/float64(runs*n)/1e6, "ms/attempt")
			b.ReportMetric(float64(without)/float64(runs*n)/1e6, "plain-ms/attempt")
			b.ReportMetric(with.Seconds()/without.Seconds(), "x-plain")
		})
	}
}
