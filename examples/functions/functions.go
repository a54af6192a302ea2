// Package functions holds the Go functions that the example pipelines call
// by name (`function: build_report`). The stock ax binary registers them so
// that `make run` works out of the box; a team embeds ax as a library and
// registers its own functions the same way.
package functions

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-sched/ax/runner"
)

// Register adds the example functions to f.
func Register(f *runner.Functions) error {
	for name, fn := range map[string]runner.Func{
		"noop":           noop,
		"fetch_invoices": work(200 * time.Millisecond),
		"settle":         work(300 * time.Millisecond),
		"build_report":   buildReport,
		"publish":        work(100 * time.Millisecond),
		"load_warehouse": work(400 * time.Millisecond),
	} {
		if err := f.Register(name, fn); err != nil {
			return err
		}
	}
	return nil
}

func noop(context.Context, runner.Attempt) error { return nil }

// buildReport stands in for building a day's report; it gives its
// downstream the report's path as the output `report`
// ({{ .Upstream.report.report }}).
func buildReport(ctx context.Context, a runner.Attempt) error {
	if err := work(500*time.Millisecond)(ctx, a); err != nil {
		return err
	}
	return a.Output("report", "reports/orders_"+a.LogicalTime.Format("20060102")+".html")
}

// work stands in for real work of about d that stops when asked to.
func work(d time.Duration) runner.Func {
	return func(ctx context.Context, a runner.Attempt) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%s stopped for %s: %w", a.Task, a.LogicalTime.Format(time.RFC3339), context.Cause(ctx))
		}
	}
}
