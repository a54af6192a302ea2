package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/direct"
	"github.com/spf13/cobra"
)

// WriteRuns prints up to limit runs (newest first by when they happened:
// api.RecentRuns) with their instance counts, leaving out the schedule's
// runs created ahead (inside the window) that nothing happened in yet, but
// not an operator's run deferred to a time to come (trigger --in, --at),
// marked so; then failure, a recent run that ended failed
// (api.RecentFailure), unless it was shown.
func WriteRuns(b *strings.Builder, runs []api.RunView, failure *api.RunView, limit int, loc *time.Location) {
	shown, anyDeferred := 0, false
	failureShown := false
	for _, r := range runs {
		deferred := r.LogicalTime.After(time.Now()) && r.State == "waiting"
		if deferred && r.Kind != axtype.RunManual {
			continue // created ahead, inside the window: not news
		}
		if deferred { // listed besides the limit of the runs that happened
			fmt.Fprintf(b, "  run %-6d %-8s %s  deferred: fires then%s\n", r.ID, r.Kind, api.Stamp(r.LogicalTime, loc), triggered(r.Run, loc))
			anyDeferred = true
			continue
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
	if shown == 0 && !anyDeferred {
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
	s, done, err := Connect(ctx, af, Target{ViaStore: viaStore, Store: target})
	if err != nil {
		return err
	}
	defer done()
	asJSON, err := writeStatus(ctx, w, s, af, only, limit)
	if err != nil || task == "" || asJSON {
		return asked(err)
	}
	ins, err := s.Instances(ctx, api.InstanceQuery{Task: task, Limit: limit})
	if err != nil {
		return asked(err)
	}
	loc, err := s.Zones(ctx, af.UTC).Of(only[0])
	if err != nil {
		return asked(err)
	}
	return writeTaskInstances(w, task, ins, loc)
}

// writeStatus prints the lease and the pipelines (only: the one named)
// with their latest runs, or, with --json and a server's answer, that
// answer and the runs as JSON (asJSON).
func writeStatus(ctx context.Context, w io.Writer, s Scheduler, f APIOptions, only []string, limit int) (asJSON bool, err error) {
	st, raw, err := s.Status(ctx)
	if err != nil {
		return false, err
	}
	name := ""
	if len(only) == 1 {
		// One pipeline: its summary says whether it exists (with a
		// suggestion), and the list is read for it alone.
		if _, err := s.PipelineSummary(ctx, only[0]); err != nil {
			return false, err
		}
		name = only[0]
	}
	pipelines, err := s.Pipelines(ctx, name)
	if err != nil {
		return false, err
	}
	all := map[string][]api.RunView{}
	for _, p := range pipelines {
		if all[p.Name], err = s.RecentRuns(ctx, p.Name, limit); err != nil {
			return false, err
		}
	}
	if f.JSON && raw != nil {
		return true, json.NewEncoder(w).Encode(map[string]any{"status": raw, "runs": all})
	}
	var b strings.Builder
	switch l := st.Lease; {
	case l == nil:
		b.WriteString("scheduler: never started on this store\n")
	case l.Held && st.Role != "":
		fmt.Fprintf(&b, "scheduler: %s (epoch %d, lease held until %s); %s answered as %s\n", l.Holder, l.Epoch, api.Stamp(l.ExpiresAt, time.UTC), s.Where(), st.Role)
	case l.Held:
		fmt.Fprintf(&b, "scheduler: %s (epoch %d, lease held until %s)\n", l.Holder, l.Epoch, api.Stamp(l.ExpiresAt, time.UTC))
	default:
		fmt.Fprintf(&b, "scheduler: %s (epoch %d, lease released or expired at %s)\n", l.Holder, l.Epoch, api.Stamp(l.ExpiresAt, time.UTC))
	}
	for _, p := range pipelines {
		loc, err := api.PipelineZone(p.Timezone, f.UTC)
		if err != nil {
			return false, err
		}
		fmt.Fprintf(&b, "\npipeline %s (%d tasks)%s\n", p.Name, p.Tasks, disabledLine(p.Disabled))
		WriteRuns(&b, all[p.Name], p.RecentFailure, limit, loc)
	}
	_, err = io.WriteString(w, b.String())
	return false, err
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

func NewStatusCmd() *cobra.Command {
	var (
		target string
		limit  int
		af     APIOptions
	)
	cmd := &cobra.Command{
		Use:   "status [PIPELINE | PIPELINE.TASK]",
		Short: "Show the scheduler's lease, and pipelines with their latest runs and instance states (for PIPELINE.TASK, also the task's latest instances)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return Status(cmd.Context(), cmd.OutOrStdout(), viaStore(cmd), target, af, args, limit)
		},
	}
	cmd.Flags().StringVar(&target, "store", direct.DefaultPath, "read this store instead of calling the API: a SQLite file path, mysql://user:pass@tcp(host:3306)/db or postgres://user:pass@host:5432/db")
	cmd.Flags().IntVarP(&limit, "runs", "n", 5, "latest runs per pipeline")
	addAPIFlags(cmd, &af)
	return cmd
}
