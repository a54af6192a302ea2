package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// The admin API's reads: from the store, so that a standby answers them.

func (a *admin) status(r *http.Request) (any, error) {
	if _, err := parseQuery(r); err != nil {
		return nil, err
	}
	out := Status{Role: "standby", Now: a.now().UTC(), Store: a.st.String()}
	if a.eng != nil {
		s := a.eng.Stats()
		if s.Leader {
			out.Role = "primary"
		}
		out.Loop = &s
	}
	if l, err := a.st.GetLease(r.Context(), ""); err == nil {
		out.Lease = &Lease{Holder: l.Holder, Epoch: l.Epoch, ExpiresAt: l.ExpiresAt, Held: a.now().Before(l.ExpiresAt)}
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return out, nil
}

// RunView is a run with its instance counts and the state they add up to.
type RunView struct {
	axtype.Run
	State  string               `json:"state"` // waiting, running, awaiting approval, success, failed
	Counts map[axtype.State]int `json:"counts"`
	// Over: every instance ended. When it is not, Waiting says what each
	// waiting instance waits on, and Awaiting names the manual gates that
	// wait for an operator.
	Over     bool              `json:"over"`
	Awaiting []string          `json:"awaiting,omitempty"`
	Waiting  map[string]string `json:"waiting,omitempty"`
	// Failures are the failures that ended the run, with their errors:
	// those not caused by an upstream of the run failing.
	Failures []engine.Failure `json:"failures,omitempty"`
	// Waiting, Awaiting and Failures name at most RunListed tasks each
	// (the first waiting ones in the order the run created them, the first
	// gates and failures by task id); the counts say how many there are.
	WaitingCount  int `json:"waiting_count,omitempty"`
	AwaitingCount int `json:"awaiting_count,omitempty"`
	FailureCount  int `json:"failure_count,omitempty"`
}

// RunListed is how many tasks a RunView names in each of Waiting,
// Awaiting and Failures, so that a run of 100,000 tasks reads in a few
// kilobytes: a run's page of instances (GET /api/v1/runs/{run}) lists
// them all.
const RunListed = 100

// Summarize sums up a run at now from counts, how many of its instances
// are in each state (store.RunStateCounts); def returns the definition of
// a task in force (nil when none). Whether it is over, and what holds it,
// is engine.RunStateOf's rule, and what each waiting instance waits on is
// judged now (engine.RunWaitReasons), never the reason stored at
// creation. It reads the RunListed instances it names, and what judging
// them needs, whatever the run's size.
func Summarize(ctx context.Context, st *store.Store, def engine.TaskDefs, run axtype.Run, counts map[axtype.State]int, now time.Time) (RunView, error) {
	v := RunView{Run: run, Counts: map[axtype.State]int{}}
	for state, n := range counts {
		if n > 0 {
			v.Counts[state] = n
		}
	}
	c := v.Counts
	var err error
	if v.Awaiting, v.AwaitingCount, err = st.AwaitingGates(ctx, run.ID, engine.ManualTasks(def, run.Pipeline), RunListed); err != nil {
		return v, err
	}
	if c[axtype.Waiting] > 0 {
		first, err := st.Instances(ctx, store.InstanceFilter{RunID: run.ID, States: []axtype.State{axtype.Waiting}, Ascending: true, Limit: RunListed})
		if err != nil {
			return v, err
		}
		tasks := make([]string, len(first))
		for i, in := range first {
			tasks[i] = in.TaskID
		}
		waits, err := engine.RunWaitReasons(ctx, st, def, run, tasks, now)
		if err != nil {
			return v, err
		}
		v.Waiting = make(map[string]string, len(first))
		for _, in := range first {
			why := cmp.Or(waits[in.TaskID], "waiting")
			if t := def.Task(in.TaskID); t != nil && t.Manual && in.ApprovedBy == "" {
				why = engine.AwaitingReason(why)
			}
			v.Waiting[in.TaskID] = why
		}
		v.WaitingCount = c[axtype.Waiting]
	}
	if c[axtype.Failed]+c[axtype.Killed] > 0 {
		prefix, suffixes := engine.PropagatedWords(run.Pipeline)
		roots, n, err := st.RootFailures(ctx, run.ID, prefix, suffixes, RunListed)
		if err != nil {
			return v, err
		}
		for _, in := range roots {
			v.Failures = append(v.Failures, engine.FailureOf(in))
		}
		v.FailureCount = n
	}
	var state string
	state, v.Over = engine.RunStateOf(engine.RunCounts{States: c, Awaiting: v.AwaitingCount})
	switch {
	case c[axtype.Running]+c[axtype.Retrying] > 0 || (c[axtype.Scheduled] > 0 && c[axtype.Success]+c[axtype.Failed] > 0):
		v.State = "running"
	case v.Over && c[axtype.Failed]+c[axtype.Killed] > 0:
		v.State = "failed"
	case v.Over:
		v.State = "success"
	case state == engine.RunAwaiting:
		v.State = engine.RunAwaiting
	default:
		v.State = "waiting"
	}
	return v, nil
}

// summarize is Summarize with the graph in force.
func (a *admin) summarize(ctx context.Context, run axtype.Run, counts map[axtype.State]int) (RunView, error) {
	return Summarize(ctx, a.st, a.graph(), run, counts, a.now())
}

// latestRun is the pipeline's run that happened last (RecentRuns' order:
// runs created ahead, inside the window, are not news until something
// moves in them), summarized.
func (a *admin) latestRun(ctx context.Context, pipeline string) (*RunView, error) {
	runs, err := RecentRuns(ctx, a.st, pipeline, a.now(), 1)
	if err != nil {
		return nil, err
	}
	for _, run := range runs {
		counts, err := a.st.RunStateCounts(ctx, []int64{run.ID})
		if err != nil {
			return nil, err
		}
		v, err := a.summarize(ctx, run, counts[run.ID])
		return &v, err
	}
	return nil, nil
}

// RecentFailureRuns is how many of a pipeline's latest runs the home page
// and ax status look through for a failure.
const RecentFailureRuns = 5

// RecentFailure returns the newest of the RecentFailureRuns runs of a
// pipeline that happened last which ended failed (nil when none did), so
// that a pipeline whose latest run succeeded after a failure does not look
// all well. def returns the definition of a task in force.
func RecentFailure(ctx context.Context, st *store.Store, def engine.TaskDefs, pipeline string, now time.Time) (*RunView, error) {
	runs, err := RecentRuns(ctx, st, pipeline, now, RecentFailureRuns)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	ids := make([]int64, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	// Only a run whose every instance ended, some failed or killed, ended
	// failed: the counts say which, and only that one is summarized.
	counts, err := st.RunStateCounts(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		c, ended := counts[r.ID], true
		for state, n := range c {
			ended = ended && (n == 0 || state.Terminal())
		}
		if !ended || c[axtype.Failed]+c[axtype.Killed] == 0 {
			continue
		}
		v, err := Summarize(ctx, st, def, r, c, now)
		if err != nil || v.State == "failed" {
			return &v, err
		}
	}
	return nil, nil
}

func (a *admin) pausedScopes(ctx context.Context) (store.PauseSet, error) {
	ps, err := a.st.Pauses(ctx)
	if err != nil {
		return store.PauseSet{}, err
	}
	return store.NewPauseSet(ps), nil
}

// pausedBy returns the pause that covers t (the store's one rule), or nil.
func pausedBy(paused store.PauseSet, t *defs.Task) *store.Pause {
	if p, ok := paused.Covering(t.ID(), t.Group, t.Pipeline); ok {
		return &p
	}
	return nil
}

func (a *admin) pipelines(r *http.Request) (any, error) {
	q, err := parseQuery(r, "name", "summary")
	if err != nil {
		return nil, err
	}
	name, summary := q.str("name"), q.bool("summary")
	if err := q.err(); err != nil {
		return nil, err
	}
	paused, err := a.pausedScopes(r.Context())
	if err != nil {
		return nil, err
	}
	out := []PipelineItem{}
	for _, p := range a.graph().Pipelines() {
		if name != "" && p.Name != name {
			continue
		}
		it := PipelineItem{Name: p.Name, Group: p.Group, File: p.File, Timezone: p.Timezone, Schedule: p.ScheduleSpec, Tasks: len(p.Tasks),
			Disabled: defs.DisabledSummary(p), TaskGroups: taskGroups(p)}
		it.Paused = pausedByPipeline(paused, p.Name)
		if summary {
			out = append(out, it)
			continue
		}
		if it.Latest, err = a.latestRun(r.Context(), p.Name); err != nil {
			return nil, err
		}
		if it.RecentFailure, err = RecentFailure(r.Context(), a.st, a.graph(), p.Name, a.now()); err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, nil
}

// TaskView is a task as the API shows it.
type TaskView struct {
	ID        string           `json:"id"`
	Name      string           `json:"name"`
	Group     string           `json:"group"`
	Priority  int              `json:"priority"`
	Executor  string           `json:"executor"`
	DependsOn []string         `json:"depends_on"`
	Cron      string           `json:"cron,omitempty"`
	Delay     string           `json:"delay,omitempty"`
	Manual    bool             `json:"manual,omitempty"`
	Timeout   string           `json:"timeout"`
	Retry     string           `json:"retry"`
	Misfire   defs.Misfire     `json:"misfire"`
	Overlap   defs.Overlap     `json:"overlap"`
	State     axtype.State     `json:"state,omitempty"` // of the latest instance
	Latest    *axtype.Instance `json:"latest_instance,omitempty"`
	NextFire  *time.Time       `json:"next_fire,omitempty"`
	Paused    *store.Pause     `json:"paused,omitempty"`
}

func viewTask(t *defs.Task) TaskView {
	v := TaskView{ID: t.ID(), Name: t.Name, Group: t.Group, Priority: t.Priority, Executor: string(t.Executor.Kind), DependsOn: []string{},
		Cron: t.Cron, Manual: t.Manual, Timeout: t.Timeout.String(), Misfire: t.Misfire, Overlap: t.Overlap,
		Retry: fmt.Sprintf("%d × %s", t.Retry.Count, t.Retry.Interval)}
	if t.Delay > 0 {
		v.Delay = t.Delay.String()
	}
	for _, d := range t.DependsOn {
		v.DependsOn = append(v.DependsOn, d.String())
	}
	return v
}

func (a *admin) pipeline(r *http.Request) (any, error) {
	p, err := a.pipelineOf(r)
	if err != nil {
		return nil, err
	}
	q, err := parseQuery(r, "summary", "task", "page", "limit")
	if err != nil {
		return nil, err
	}
	summary, prefix := q.bool("summary"), q.str("task")
	limit, cursor := q.page(pageScope("pipeline "+p.Name, q, "task"))
	if summary && (prefix != "" || q.str("page") != "" || q.str("limit") != "") {
		q.errs = append(q.errs, "summary=true lists no tasks: leave out task, page and limit")
	}
	if err := q.err(); err != nil {
		return nil, err
	}
	var page []*defs.Task
	next := ""
	if !summary {
		if page, next, err = pipelinePage(p, prefix, cursor, limit, pageScope("pipeline "+p.Name, q, "task")); err != nil {
			return nil, err
		}
	}
	ctx := r.Context()
	paused, err := a.pausedScopes(ctx)
	if err != nil {
		return nil, err
	}
	// The summary reads nothing that grows with the pipeline: not even its
	// latest run, whose summary reads every instance of it.
	var latest *RunView
	if !summary {
		if latest, err = a.latestRun(ctx, p.Name); err != nil {
			return nil, err
		}
	}
	tasks, err := a.taskViews(ctx, page, paused)
	if err != nil {
		return nil, err
	}
	edges, layers := a.pageGraph(p, page)
	return Pipeline{Name: p.Name, Group: p.Group, File: p.File, Timezone: p.Timezone, Schedule: p.ScheduleSpec,
		Disabled: defs.DisabledSummary(p), Params: p.Params, Misfire: p.Misfire, Overlap: p.Overlap, Paused: pausedByPipeline(paused, p.Name), Tasks: tasks, Edges: edges,
		Layers: layers, Latest: latest, TaskCount: len(p.Tasks), TaskGroups: taskGroups(p), NextPage: next}, nil
}

// pipelinePage is a page of p's tasks: those named with prefix, in file
// order, after cursor (the task the previous page ended at), at most
// limit; next reads the page after it ("" when it is the last).
func pipelinePage(p *defs.Pipeline, prefix, cursor string, limit int, scope string) (page []*defs.Task, next string, err error) {
	started := cursor == ""
	if !started && p.Task(cursor) == nil {
		return nil, "", errf(http.StatusBadRequest, "page: task %q, where the previous page ended, is no longer in pipeline %s (a reload removed it); leave page out to start again", cursor, p.Name)
	}
	for _, t := range p.Tasks {
		switch {
		case !started:
			started = t.Name == cursor
			continue
		case !strings.HasPrefix(t.Name, prefix):
			continue
		case len(page) == limit:
			next = pageToken(scope, page[len(page)-1].Name)
		}
		if next != "" {
			break
		}
		page = append(page, t)
	}
	return page, next, nil
}

// taskViews are the tasks of page as the pipeline's answer shows them:
// two reads for all of them, not a summary per task (a task's summary
// counts its outcomes, which grow with its history).
func (a *admin) taskViews(ctx context.Context, page []*defs.Task, paused store.PauseSet) ([]TaskView, error) {
	ids := make([]string, len(page))
	for i, t := range page {
		ids[i] = t.ID()
	}
	latestOf, err := a.st.LatestInstances(ctx, ids)
	if err != nil {
		return nil, err
	}
	nextOf, err := a.st.NextFires(ctx, ids)
	if err != nil {
		return nil, err
	}
	tasks := []TaskView{}
	for _, t := range page {
		v := viewTask(t)
		v.Paused = pausedBy(paused, t)
		if in, ok := latestOf[t.ID()]; ok {
			v.Latest, v.State = &in, in.State
		}
		if next, ok := nextOf[t.ID()]; ok {
			v.NextFire = &next // an instance due: its fire time (or retry)
		} else if a.eng != nil {
			// None due yet (a yearly task): its schedule's next fire.
			if at := a.eng.NextScheduled(t.ID()); !at.IsZero() {
				v.NextFire = &at
			}
		}
		tasks = append(tasks, v)
	}
	return tasks, nil
}

// pageGraph is the edges into the tasks of page and their layers.
func (a *admin) pageGraph(p *defs.Pipeline, page []*defs.Task) ([]Edge, [][]string) {
	edges := []Edge{}
	inPage := make(map[string]bool, len(page))
	for _, t := range page {
		inPage[t.Name] = true
		for _, d := range t.DependsOn {
			edges = append(edges, Edge{From: d.String(), To: t.Name})
		}
	}
	layers := [][]string{}
	if len(page) > 0 {
		for _, l := range a.graph().Layers(p.Name) {
			var names []string
			for _, t := range l {
				if inPage[t.Name] {
					names = append(names, t.Name)
				}
			}
			if len(names) > 0 {
				layers = append(layers, names)
			}
		}
	}
	return edges, layers
}

func pausedByPipeline(paused store.PauseSet, name string) *store.Pause {
	if p, ok := paused.Get(store.ScopePipeline, name); ok {
		return &p
	}
	return nil
}

func (a *admin) runs(r *http.Request) (any, error) {
	p, err := a.pipelineOf(r)
	if err != nil {
		return nil, err
	}
	q, err := parseQuery(r, "state", "from", "to", "before", "recent", "limit")
	if err != nil {
		return nil, err
	}
	limit := q.int("limit", 50, 1, 1000)
	f := store.RunFilter{Pipeline: p.Name, From: q.time("from"), To: q.time("to"), Before: q.int("before", 0, 1, math.MaxInt64)}
	recent := q.bool("recent")
	state := q.str("state")
	if state != "" && !slices.Contains([]string{"waiting", "running", "awaiting approval", "success", "failed"}, state) {
		q.errs = append(q.errs, fmt.Sprintf("state=%q: use waiting, running, awaiting approval, success or failed", state))
	}
	if recent && (f.Before != 0 || !f.From.IsZero() || !f.To.IsZero()) {
		q.errs = append(q.errs, "recent=true is the first page as ax status shows it: leave out before, from and to")
	}
	if err := q.err(); err != nil {
		return nil, err
	}
	// The time bounds and the cursor are in the query (indexed); a state
	// filter looks at up to 20 times the page of runs, newest first.
	f.Limit = int(limit)
	if state != "" {
		f.Limit = min(20*int(limit), 5000)
	}
	var runs []axtype.Run
	if recent {
		runs, err = ListedRuns(r.Context(), a.st, p.Name, a.now(), f.Limit)
	} else {
		runs, err = a.st.RunsPage(r.Context(), f)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, errf(http.StatusNotFound, "before=%d: no run %d of pipeline %s (pass the id of the last run of the previous page)", f.Before, f.Before, p.Name)
	}
	if err != nil {
		return nil, err
	}
	// The counts of the runs in one read per page of runs, not one per run.
	out := []RunView{}
	for start := 0; start < len(runs) && len(out) < int(limit); start += int(limit) {
		page := runs[start:min(start+int(limit), len(runs))]
		ids := make([]int64, len(page))
		for i, run := range page {
			ids[i] = run.ID
		}
		counts, err := a.st.RunStateCounts(r.Context(), ids)
		if err != nil {
			return nil, err
		}
		for _, run := range page {
			v, err := a.summarize(r.Context(), run, counts[run.ID])
			if err != nil {
				return nil, err
			}
			if state != "" && v.State != state {
				continue
			}
			if out = append(out, v); len(out) >= int(limit) {
				break
			}
		}
	}
	return out, nil
}

// RecentRuns is the first page of a pipeline's runs as ax status shows it:
// the runs created ahead (inside the window) in which something already
// moved, then the newest limit runs whose logical time has come, by when
// they happened (Happened): a run triggered now for an older date comes
// first. At most three indexed reads, whatever the store holds.
func RecentRuns(ctx context.Context, st *store.Store, pipeline string, now time.Time, limit int) ([]axtype.Run, error) {
	ahead, err := st.RunsMovedAhead(ctx, pipeline, now)
	if err != nil {
		return nil, err
	}

	byLogical, err := st.RunsPage(ctx, store.RunFilter{Pipeline: pipeline, To: now, Limit: limit})
	if err != nil {
		return nil, err
	}
	// A run not among the newest by logical time has an older logical time
	// than the last of them: it is among the newest by when it happened only
	// if it was created after that.
	past := byLogical
	var byCreation []axtype.Run
	if len(byLogical) == limit {
		if byCreation, err = st.RunsCreated(ctx, pipeline, byLogical[limit-1].LogicalTime, now, limit); err != nil {
			return nil, err
		}
	}
	for _, r := range byCreation {
		if !slices.ContainsFunc(past, func(p axtype.Run) bool { return p.ID == r.ID }) {
			past = append(past, r)
		}
	}
	slices.SortFunc(past, func(x, y axtype.Run) int {
		if c := Happened(y).Compare(Happened(x)); c != 0 {
			return c
		}
		return cmp.Compare(y.ID, x.ID)
	})
	all := append(ahead, past...)
	return all[:min(len(all), limit)], nil
}

// ListedRuns are the runs ax status (and the first page of a pipeline's
// runs) lists: the operator's runs deferred to a time to come (up to
// limit, the soonest first), then RecentRuns.
func ListedRuns(ctx context.Context, st *store.Store, pipeline string, now time.Time, limit int) ([]axtype.Run, error) {
	deferred, err := st.RunsDeferred(ctx, pipeline, now, limit)
	if err != nil {
		return nil, err
	}
	recent, err := RecentRuns(ctx, st, pipeline, now, limit)
	if err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(deferred, func(d axtype.Run) bool {
		return slices.ContainsFunc(recent, func(r axtype.Run) bool { return r.ID == d.ID })
	})
	return append(out, recent...), nil
}

// Happened is when a run happened: its logical time, or when it was created
// if that is later (a run triggered for a past date).
func Happened(r axtype.Run) time.Time {
	if r.CreatedAt.After(r.LogicalTime) {
		return r.CreatedAt
	}
	return r.LogicalTime
}

func (a *admin) run(r *http.Request) (any, error) {
	id, err := pathID(r, "run")
	if err != nil {
		return nil, err
	}
	run, err := a.st.Run(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errf(http.StatusNotFound, "no run %d", id)
	}
	if err != nil {
		return nil, err
	}
	q, err := parseQuery(r, "state", "page", "limit")
	if err != nil {
		return nil, err
	}
	scope := pageScope(fmt.Sprintf("run %d", id), q, "state")
	limit, cursor := q.page(scope)
	states := q.states("state")
	if err := q.err(); err != nil {
		return nil, err
	}
	counts, err := a.st.RunStateCounts(r.Context(), []int64{id})
	if err != nil {
		return nil, err
	}
	v, err := a.summarize(r.Context(), run, counts[id])
	if err != nil {
		return nil, err
	}
	// The page, by task (the store's index of a run's instances), one more
	// than asked to know whether another page follows.
	ins, err := a.st.Instances(r.Context(), store.InstanceFilter{RunID: id, States: states, ByTask: true, AfterTask: cursor, Limit: limit + 1})
	if err != nil {
		return nil, err
	}
	out := RunDetail{Run: v, Instances: ins[:min(len(ins), limit)]}
	if len(ins) > limit {
		out.NextPage = pageToken(scope, ins[limit-1].TaskID)
	}
	// A waiting instance's reason is what it waits on now, judged for the
	// page's waiting instances.
	var waiting []string
	for _, in := range out.Instances {
		if in.State == axtype.Waiting {
			waiting = append(waiting, in.TaskID)
		}
	}
	waits, err := engine.RunWaitReasons(r.Context(), a.st, a.graph(), run, waiting, a.now())
	if err != nil {
		return nil, err
	}
	for i := range out.Instances {
		if in := &out.Instances[i]; in.State == axtype.Waiting {
			in.Reason = cmp.Or(waits[in.TaskID], "waiting")
			if t := a.graph().Task(in.TaskID); t != nil && t.Manual && in.ApprovedBy == "" {
				in.Reason = engine.AwaitingReason(in.Reason)
			}
		}
	}
	return out, nil
}

func (a *admin) task(r *http.Request) (any, error) {
	t, err := a.taskOf(r)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	v := viewTask(t)
	paused, err := a.pausedScopes(ctx)
	if err != nil {
		return nil, err
	}
	v.Paused = pausedBy(paused, t)
	sum, err := a.st.TaskSummary(ctx, t.ID())
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if sum.Last != nil {
		v.Latest, v.State = sum.Last, sum.Last.State
	}
	out := TaskDetail{Task: v, Summary: sum, NextFires: []time.Time{}, LastFires: []engine.Fire{}, Runs: t.Executor}
	switch last, err := a.st.LatestAttempt(ctx, t.ID()); {
	case err == nil:
		out.LastAttempt = &last
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	if a.eng != nil {
		x, err := a.eng.Explain(ctx, t.ID())
		if err != nil {
			return nil, err
		}
		out.NextFires, out.LastFires = x.NextFires, x.LastFires
	}
	return out, nil
}

func (a *admin) explain(r *http.Request) (any, error) {
	q, err := parseQuery(r, "utc")
	if err != nil {
		return nil, err
	}
	utc := q.bool("utc")
	if err := q.err(); err != nil {
		return nil, err
	}
	var id string
	if t, err := a.taskOf(r); err == nil {
		id = t.ID()
	} else {
		// A task a reload removed: the engine says what became of it (and
		// of an instance of it still running) from its stored definition.
		removed := r.PathValue("pipeline") + "." + r.PathValue("task")
		ts, serr := a.st.Tasks(r.Context(), store.TaskFilter{ID: removed, IncludeRemoved: true})
		if serr != nil || len(ts) != 1 || !ts[0].Removed {
			return nil, err
		}
		id = removed
	}
	if a.eng == nil {
		return nil, errf(http.StatusServiceUnavailable, "no scheduler runs in this process")
	}
	if utc {
		return a.eng.ExplainUTC(r.Context(), id)
	}
	return a.eng.Explain(r.Context(), id)
}

func (a *admin) instances(r *http.Request) (any, error) {
	q, err := parseQuery(r, "pipeline", "task", "run", "state", "from", "to", "before", "ran", "order", "limit")
	if err != nil {
		return nil, err
	}
	f := store.InstanceFilter{Pipeline: q.str("pipeline"), TaskID: q.str("task"), RunID: q.int("run", 0, 1, 1<<62), States: q.states("state"),
		LogicalFrom: q.time("from"), LogicalTo: q.time("to"), BeforeID: q.int("before", 0, 1, 1<<62), Ran: q.bool("ran"), Limit: int(q.int("limit", 100, 1, 1000))}
	switch o := q.str("order"); {
	case o == "" || o == "id":
	case o == "started" && f.TaskID != "" && f.BeforeID == 0:
		f.ByStarted = true
	case o == "started":
		q.errs = append(q.errs, "order=started: give task= and no before= (the latest attempts of one task, newest started first)")
	default:
		q.errs = append(q.errs, fmt.Sprintf("order=%q: give id (newest first, the default) or started (newest attempt first, with task=)", o))
	}
	if err := a.checkPipelineFilter(r.Context(), q, f.Pipeline); err != nil {
		return nil, err
	}
	if err := a.checkTaskFilter(r.Context(), q, f.TaskID); err != nil {
		return nil, err
	}
	if err := q.err(); err != nil {
		return nil, err
	}
	ins, err := a.st.Instances(r.Context(), f)
	if ins == nil {
		ins = []axtype.Instance{}
	}
	return ins, err
}

// logFilter parses the paging and filters of history and actions.
func (a *admin) logFilter(r *http.Request, extra ...string) (store.LogFilter, *query, error) {
	q, err := parseQuery(r, append([]string{"task", "instance", "after", "before", "newest", "limit"}, extra...)...)
	if err != nil {
		return store.LogFilter{}, nil, err
	}
	f := store.LogFilter{TaskID: q.str("task"), InstanceID: q.int("instance", 0, 1, 1<<62), AfterID: q.int("after", 0, 1, 1<<62),
		BeforeID: q.int("before", 0, 1, 1<<62), Newest: q.bool("newest"), Limit: int(q.int("limit", 100, 1, 1000))}
	if err := a.checkTaskFilter(r.Context(), q, f.TaskID); err != nil {
		return store.LogFilter{}, nil, err
	}
	return f, q, nil
}

func (a *admin) history(r *http.Request) (any, error) {
	f, q, err := a.logFilter(r)
	if err != nil {
		return nil, err
	}
	if err := q.err(); err != nil {
		return nil, err
	}
	h, err := a.st.History(r.Context(), f)
	if h == nil {
		h = []store.HistoryRow{}
	}
	return h, err
}

// actionsBy are the values of the action log's by= filter: whose rows.
var actionsBy = []string{"operator", "scheduler"}

func (a *admin) actions(r *http.Request) (any, error) {
	f, q, err := a.logFilter(r, "pipeline", "action", "actor", "by")
	if err != nil {
		return nil, err
	}
	f.Pipeline, f.Action, f.Actor = q.str("pipeline"), q.str("action"), q.str("actor")
	if err := a.checkPipelineFilter(r.Context(), q, f.Pipeline); err != nil {
		return nil, err
	}
	if f.Action != "" && !actionKind.MatchString(f.Action) {
		q.errs = append(q.errs, fmt.Sprintf("action=%q: an action is a word of lowercase letters and underscores (pause, trigger, breaker_open)", f.Action))
	}
	if f.Actor != "" && (len(f.Actor) > 128 || strings.ContainsFunc(f.Actor, unicode.IsControl)) {
		q.errs = append(q.errs, fmt.Sprintf("actor=%.40q: an actor is at most 128 printable characters (operator:api, cli:ann)", f.Actor))
	}
	// The scheduler writes its rows as engine.Actor; everyone else is an operator.
	switch by := q.str("by"); by {
	case "":
	case "operator":
		f.NotActor = engine.Actor
	case "scheduler":
		if f.Actor != "" && f.Actor != engine.Actor {
			q.errs = append(q.errs, fmt.Sprintf("by=scheduler with actor=%q: the scheduler's rows are all of actor %q", f.Actor, engine.Actor))
		}
		f.Actor = engine.Actor
	default:
		q.errs = append(q.errs, fmt.Sprintf("by=%q: give %s%s", by, strings.Join(actionsBy, " or "), defs.DidYouMean(by, actionsBy)))
	}
	if err := q.err(); err != nil {
		return nil, err
	}
	acts, err := a.st.Actions(r.Context(), f)
	if acts == nil {
		acts = []store.Action{}
	}
	return acts, err
}

// actionKind is the form of an action's name.
var actionKind = regexp.MustCompile(`^[a-z][a-z_]{0,63}$`)

func (a *admin) executors(r *http.Request) (any, error) {
	if _, err := parseQuery(r); err != nil {
		return nil, err
	}
	exs, err := a.st.Executors(r.Context(), "")
	if err != nil {
		return nil, err
	}
	out := []ExecutorView{}
	now := a.now()
	for _, x := range exs {
		v := ExecutorView{Executor: x, Live: true, Pool: a.pools.get(x.Address)}
		if silent := now.Sub(x.LastHeartbeat); silent > engine.ExecutorLiveness {
			v.Live = false
			v.Excluded = fmt.Sprintf("no heartbeat for %s (more than %s): it gets no new work until it sends one", silent.Round(time.Second), engine.ExecutorLiveness)
		}
		out = append(out, v)
	}
	return out, nil
}

func (a *admin) limits(r *http.Request) (any, error) {
	if _, err := parseQuery(r); err != nil {
		return nil, err
	}
	if a.eng == nil || !a.eng.Stats().Leader {
		l, _, err := engine.StoredLimits(r.Context(), a.st)
		if err != nil {
			return nil, err
		}
		return LimitsView{Limits: l, Source: "store (this process is a standby: the primary may run with its flags' limits if none were set at run time)"}, nil
	}
	return LimitsView{Limits: a.eng.Stats().Limits, Source: "primary"}, nil
}

// BackfillView is a backfill record with its spec decoded and its progress.
type BackfillView struct {
	store.Backfill
	Spec      json.RawMessage `json:"spec"`
	Instances store.Progress  `json:"instances"`
	// Runs are the first backfillRunsShown runs it created (earliest
	// logical time first), for links; total_runs says how many it plans.
	Runs []BackfillRun `json:"runs"`
}

// BackfillRun is one run of a backfill, as its listing links to it.
type BackfillRun struct {
	ID          int64     `json:"id"`
	LogicalTime time.Time `json:"logical_time"`
}

// backfillRunsShown bounds the runs listed with each backfill.
const backfillRunsShown = 50

func (a *admin) viewBackfill(ctx context.Context, b store.Backfill) (BackfillView, error) {
	v := BackfillView{Backfill: b, Spec: json.RawMessage(b.Spec), Runs: []BackfillRun{}}
	var err error
	v.Instances, err = a.st.BackfillProgress(ctx, b.ID, ManualTasks(a.graph(), b.Pipeline))
	if err != nil {
		return v, err
	}
	runs, err := a.st.BackfillRunsFirst(ctx, b.ID, backfillRunsShown)
	for _, r := range runs {
		v.Runs = append(v.Runs, BackfillRun{ID: r.ID, LogicalTime: r.LogicalTime})
	}
	return v, err
}

// ManualTasks lists the manual gates of a pipeline, for progress counts.
func ManualTasks(g *dag.Graph, pipeline string) []string {
	var out []string
	if p := g.Pipeline(pipeline); p != nil {
		for _, t := range p.Tasks {
			if t.Manual {
				out = append(out, t.ID())
			}
		}
	}
	return out
}

func (a *admin) backfills(r *http.Request) (any, error) {
	q, err := parseQuery(r, "before", "limit")
	if err != nil {
		return nil, err
	}
	limit, before := q.int("limit", 50, 1, 1000), q.int("before", 0, 1, math.MaxInt64)
	if err := q.err(); err != nil {
		return nil, err
	}
	bs, err := a.st.BackfillsPage(r.Context(), before, int(limit)) // newest first
	if err != nil {
		return nil, err
	}
	out := []BackfillView{}
	for _, b := range bs {
		v, err := a.viewBackfill(r.Context(), b)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (a *admin) backfill(r *http.Request) (any, error) {
	b, err := a.backfillOf(r)
	if err != nil {
		return nil, err
	}
	return a.viewBackfill(r.Context(), b)
}
