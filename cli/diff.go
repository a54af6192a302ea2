package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/reload"
	"github.com/spf13/cobra"
)

// Diff prints what reloading the pipeline files of paths would change in
// the running server: tasks added, removed and changed (each changed field
// with its old and new value), and schedules planned again.
//
// A directory among paths stands for the server's pipeline directory: the
// whole set is compared, and a pipeline the server runs that no file
// defines is removed. Files alone are compared pipeline by pipeline, and
// their references to pipelines they do not define are resolved against
// the tasks the server runs.
func Diff(ctx context.Context, out, errOut io.Writer, paths []string, popts defs.Options, dopts dag.Options, f APIOptions) error {
	whole := false
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			whole = true
		}
	}
	dopts.External = !whole
	g, errs, err := dag.Load(paths, popts, dopts)
	if err != nil {
		return Usage("%v", err)
	}
	if g == nil {
		for _, e := range errs.Fatal() {
			fmt.Fprintln(errOut, e.Error())
		}
		return Fail(fmt.Errorf("%d error(s): a reload of these files would keep the running pipelines", len(errs.Fatal())))
	}
	c, err := NewAPIClient(f.Server)
	if err != nil {
		return err
	}
	running, err := c.Reload(ctx, nil)
	if err != nil {
		return err
	}
	old := running.Running
	if !whole {
		if bad := unknownExternal(g, old, c.Base()); len(bad) > 0 {
			for _, e := range bad {
				fmt.Fprintln(errOut, e.Error())
			}
			return Fail(fmt.Errorf("%d error(s): a reload of these files would keep the running pipelines", len(bad)))
		}
		old = onlyPipelines(old, g)
	}
	d := engine.DiffOf(old, engine.Fingerprint(g))
	if d.Changes, err = fieldChanges(ctx, c, g, d, running.Schedules); err != nil {
		return err
	}
	if f.JSON {
		raw, _ := json.MarshalIndent(d, "", "  ")
		return PrintJSON(out, raw)
	}
	return WriteDiff(out, d)
}

// unknownExternal returns an error for each reference of g to a task of a
// pipeline g does not define that the server does not run either.
func unknownExternal(g *dag.Graph, running engine.Fingerprints, server string) []*defs.Error {
	var out []*defs.Error
	for _, t := range g.Order() {
		for _, d := range t.DependsOn {
			if d.Pipeline == "" || g.Pipeline(d.Pipeline) != nil {
				continue
			}
			id := d.Pipeline + "." + d.Task
			if _, ok := running.Tasks[id]; ok {
				continue
			}
			msg := fmt.Sprintf("depends_on %q: no such task in these files nor on the server at %s%s", id, server,
				defs.DidYouMean(id, slices.Collect(maps.Keys(running.Tasks))))
			out = append(out, &defs.Error{Pos: d.Pos, Pipeline: t.Pipeline, Task: t.Name, Msg: msg, Severity: defs.SevError})
		}
	}
	return out
}

// onlyPipelines keeps of fp the tasks and schedules of the pipelines g
// defines.
func onlyPipelines(fp engine.Fingerprints, g *dag.Graph) engine.Fingerprints {
	out := engine.Fingerprints{Tasks: map[string]string{}, Triggers: map[string]string{}}
	in := func(id string) bool {
		p, _, _ := strings.Cut(id, ".")
		return g.Pipeline(p) != nil
	}
	for id, h := range fp.Tasks {
		if in(id) {
			out.Tasks[id] = h
		}
	}
	for n, h := range fp.Triggers {
		if in(n) {
			out.Triggers[n] = h
		}
	}
	for p, h := range fp.Pipelines {
		if in(p) {
			if out.Pipelines == nil {
				out.Pipelines = map[string]string{}
			}
			out.Pipelines[p] = h
		}
	}
	return out
}

// fieldChanges asks the server for the definitions in force of the tasks
// d changes, in batches, and lists the fields that differ from g's, then
// those of the schedules d plans again that both sides have.
func fieldChanges(ctx context.Context, c *api.Client, g *dag.Graph, d engine.Diff, schedules map[string]engine.ScheduleDef) ([]engine.Change, error) {
	out := slices.Clone(d.Changes) // the pipelines' own settings, from the fingerprints
	for ids := range slices.Chunk(d.Changed, api.MaxDefinitions) {
		v, err := c.Reload(ctx, ids)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if was := v.Definitions[id]; was != nil {
				out = append(out, engine.TaskChanges(id, was, g.Task(id))...)
			}
		}
	}
	cur := engine.Schedules(g)
	for _, n := range d.Replanned {
		was, ok1 := schedules[n]
		now, ok2 := cur[n]
		if ok1 && ok2 {
			out = append(out, engine.ScheduleChanges(n, was, now)...)
		}
	}
	return out, nil
}

// WriteDiff prints a diff one line per task or schedule, each changed
// field under it as `field: old -> new`.
func WriteDiff(w io.Writer, d engine.Diff) error {
	if d.Empty() {
		_, err := fmt.Fprintln(w, "no change: the running server has these pipelines")
		return err
	}
	for _, l := range []struct {
		mark, what string
		ids        []string
	}{{"+", "added", d.Added}, {"-", "removed", d.Removed}, {"~", "changed", d.Changed}, {"@", "schedule planned again from the reload", d.Replanned},
		{"*", "pipeline settings changed", d.Settings}} {
		for _, id := range l.ids {
			fmt.Fprintf(w, "%s %-40s %s\n", l.mark, id, l.what)
			if l.mark != "~" && l.mark != "@" && l.mark != "*" {
				continue
			}
			for _, ch := range d.Changes {
				if ch.ID == id && ch.Schedule == (l.mark == "@") && (ch.Field == "settings") == (l.mark == "*") {
					fmt.Fprintf(w, "    %s: %s -> %s\n", ch.Field, ch.Old, ch.New)
				}
			}
		}
	}
	settings := ""
	if len(d.Settings) > 0 {
		settings = fmt.Sprintf("; %d pipeline(s) with settings changed", len(d.Settings))
	}
	_, err := fmt.Fprintf(w, "%d added, %d removed, %d changed; %d schedule(s) planned again%s\n", len(d.Added), len(d.Removed), len(d.Changed), len(d.Replanned), settings)
	return err
}

func NewDiffCmd() *cobra.Command {
	var (
		f    APIOptions
		rate float64
	)
	cmd := &cobra.Command{
		Use:   "diff PATH...",
		Short: "Show what reloading these pipeline files would change in the running server",
		Long: `Validate the files as ax server would on a reload and compare them with the
pipelines the running server has in force: tasks added, removed and changed
(each changed field as old -> new), and schedules that would be planned
again from the moment of the reload. A directory stands for the server's:
a pipeline the server runs that it does not hold is removed. Files alone
are compared pipeline by pipeline, their references to other pipelines
resolved against the server's tasks. Invalid files print the messages of
ax validate and exit 1: a reload of them would keep the running set.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			popts, err := parseOptions()
			if err != nil {
				return err
			}
			return Diff(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args, popts, dag.Options{DispatchRate: reload.WarnRate(rate)}, f)
		},
	}
	addAPIFlags(cmd, &f)
	cmd.Flags().Float64Var(&rate, "dispatch-rate", 0, "the server's --dispatch-rate, for the same warnings")
	return cmd
}
