// Package teamfunctions is an example of a team's own Go functions, built
// into its own ax binary (docs/functions.md): a file in the binary's main
// package hands Register to taskexec.AddFunctions, and from then on the
// binary's pipelines may name them (`function: count_rows`), `ax validate`
// knows them, and ax server and ax run run them. cmd/ax/teamfunctions.go
// does so when ax is built with -tags teamfunctions.
package teamfunctions

import (
	"context"
	"fmt"
	"strconv"

	"github.com/ax-sched/ax/runner"
)

// Register adds the team's functions to f.
func Register(f *runner.Functions) error {
	return f.Register("count_rows", countRows)
}

// countRows stands in for a team's work: it reads its params, logs what it
// does (its lines are the attempt's log, which `ax logs` shows) and fails
// on a bad param without retries.
func countRows(ctx context.Context, a runner.Attempt) error {
	table, _ := a.Params["table"].(string)
	if table == "" {
		return fmt.Errorf("count_rows: params.table is required: %w", runner.ErrPermanent)
	}
	rows := len(table) * 1000 // the real function would ask the warehouse
	runner.Logger(ctx).Info("counted", "table", table, "rows", strconv.Itoa(rows), "logical_time", a.LogicalTime)
	return nil
}
