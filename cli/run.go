package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/taskexec"
)

// RunOnce runs a pipeline (what: its name under pipelines, or a file), or
// the tasks sel selects, once now (or at at) on an engine of its own, on
// the store at target (default a temporary one), and reports how it ended.
// A pipeline with disabled: true is refused unless ignoreDisabled.
func RunOnce(ctx context.Context, out, errOut io.Writer, what, at, sel string, pipelines []string, target string, approve, ignoreDisabled bool, secretsDir string) error {
	secrets, err := OpenSecrets(secretsDir) // before anything is created
	if err != nil {
		return err
	}
	g, name, err := runGraph(what, pipelines, errOut)
	if err != nil {
		return err
	}
	spec, loc, err := runSpec(g, name, at, sel, approve, ignoreDisabled)
	if err != nil {
		return err
	}
	if target == "" {
		dir, err := os.MkdirTemp("", "ax-run-")
		if err != nil {
			return Fail(err)
		}
		defer os.RemoveAll(dir)
		target = filepath.Join(dir, "ax.db")
	}
	st, err := store.Open(ctx, target, store.Options{})
	if err != nil {
		return Fail(err)
	}
	defer st.Close()
	// The lease first: while a server holds it, nothing is written.
	// A holder of its own: a second ax run on the store refuses rather than
	// take over the lease of the first (and judge its running attempts).
	holder := fmt.Sprintf("run:%s:%d", hostname(), os.Getpid())
	l, err := holdLease(ctx, st, holder, "ax run needs a store no scheduler runs on; without --store it makes its own, or ask the server: ax trigger")
	if err != nil {
		return err
	}
	defer releaseLease(st, l) // only if the engine never took it over: a stale epoch releases nothing
	id, err := engine.CreateBackfillFenced(ctx, st, st.Fence(l.Epoch), g, spec, Actor(), time.Now())
	if err != nil {
		return Fail(err)
	}
	var eng *engine.Engine
	execs, err := taskexec.Executors(g, st, taskexec.AlertVia(&eng), secrets)
	if err != nil {
		return Fail(err)
	}
	fmt.Fprintf(out, "run %s for %s: %d task(s)\n", name, api.Stamp(spec.From, loc), len(spec.Tasks))
	events := make(chan engine.Event, 1024)
	eng, err = engine.New(engine.Config{NoSchedules: true, FailIfHeld: true, Holder: holder, Grace: time.Millisecond,
		OnEvent: func(ev engine.Event) { events <- ev }}, st, g, execs)
	if err != nil {
		return Fail(err)
	}
	return runUntilSettled(ctx, out, st, g, eng, events, id, name)
}

// runGraph compiles what ax run runs: the pipeline file what, or the
// pipelines under paths, of which what names one.
func runGraph(what string, paths []string, errOut io.Writer) (*dag.Graph, string, error) {
	info, err := os.Stat(what)
	if err != nil && (strings.HasSuffix(what, ".yaml") || strings.HasSuffix(what, ".yml") || strings.ContainsRune(what, os.PathSeparator)) {
		return nil, "", Usage("%s: no such pipeline file: give a file that exists, or the name of a pipeline under --pipelines", what)
	}
	if err != nil || info.IsDir() {
		g, err := LoadGraph(paths, errOut)
		return g, what, err
	}
	p, errs := defs.ParseFile(what, defs.Options{})
	var g *dag.Graph
	if errs.Err() == nil {
		var cerrs defs.Errors
		g, cerrs = dag.Compile([]*defs.Pipeline{p}, dag.Options{External: true, DispatchRate: -1})
		errs = append(errs, cerrs...)
	}
	if errs.Err() != nil {
		for _, e := range errs.Fatal() {
			fmt.Fprintln(errOut, e.Error())
		}
		return nil, "", Fail(fmt.Errorf("%s is not a valid pipeline file", what))
	}
	return g, p.Name, nil
}

// runSpec is the one-run backfill ax run makes of pipeline name (the
// tasks sel selects) at at (default now), and the pipeline's zone; a
// disabled pipeline is refused with the reason unless ignoreDisabled.
func runSpec(g *dag.Graph, name, at, sel string, approve, ignoreDisabled bool) (axtype.BackfillSpec, *time.Location, error) {
	p := g.Pipeline(name)
	if p == nil {
		var names []string
		for _, q := range g.Pipelines() {
			names = append(names, q.Name)
		}
		return axtype.BackfillSpec{}, nil, Fail(fmt.Errorf("no pipeline %q%s", name, defs.DidYouMean(name, names)))
	}
	if why := defs.DisabledReason(p, nil); why != "" && !ignoreDisabled {
		return axtype.BackfillSpec{}, nil, Fail(fmt.Errorf("%s; or give --ignore-disabled to run it once anyway", why))
	}
	tasks, err := g.Select(name, sel)
	if err != nil {
		return axtype.BackfillSpec{}, nil, Fail(errors.New(strings.TrimPrefix(err.Error(), "dag: ")))
	}
	when := time.Now().Truncate(time.Second)
	if at != "" {
		sched := p.Schedule
		if len(tasks) > 0 {
			sched = api.ScheduleOf(g, tasks[0].ID())
		}
		if when, err = api.FireAt(at, sched, p.Location); err != nil {
			return axtype.BackfillSpec{}, nil, Usage("--at: %v", err)
		}
	}
	spec := axtype.BackfillSpec{Pipeline: name, From: when, To: when, Select: sel, Times: []time.Time{when}, MaxActiveRuns: 1, Rerun: axtype.RerunAll,
		ApproveManual: approve}
	for _, t := range tasks {
		spec.Tasks = append(spec.Tasks, t.Name)
	}
	return spec, p.Location, nil
}

// runUntilSettled runs eng, printing its events, until the run of backfill
// id has ended or stopped at a manual gate, and reports how it ended.
func runUntilSettled(ctx context.Context, out io.Writer, st *store.Store, g *dag.Graph, eng *engine.Engine, events chan engine.Event, id int64, name string) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- eng.Run(runCtx) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case ev := <-events:
			PrintEvent(out, ev)
			continue
		case err := <-done:
			if err != nil {
				return Fail(err)
			}
			return Fail(errors.New("interrupted: running tasks were killed"))
		case <-tick.C:
		}
		bs, err := st.Backfills(ctx, id)
		if err != nil || len(bs) == 0 {
			continue
		}
		// The run stops at a gate when nothing else can move in it.
		runs, err := st.BackfillRuns(ctx, id)
		if err != nil || len(runs) != 1 {
			continue
		}
		ins, err := st.Instances(ctx, store.InstanceFilter{RunID: runs[0].ID, Limit: 1 << 20})
		if err != nil {
			continue
		}
		waits, err := engine.WaitReasons(ctx, st, g, runs[0].Kind, ins, time.Now())
		if err != nil {
			continue
		}
		status := engine.StatusWith(ins, func(task string) bool { t := g.Task(task); return t != nil && t.Manual }, waits)
		if status.State != engine.RunAwaiting && bs[0].State != axtype.BackfillDone && bs[0].State != axtype.BackfillFailed {
			continue
		}
		stop()
		<-done
		for len(events) > 0 {
			PrintEvent(out, <-events)
		}
		return RunOutcome(out, name, status, ins, bs[0])
	}
}

// RunOutcome reports how `ax run` ended: every task succeeded (exit 0), one
// failed (1), or it stopped at manual gates nobody approved (3). A task that
// did not run is never counted as succeeded.
func RunOutcome(out io.Writer, name string, st engine.RunStatus, ins []axtype.Instance, b axtype.Backfill) error {
	succeeded := 0
	for _, in := range ins {
		if in.State == axtype.Success {
			succeeded++
		}
	}
	switch {
	case len(st.Failed) > 0 || b.FailedRuns > 0:
		return Fail(fmt.Errorf("%s: %d of %d task(s) succeeded; failed: %s", name, succeeded, len(ins), strings.Join(st.Failed, ", ")))
	case st.State == engine.RunAwaiting:
		var waiting []string
		for task, why := range st.Waiting {
			if !slices.Contains(st.Awaiting, task) {
				waiting = append(waiting, task+" ("+why+")")
			}
		}
		slices.Sort(waiting)
		msg := fmt.Sprintf("%s: %d of %d task(s) succeeded; awaiting approval: %s", name, succeeded, len(ins), strings.Join(st.Awaiting, ", "))
		if len(waiting) > 0 {
			msg += "; behind them: " + strings.Join(waiting, ", ")
		}
		return &ExitError{Code: ExitGated, Err: errors.New(msg + "; run again with --approve-manual to approve them up front")}
	case succeeded != len(ins):
		return Fail(fmt.Errorf("%s: %d of %d task(s) succeeded; the run ended %s", name, succeeded, len(ins), st.State))
	}
	fmt.Fprintf(out, "ok: %d task(s) succeeded\n", succeeded)
	return nil
}

// PrintEvent prints an attempt starting or ending.
func PrintEvent(w io.Writer, ev engine.Event) {
	ts := time.Now().Format("15:04:05.000")
	if ev.Kind == "started" {
		fmt.Fprintf(w, "%s  start  %s\n", ts, ev.Task)
		return
	}
	line := fmt.Sprintf("%s  %-7s %s (%s)", ts, strings.ToLower(string(ev.State)), ev.Task, ev.Duration.Round(time.Millisecond))
	if ev.Error != "" {
		line += ": " + ev.Error
	}
	fmt.Fprintln(w, line)
}

// hostname names this host in a lease holder.
func hostname() string {
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return "localhost"
}
