// Package direct is the --store side of the ax client commands: it answers
// what they ask of the scheduler (the methods of api.Client they use) from
// a store directly, without a server, in the API's own types, so that each
// command has one implementation whichever way it reaches the scheduler.
//
// It reads, and it queues requests in the store for whichever scheduler is
// primary on it (waiting for their outcome); it never changes scheduling
// state itself. A Store is used by one command: not safe for concurrent use.
package direct

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// DefaultPath is the store the commands use when --store names none.
const DefaultPath = store.DefaultPath

// Store answers the client commands from a store.
type Store struct {
	st    *store.Store
	wait  time.Duration // how long Apply waits for the primary to apply a request
	actor string        // who Apply's requests are by
	tasks []store.Task  // read once
}

// Open opens the existing store at target (a SQLite path or a MySQL URL);
// Apply waits up to wait for the primary and records actor.
func Open(ctx context.Context, target string, wait time.Duration, actor string) (*Store, error) {
	st, err := store.Open(ctx, target, store.Options{Existing: true})
	if err != nil {
		return nil, err
	}
	return &Store{st: st, wait: wait, actor: actor}, nil
}

// Close closes the store.
func (s *Store) Close() error { return s.st.Close() }

// Where names the store.
func (s *Store) Where() string { return s.st.String() }

// Zones reads the pipelines' zones from their stored definitions.
func (s *Store) Zones(ctx context.Context, utc bool) *api.Zones {
	return api.StoreZones(ctx, s.st, utc)
}

// Status is the lease of the store (nil when no scheduler ever started on
// it); no process answers, so it has no role.
func (s *Store) Status(ctx context.Context) (api.Status, json.RawMessage, error) {
	l, err := s.st.GetLease(ctx, "")
	if errors.Is(err, store.ErrNotFound) {
		return api.Status{}, nil, nil
	}
	if err != nil {
		return api.Status{}, nil, err
	}
	return api.Status{Lease: &api.Lease{Epoch: l.Epoch, ExpiresAt: l.ExpiresAt, Held: !time.Now().After(l.ExpiresAt), Holder: l.Holder}}, nil, nil
}

// allTasks is every task the scheduler synced into the store.
func (s *Store) allTasks(ctx context.Context) ([]store.Task, error) {
	if s.tasks != nil {
		return s.tasks, nil
	}
	ts, err := s.st.Tasks(ctx, store.TaskFilter{})
	s.tasks = ts
	return ts, err
}

// defs are the stored definitions of the tasks, by id.
func (s *Store) defs(ctx context.Context) (engine.DefMap, error) {
	ts, err := s.allTasks(ctx)
	out := engine.DefMap{}
	for _, t := range ts {
		var d defs.Task
		if json.Unmarshal(t.Definition, &d) == nil {
			d.Name, d.Pipeline = strings.TrimPrefix(t.ID, t.Pipeline+"."), t.Pipeline
			out[t.ID] = &d
		}
	}
	return out, err
}

// names lists of the stored tasks the names scope gives (task ids,
// pipelines or groups), in order, without repeats next to each other.
func (s *Store) names(ctx context.Context, scope axtype.PauseScope) ([]string, error) {
	ts, err := s.allTasks(ctx)
	var out []string
	for _, t := range ts {
		switch scope {
		case axtype.ScopeGroup:
			out = append(out, t.Group)
		case axtype.ScopePipeline:
			out = append(out, t.Pipeline)
		default:
			out = append(out, t.ID)
		}
	}
	return slices.Compact(out), err
}

// checkName refuses an unknown task, pipeline or group (scope, name), with
// a suggestion.
func (s *Store) checkName(ctx context.Context, scope axtype.PauseScope, name string) error {
	names, err := s.names(ctx, scope)
	if err != nil || slices.Contains(names, name) {
		return err
	}
	kind := cmp.Or(string(scope), "task")
	if len(names) == 0 {
		return fmt.Errorf("no %s %q: the store has no pipelines yet (has ax server run on it?)", kind, name)
	}
	return fmt.Errorf("no %s %q%s", kind, name, defs.DidYouMean(name, names))
}

// PipelineSummary is the pipeline with its zone; an unknown one is refused
// with a suggestion.
func (s *Store) PipelineSummary(ctx context.Context, name string) (api.Pipeline, error) {
	names, err := s.names(ctx, axtype.ScopePipeline)
	if err != nil {
		return api.Pipeline{}, err
	}
	if !slices.Contains(names, name) {
		return api.Pipeline{}, fmt.Errorf("no pipeline %q in the store%s", name, defs.DidYouMean(name, names))
	}
	return api.Pipeline{Name: name}, nil
}

// Pipelines lists the stored pipelines (name alone, when set) with their
// task counts and the recent run that ended failed.
func (s *Store) Pipelines(ctx context.Context, name string) ([]api.PipelineItem, error) {
	ts, err := s.allTasks(ctx)
	if err != nil {
		return nil, err
	}
	def, err := s.defs(ctx)
	if err != nil {
		return nil, err
	}
	var out []api.PipelineItem
	for _, t := range ts {
		if name != "" && t.Pipeline != name {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Name == t.Pipeline {
			out[n-1].Tasks++
			continue
		}
		out = append(out, api.PipelineItem{Name: t.Pipeline, Tasks: 1})
	}
	for i := range out {
		if out[i].RecentFailure, err = api.RecentFailure(ctx, s.st, def, out[i].Name, time.Now()); err != nil {
			return nil, err
		}
		if out[i].Timezone, err = api.StoredZone(ctx, s.st, out[i].Name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RecentRuns are a pipeline's first limit runs as ax status shows them.
func (s *Store) RecentRuns(ctx context.Context, pipeline string, limit int) ([]api.RunView, error) {
	def, err := s.defs(ctx)
	if err != nil {
		return nil, err
	}
	runs, err := api.ListedRuns(ctx, s.st, pipeline, time.Now(), limit)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	counts, err := s.st.RunStateCounts(ctx, ids)
	if err != nil {
		return nil, err
	}
	var views []api.RunView
	for _, r := range runs {
		v, err := api.Summarize(ctx, s.st, def, r, counts[r.ID], time.Now())
		if err != nil {
			return nil, err
		}
		views = append(views, v)
	}
	return views, nil
}

// Instances are a task's latest instances, newest first.
func (s *Store) Instances(ctx context.Context, q api.InstanceQuery) ([]axtype.Instance, error) {
	ts, err := s.st.Tasks(ctx, store.TaskFilter{ID: q.Task})
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("no task %q in the store", q.Task)
	}
	return s.st.Instances(ctx, store.InstanceFilter{TaskID: q.Task, Limit: q.Limit})
}

// History is a task's newest limit transitions, newest first; an unknown
// task is refused with a suggestion.
func (s *Store) History(ctx context.Context, task string, limit int) ([]axtype.HistoryRow, error) {
	if err := s.checkName(ctx, axtype.ScopeTask, task); err != nil {
		return nil, err
	}
	return s.st.History(ctx, store.LogFilter{TaskID: task, Newest: true, Limit: limit})
}

// Actions are a task's newest limit actions, newest first.
func (s *Store) Actions(ctx context.Context, task string, limit int) ([]axtype.Action, error) {
	return s.st.Actions(ctx, store.LogFilter{TaskID: task, Newest: true, Limit: limit})
}

// PruneDry counts what retention would delete now, keeping runs that
// ended within retain (such as 30d; "": api.DefaultRetain).
func (s *Store) PruneDry(ctx context.Context, retain string) (api.PruneReport, error) {
	d := api.DefaultRetain
	if retain != "" {
		var err error
		if d, err = api.ParseRetain(retain); err != nil {
			return api.PruneReport{}, err
		}
	}
	now := time.Now()
	res, err := s.st.PruneDryRun(ctx, engine.PruneSelection(now, d))
	return api.PruneReport{DryRun: true, Retain: d.String(), Before: now.Add(-d).UTC(), Pruned: res}, err
}

// PruneNow is refused: retention passes are the primary's.
func (s *Store) PruneNow(context.Context) (api.PruneReport, error) {
	return api.PruneReport{}, &api.UsageError{Msg: "a store read directly only counts what retention would prune: the primary prunes"}
}

// Backfills lists the backfills, newest first, with their progress.
func (s *Store) Backfills(ctx context.Context) ([]api.BackfillView, json.RawMessage, error) {
	bs, err := s.st.Backfills(ctx, 0)
	if err != nil {
		return nil, nil, err
	}
	out := make([]api.BackfillView, len(bs))
	for i, b := range bs {
		out[i] = api.BackfillView{Backfill: b, Spec: json.RawMessage(b.Spec)}
	}
	return out, nil, nil
}

// Backfill is one backfill; an unknown one is refused.
func (s *Store) Backfill(ctx context.Context, id int64) (api.BackfillView, json.RawMessage, error) {
	bs, err := s.st.Backfills(ctx, id)
	if err == nil && len(bs) == 0 {
		err = fmt.Errorf("no backfill %d (ax backfill list shows them)", id)
	}
	if err != nil {
		return api.BackfillView{}, nil, err
	}
	return api.BackfillView{Backfill: bs[0], Spec: json.RawMessage(bs[0].Spec)}, nil, nil
}
