package cli

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/direct"
	"github.com/ax-sched/ax/engine"
)

// Scheduler is what the client commands read and ask of the scheduler: a
// running server through its API (*api.Client), or, with --store, a store
// read directly (*direct.Store). Both answer in the API's types, so each
// command has one implementation. A raw JSON answer is nil from a store:
// --json prints only what a server answered.
type Scheduler interface {
	Where() string
	Zones(ctx context.Context, utc bool) *api.Zones
	Status(ctx context.Context) (api.Status, json.RawMessage, error)
	PipelineSummary(ctx context.Context, name string) (api.Pipeline, error)
	Pipelines(ctx context.Context, name string) ([]api.PipelineItem, error)
	RecentRuns(ctx context.Context, pipeline string, limit int) ([]api.RunView, error)
	Instances(ctx context.Context, q api.InstanceQuery) ([]axtype.Instance, error)
	History(ctx context.Context, task string, limit int) ([]axtype.HistoryRow, error)
	Actions(ctx context.Context, task string, limit int) ([]axtype.Action, error)
	PruneDry(ctx context.Context, retain string) (api.PruneReport, error)
	PruneNow(ctx context.Context) (api.PruneReport, error)
	Backfills(ctx context.Context) ([]api.BackfillView, json.RawMessage, error)
	Backfill(ctx context.Context, id int64) (api.BackfillView, json.RawMessage, error)
	Apply(ctx context.Context, req engine.Request, at, reason string) (api.Result, json.RawMessage, error)
}

var (
	_ Scheduler = (*api.Client)(nil)
	_ Scheduler = (*direct.Store)(nil)
)

// Target says how a command reaches the scheduler: the API of Server
// (APIOptions), or the store at Store when ViaStore, whose requests wait
// up to Wait for its primary.
type Target struct {
	ViaStore bool
	Store    string
	Wait     time.Duration
}

// Connect returns the scheduler at t (f: the API's flags) and what
// releases it.
func Connect(ctx context.Context, f APIOptions, t Target) (Scheduler, func(), error) {
	if !t.ViaStore {
		c, err := NewAPIClient(f.Server)
		return c, func() {}, err
	}
	s, err := direct.Open(ctx, t.Store, t.Wait, Actor())
	if err != nil {
		return nil, nil, Fail(err)
	}
	return s, func() { s.Close() }, nil
}

// asked is err as a command's error: a request refused before it went out
// is a usage error; any other is a failure.
func asked(err error) error {
	var u *api.UsageError
	var ee *ExitError
	switch {
	case err == nil || errors.As(err, &ee):
		return err
	case errors.As(err, &u):
		return Usage("%v", err)
	}
	return Fail(err)
}
