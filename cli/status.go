package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

func WriteStatus(ctx context.Context, w io.Writer, st *store.Store, only []string, limit int, zs *api.Zones) error {
	var b strings.Builder
	if l, err := st.GetLease(ctx, ""); err == nil {
		state := "held until"
		if time.Now().After(l.ExpiresAt) {
			state = "released or expired at"
		}
		fmt.Fprintf(&b, "scheduler: %s (epoch %d, lease %s %s)\n", l.Holder, l.Epoch, state, api.Stamp(l.ExpiresAt, time.UTC))
	} else if errors.Is(err, store.ErrNotFound) {
		b.WriteString("scheduler: never started on this store\n")
	} else {
		return err
	}
	tasks, err := st.Tasks(ctx, store.TaskFilter{})
	if err != nil {
		return err
	}
	pipelines := map[string]int{}
	var names []string
	for _, t := range tasks {
		if pipelines[t.Pipeline] == 0 {
			names = append(names, t.Pipeline)
		}
		pipelines[t.Pipeline]++
	}
	if len(only) == 1 {
		if pipelines[only[0]] == 0 {
			return Fail(fmt.Errorf("no pipeline %q in the store%s", only[0], defs.DidYouMean(only[0], names)))
		}
		names = only
	}
	stored := map[string]*defs.Task{}
	for _, t := range tasks {
		var d defs.Task
		if json.Unmarshal(t.Definition, &d) == nil {
			d.Name, d.Pipeline = strings.TrimPrefix(t.ID, t.Pipeline+"."), t.Pipeline
			stored[t.ID] = &d
		}
	}
	def := engine.DefMap(stored)
	for _, p := range names {
		fmt.Fprintf(&b, "\npipeline %s (%d tasks)\n", p, pipelines[p])
		runs, err := api.RecentRuns(ctx, st, p, time.Now(), limit)
		if err != nil {
			return err
		}
		ids := make([]int64, len(runs))
		for i, r := range runs {
			ids[i] = r.ID
		}
		counts, err := st.RunStateCounts(ctx, ids)
		if err != nil {
			return err
		}
		var views []api.RunView
		for _, r := range runs {
			v, err := api.Summarize(ctx, st, def, r, counts[r.ID], time.Now())
			if err != nil {
				return err
			}
			views = append(views, v)
		}
		loc, err := zs.Of(p)
		if err != nil {
			return err
		}
		failure, err := api.RecentFailure(ctx, st, def, p, time.Now())
		if err != nil {
			return err
		}
		WriteRuns(&b, views, failure, limit, loc)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// WriteRuns prints up to limit runs (newest first by when they happened:
// api.RecentRuns) with their instance counts, leaving out those created
// ahead (inside the window) that nothing happened in yet; then failure, a
// recent run that ended failed (api.RecentFailure), unless it was shown.
func WriteRuns(b *strings.Builder, runs []api.RunView, failure *api.RunView, limit int, loc *time.Location) {
	shown := 0
	failureShown := false
	for _, r := range runs {
		if r.LogicalTime.After(time.Now()) && r.State == "waiting" {
			continue // created ahead, inside the window: not news
		}
		var parts []string
		for _, s := range axtype.States {
			if n := r.Counts[s]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", s, n))
			}
		}
		fmt.Fprintf(b, "  run %-6d %-8s %s%s  %s\n", r.ID, r.Kind, api.Stamp(r.LogicalTime, loc), triggered(r.Run, loc), strings.Join(parts, ", "))
		writeWaits(b, r, loc)
		writeFailures(b, r)
		failureShown = failureShown || (failure != nil && failure.ID == r.ID)
		if shown++; shown >= limit {
			break
		}
	}
	if shown == 0 {
		b.WriteString("  no runs yet\n")
	}
	if failure != nil && !failureShown {
		fmt.Fprintf(b, "  recent failure: run %d %s%s\n", failure.ID, api.Stamp(failure.LogicalTime, loc), triggered(failure.Run, loc))
		writeFailures(b, *failure)
	}
}

// triggered says when a run was created for a logical time already past
// (a trigger or a backfill of an older date): when it happened.
func triggered(r axtype.Run, loc *time.Location) string {
	if !api.Happened(r).After(r.LogicalTime) {
		return ""
	}
	return " (triggered " + api.Stamp(r.CreatedAt, loc) + ")"
}

// writeFailures names, for a run that ended failed, the failures that ended
// it (not those of their downstream) and their errors.
func writeFailures(b *strings.Builder, r api.RunView) {
	if !r.Over {
		return
	}
	for _, f := range r.Failures {
		fmt.Fprintf(b, "      %s %s: %s\n", f.Task, f.State, f.Error)
	}
	if more := r.FailureCount - len(r.Failures); more > 0 {
		fmt.Fprintf(b, "      … and %d more failures\n", more)
	}
}

// writeWaits says, for a run that is not over, why: each waiting instance
// and what it waits on, gates awaiting approval first.
func writeWaits(b *strings.Builder, r api.RunView, loc *time.Location) {
	if r.Over || len(r.Waiting) == 0 {
		return
	}
	tasks := make([]string, 0, len(r.Waiting))
	for t := range r.Waiting {
		tasks = append(tasks, t)
	}
	slices.SortFunc(tasks, func(x, y string) int {
		gx, gy := slices.Contains(r.Awaiting, x), slices.Contains(r.Awaiting, y)
		switch {
		case gx && !gy:
			return -1
		case gy && !gx:
			return 1
		}
		return strings.Compare(x, y)
	})
	for _, t := range tasks {
		fmt.Fprintf(b, "      %s: %s\n", t, r.Waiting[t])
	}
	if more := r.WaitingCount - len(r.Waiting); more > 0 {
		fmt.Fprintf(b, "      … and %d more waiting\n", more)
	}
	if len(r.Awaiting) > 0 {
		fmt.Fprintf(b, "      approve with: ax trigger %s --at %s\n", r.Awaiting[0], api.Stamp(r.LogicalTime, loc))
	}
}

// Status prints the scheduler's lease, and pipelines with their latest
// runs and instance states, from the API or, viaStore, from the store at
// target; only, when given, names the one pipeline to show, or a task
// (PIPELINE.TASK): its pipeline, then the task's latest instances.
func Status(ctx context.Context, w io.Writer, viaStore bool, target string, af APIOptions, only []string, limit int) error {
	task := ""
	if len(only) == 1 && strings.Contains(only[0], ".") {
		p, _, err := SplitTask(only[0])
		if err != nil {
			return err
		}
		task, only = only[0], []string{p}
	}
	if !viaStore {
		if err := StatusAPI(ctx, w, af, only, limit); err != nil || task == "" || af.JSON {
			return err
		}
		return taskStatusAPI(ctx, w, af, task, limit)
	}
	st, err := store.Open(ctx, target, store.Options{Existing: true})
	if err != nil {
		return Fail(err)
	}
	defer st.Close()
	zs := api.StoreZones(ctx, st, af.UTC)
	if err := WriteStatus(ctx, w, st, only, limit, zs); err != nil || task == "" {
		return err
	}
	ts, err := st.Tasks(ctx, store.TaskFilter{ID: task})
	if err != nil {
		return err
	}
	if len(ts) == 0 {
		return Fail(fmt.Errorf("no task %q in the store", task))
	}
	ins, err := st.Instances(ctx, store.InstanceFilter{TaskID: task, Limit: limit})
	if err != nil {
		return err
	}
	loc, err := zs.Of(only[0])
	if err != nil {
		return err
	}
	return writeTaskInstances(w, task, ins, loc)
}

// taskStatusAPI prints a task's latest instances from the API (which
// refuses an unknown task with a suggestion).
func taskStatusAPI(ctx context.Context, w io.Writer, af APIOptions, task string, limit int) error {
	c, err := NewAPIClient(af.Server)
	if err != nil {
		return err
	}
	ins, err := c.Instances(ctx, api.InstanceQuery{Task: task, Limit: limit})
	if err != nil {
		return err
	}
	p, _, _ := SplitTask(task)
	pl, err := c.PipelineSummary(ctx, p)
	if err != nil {
		return err
	}
	loc, err := api.PipelineZone(pl.Timezone, af.UTC)
	if err != nil {
		return err
	}
	return writeTaskInstances(w, task, ins, loc)
}

// writeTaskInstances prints a task's latest instances, newest first: run,
// logical time, state, attempts and error.
func writeTaskInstances(w io.Writer, task string, ins []axtype.Instance, loc *time.Location) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\ntask %s\n", task)
	for _, in := range ins {
		fmt.Fprintf(&b, "  instance %-6d run %-6d %s  %s", in.ID, in.RunID, api.Stamp(in.LogicalTime, loc), in.State)
		if in.Attempt > 0 {
			fmt.Fprintf(&b, " (attempt %d)", in.Attempt)
		}
		if in.Error != "" {
			b.WriteString(": " + in.Error)
		}
		b.WriteString("\n")
	}
	if len(ins) == 0 {
		b.WriteString("  no instance yet\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
