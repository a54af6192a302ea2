package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// loadGraph compiles the pipelines of paths, printing problems the way ax
// validate does.
func loadGraph(paths []string, stderr io.Writer) (*dag.Graph, error) {
	g, errs, err := dag.Load(paths, defs.Options{}, dag.Options{DispatchRate: -1})
	if err != nil {
		return nil, usageErr("%v", err)
	}
	if g == nil {
		for _, e := range errs.Fatal() {
			fmt.Fprintln(stderr, e.Error())
		}
		return nil, &exitError{code: exitFailed, err: fmt.Errorf("%d error(s) in the pipeline files (see ax validate)", len(errs.Fatal()))}
	}
	return g, nil
}

type backfillFlags struct {
	from, to, sel, rerun string
	dryRun, reverse      bool
	stopOnFailure        bool
	approveManual        bool
	standalone, detach   bool
	maxActive            int
	pipelines            []string
	store                string
	wait                 time.Duration
	api                  apiFlags
	viaAPI               bool // neither --standalone nor --store: ask the server's API
}

func newBackfillCmd() *cobra.Command {
	var f backfillFlags
	cmd := &cobra.Command{
		Use:   "backfill PIPELINE --from T1 --to T2",
		Short: "Run a pipeline (or a selection of it) once for every logical time its schedule gives in a range",
		Long: `Run a pipeline, or the tasks --select names (task, task+, +task, +task+,
group:NAME, comma-separated), once for every logical time its schedule gives
between --from and --to (both inclusive; a date or a date-time, read in the
pipeline's time zone), each task receiving its logical time, in dependency
order. Tasks outside the selection count as done.

By default it goes to a running ax server's API (--server, AX_SERVER),
which plans it from its own pipeline files; --dry-run prints the plan from
the local files (--pipelines) and needs no server; with --store it is written into
that store for the server on it to pick up; --standalone runs it here, on an
engine of its own, and exits when done. Either way it resumes where it
stopped after an interruption (ax backfill resume ID), without running any
succeeded instance again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !f.standalone && !f.dryRun && !viaStore(cmd) {
				return backfillAPI(cmd.Context(), cmd.OutOrStdout(), args[0], f)
			}
			return runBackfill(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "", "first logical time: 2026-03-01 or 2026-03-01T02:00:00 (pipeline time zone)")
	fl.StringVar(&f.to, "to", "", "last logical time, inclusive (a date means the whole day)")
	fl.StringVar(&f.sel, "select", "", "tasks: task, task+, +task, +task+, group:NAME, comma-separated")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the plan and change nothing")
	fl.IntVar(&f.maxActive, "max-active-runs", 1, "runs in flight at once")
	fl.BoolVar(&f.reverse, "reverse", false, "newest logical time first")
	fl.StringVar(&f.rerun, "rerun", engine.RerunNone, "existing instances: none (fill gaps only), failed (rerun failed ones), all")
	fl.BoolVar(&f.stopOnFailure, "stop-on-failure", false, "start no new run after a run failed")
	fl.BoolVar(&f.approveManual, "approve-manual", false, "approve the manual gates of its runs up front (otherwise each run waits at its gates for ax trigger)")
	f.addRunFlags(fl)
	f.api.add(cmd)
	cmd.AddCommand(newBackfillResumeCmd(), newBackfillStatusCmd(), newBackfillListCmd(), newBackfillCancelCmd())
	return cmd
}

// addRunFlags adds the flags that say where and how a backfill runs.
func (f *backfillFlags) addRunFlags(fl *pflag.FlagSet) {
	fl.BoolVar(&f.standalone, "standalone", false, "run it here on an engine of its own instead of the server's")
	fl.BoolVar(&f.detach, "detach", false, "queue it for the server and return at once")
	fl.StringSliceVar(&f.pipelines, "pipelines", []string{"examples"}, "pipeline files or directories")
	fl.StringVar(&f.store, "store", store.DefaultPath, "use this store instead of the server's API: a SQLite file path, or mysql://user:pass@tcp(host:3306)/db")
	fl.DurationVar(&f.wait, "wait", 30*time.Second, "without --standalone: how long to wait for a server to pick it up")
}

func runBackfill(ctx context.Context, out, errOut io.Writer, pipeline string, f backfillFlags) error {
	g, err := loadGraph(f.pipelines, errOut)
	if err != nil {
		return err
	}
	loc := time.UTC
	if p := g.Pipeline(pipeline); p != nil {
		loc = p.Location
	}
	from, err := api.ParseWhen(f.from, loc, false)
	if err != nil {
		return usageErr("--from: %v", err)
	}
	to, err := api.ParseWhen(f.to, loc, true)
	if err != nil {
		return usageErr("--to: %v", err)
	}
	spec, err := engine.PlanBackfill(g, engine.BackfillParams{Pipeline: pipeline, From: from, To: to, Select: f.sel,
		MaxActiveRuns: f.maxActive, Reverse: f.reverse, Rerun: f.rerun, StopOnFailure: f.stopOnFailure,
		ApproveManual: f.approveManual})
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	if f.dryRun {
		return writePlan(out, spec, loc)
	}
	st, err := store.Open(ctx, f.store, store.Options{})
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	defer st.Close()
	id, err := engine.CreateBackfill(ctx, st, spec, actor(), time.Now())
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	fmt.Fprintf(out, "backfill %d: %s, %d run(s) × %d task(s)\n", id, pipeline, len(spec.Times), len(spec.Tasks))
	return followBackfill(ctx, out, st, g, id, f)
}

// followBackfill runs (standalone) or waits for a backfill, showing
// progress, until it ends. The exit status is 0 only when no run failed.
func followBackfill(ctx context.Context, out io.Writer, st *store.Store, g *dag.Graph, id int64, f backfillFlags) error {
	if f.detach && !f.standalone {
		fmt.Fprintf(out, "queued for the scheduler on %s; follow it with: ax backfill status %d\n", st, id)
		return nil
	}
	sa, err := startStandalone(ctx, st, g, id, f.standalone)
	if err != nil {
		return err
	}
	defer sa.stop()
	return sa.follow(ctx, out, st, g, id, f)
}

// standalone is the engine of its own that `--standalone` runs a backfill
// on (off when the server's engine runs it).
type standalone struct {
	on   bool
	stop context.CancelFunc
	done chan error
}

// startStandalone starts that engine when on.
func startStandalone(ctx context.Context, st *store.Store, g *dag.Graph, id int64, on bool) (*standalone, error) {
	runCtx, stop := context.WithCancel(ctx)
	sa := &standalone{on: on, stop: stop, done: make(chan error, 1)}
	if !on {
		return sa, nil
	}
	var eng *engine.Engine
	execs, err := executors(g, st, alertVia(&eng))
	if err != nil {
		stop()
		return nil, &exitError{code: exitFailed, err: err}
	}
	eng, err = engine.New(engine.Config{NoSchedules: true, FailIfHeld: true, Holder: "backfill:" + strconv.FormatInt(id, 10)}, st, g, execs)
	if err != nil {
		stop()
		return nil, &exitError{code: exitFailed, err: err}
	}
	go func() { sa.done <- eng.Run(runCtx) }()
	return sa, nil
}

// follow shows a backfill's progress until it ends.
func (sa *standalone) follow(ctx context.Context, out io.Writer, st *store.Store, g *dag.Graph, id int64, f backfillFlags) error {
	stop, engineDone := sa.stop, sa.done
	tty := false
	if fd, ok := out.(*os.File); ok {
		tty = term.IsTerminal(int(fd.Fd()))
	}
	start, lastLine := time.Now(), time.Time{}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-engineDone:
			if err != nil {
				return &exitError{code: exitFailed, err: fmt.Errorf("backfill %d: %w (a scheduler runs on this store: drop --standalone)", id, err)}
			}
			return &exitError{code: exitFailed, err: fmt.Errorf("backfill %d interrupted; continue it with: ax backfill resume %d", id, id)}
		case <-ctx.Done():
			stop()
			if f.standalone {
				<-engineDone
			}
			fmt.Fprintln(out)
			return &exitError{code: exitFailed, err: fmt.Errorf("backfill %d interrupted; continue it with: ax backfill resume %d", id, id)}
		case <-tick.C:
		}
		bs, err := st.Backfills(ctx, id)
		if err != nil || len(bs) == 0 {
			continue
		}
		b := bs[0]
		if !f.standalone && b.State == engine.BackfillPending && time.Since(start) > f.wait {
			return &exitError{code: exitFailed, err: fmt.Errorf("no scheduler picked up backfill %d within %s; it stays queued for the next ax server on %s, or run: ax backfill resume %d --standalone", id, f.wait, st, id)}
		}
		line := progress(b, time.Since(start))
		if pr, err := st.BackfillProgress(ctx, id, api.ManualTasks(g, b.Pipeline)); err == nil {
			line += instancesLine(pr)
		}
		if tty {
			fmt.Fprintf(out, "\r%s\x1b[K", line)
		} else if time.Since(lastLine) >= 5*time.Second || b.State == engine.BackfillDone || b.State == engine.BackfillFailed {
			fmt.Fprintln(out, line)
			lastLine = time.Now()
		}
		if b.State == engine.BackfillDone || b.State == engine.BackfillFailed || b.State == engine.BackfillCancelled {
			if tty {
				fmt.Fprintln(out)
			}
			stop()
			if f.standalone {
				<-engineDone
			}
			if b.FailedRuns > 0 || b.State != engine.BackfillDone {
				return &exitError{code: exitFailed, err: fmt.Errorf("backfill %d %s: %d of %d run(s) failed; %s", id, b.State, b.FailedRuns, b.TotalRuns, b.Error)}
			}
			fmt.Fprintf(out, "backfill %d done: %d run(s)\n", id, b.TotalRuns)
			return nil
		}
	}
}

// progress renders runs done/total, failures, elapsed and ETA.
// instancesLine is the instance count of a backfill's progress line: the
// gates awaiting approval apart, since they are not done.
func instancesLine(p store.Progress) string {
	s := fmt.Sprintf("; instances %d/%d", p.Ended, p.Total)
	if p.Awaiting > 0 {
		s += fmt.Sprintf(", %d awaiting approval (ax trigger the gate, or --approve-manual)", p.Awaiting)
	}
	return s
}

func progress(b store.Backfill, elapsed time.Duration) string {
	eta := "?"
	if b.DoneRuns > 0 && b.DoneRuns < b.TotalRuns {
		eta = (elapsed / time.Duration(b.DoneRuns) * time.Duration(b.TotalRuns-b.DoneRuns)).Round(time.Second).String()
	} else if b.DoneRuns >= b.TotalRuns {
		eta = "0s"
	}
	pct := 100
	if b.TotalRuns > 0 {
		pct = b.DoneRuns * 100 / b.TotalRuns
	}
	return fmt.Sprintf("backfill %d %s: %d/%d runs (%d%%), %d failed, elapsed %s, ETA %s", b.ID, b.State, b.DoneRuns, b.TotalRuns, pct,
		b.FailedRuns, elapsed.Round(time.Second), eta)
}

func writePlan(w io.Writer, spec engine.BackfillSpec, loc *time.Location) error {
	fmt.Fprintf(w, "plan: %s, %d run(s) × %d task(s), rerun %s, max %d active\n", spec.Pipeline, len(spec.Times), len(spec.Tasks), spec.Rerun, spec.MaxActiveRuns)
	for _, at := range spec.Times {
		fmt.Fprintf(w, "%s  %s\n", api.Stamp(at, loc), strings.Join(spec.Tasks, " → "))
	}
	return nil
}

func newBackfillResumeCmd() *cobra.Command {
	var f backfillFlags
	cmd := &cobra.Command{
		Use:   "resume ID",
		Short: "Continue an interrupted backfill without rerunning what succeeded",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			g, err := loadGraph(f.pipelines, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			st, b, err := openBackfill(ctx, f.store, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			id := b.ID
			if b.State == engine.BackfillDone {
				return &exitError{code: exitFailed, err: fmt.Errorf("backfill %d is done already", id)}
			}
			// The primary applies the resume (fenced, action-logged); with
			// --standalone that is the engine started here.
			sa, err := startStandalone(ctx, st, g, id, f.standalone)
			if err != nil {
				return err
			}
			defer sa.stop()
			res, err := queueRequest(ctx, st, engine.ResumeBackfill{Backfill: id}, engine.By{Actor: actor(), Reason: "ax backfill resume"}, f.wait)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), res)
			if f.detach && !f.standalone {
				return nil
			}
			return sa.follow(ctx, cmd.OutOrStdout(), st, g, id, f)
		},
	}
	f.addRunFlags(cmd.Flags())
	return cmd
}

// openBackfill opens the store and reads the backfill whose id is arg; the
// caller closes the store.
func openBackfill(ctx context.Context, target, arg string) (*store.Store, store.Backfill, error) {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return nil, store.Backfill{}, usageErr("%q is not a backfill id", arg)
	}
	st, err := store.Open(ctx, target, store.Options{})
	if err != nil {
		return nil, store.Backfill{}, &exitError{code: exitFailed, err: err}
	}
	bs, err := st.Backfills(ctx, id)
	if err == nil && len(bs) == 0 {
		err = fmt.Errorf("no backfill %d (ax backfill list shows them)", id)
	}
	if err != nil {
		st.Close()
		return nil, store.Backfill{}, &exitError{code: exitFailed, err: err}
	}
	return st, bs[0], nil
}

func newBackfillStatusCmd() *cobra.Command {
	var (
		target string
		af     apiFlags
	)
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show a backfill's progress",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !viaStore(cmd) {
				return backfillStatusAPI(cmd.Context(), cmd.OutOrStdout(), af, args[0])
			}
			st, b, err := openBackfill(cmd.Context(), target, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			fmt.Fprintln(cmd.OutOrStdout(), progress(b, b.UpdatedAt.Sub(b.CreatedAt)))
			if b.Error != "" {
				fmt.Fprintln(cmd.OutOrStdout(), b.Error)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "store", store.DefaultPath, "read this store instead of calling the API")
	af.add(cmd)
	return cmd
}

func newBackfillListCmd() *cobra.Command {
	var (
		target string
		af     apiFlags
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List backfills, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var (
				bs []store.Backfill
				zs *api.Zones
			)
			if !viaStore(cmd) {
				c, err := newAPIClient(af.server)
				if err != nil {
					return err
				}
				zs = api.APIZones(cmd.Context(), c, af.utc)
				raw, err := c.Call(cmd.Context(), http.MethodGet, "/api/v1/backfills", nil)
				if err != nil || af.json {
					return orThen(err, func() error { return printJSON(cmd.OutOrStdout(), raw) })
				}
				var views []api.BackfillView
				if err := json.Unmarshal(raw, &views); err != nil {
					return err
				}
				for _, v := range views {
					bs = append(bs, v.Backfill)
				}
			} else {
				st, err := store.Open(cmd.Context(), target, store.Options{})
				if err != nil {
					return &exitError{code: exitFailed, err: err}
				}
				defer st.Close()
				zs = api.StoreZones(cmd.Context(), st, af.utc)
				if bs, err = st.Backfills(cmd.Context(), 0); err != nil { // newest first
					return &exitError{code: exitFailed, err: err}
				}
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tPIPELINE\tSTATE\tRUNS\tFAILED\tBY\tCREATED")
			for _, b := range bs {
				loc, err := zs.Of(b.Pipeline)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%d\t%s\t%s\n", b.ID, b.Pipeline, b.State, b.DoneRuns, b.TotalRuns, b.FailedRuns, b.Actor, api.Stamp(b.CreatedAt, loc))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&target, "store", store.DefaultPath, "read this store instead of calling the API")
	af.add(cmd)
	return cmd
}

func newBackfillCancelCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Stop a backfill from starting more runs (those in flight finish)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil {
				return usageErr("%q is not a backfill id", args[0])
			}
			c, err := newAPIClient(af.server)
			if err != nil {
				return err
			}
			raw, err := c.Call(cmd.Context(), http.MethodPost, fmt.Sprintf("/api/v1/backfills/%d/cancel", id), map[string]any{})
			if err != nil || af.json {
				return orThen(err, func() error { return printJSON(cmd.OutOrStdout(), raw) })
			}
			var res api.Result
			_ = json.Unmarshal(raw, &res)
			_, err = fmt.Fprintln(cmd.OutOrStdout(), res.Result)
			return err
		},
	}
	af.add(cmd)
	return cmd
}

// backfillAPI starts a backfill through the server's API and follows it
// until it ends.
func backfillAPI(ctx context.Context, out io.Writer, pipeline string, f backfillFlags) error {
	c, err := newAPIClient(f.api.server)
	if err != nil {
		return err
	}
	req := api.BackfillRequest{Pipeline: pipeline, From: f.from, To: f.to, Select: f.sel, MaxActiveRuns: f.maxActive, Reverse: f.reverse,
		Rerun: f.rerun, StopOnFailure: f.stopOnFailure, ApproveManual: f.approveManual}
	if f.from == "" || f.to == "" {
		return usageErr("give --from and --to")
	}
	raw, err := c.Call(ctx, http.MethodPost, "/api/v1/backfills", req)
	if err != nil {
		return err
	}
	var res api.BackfillPlan
	if err := json.Unmarshal(raw, &res); err != nil {
		return err
	}
	if f.api.json && f.detach {
		return printJSON(out, raw)
	}
	fmt.Fprintf(out, "backfill %d: %s, %d run(s) × %d task(s), on %s\n", res.ID, pipeline, len(res.Plan.Times), len(res.Plan.Tasks), c.Base())
	if f.detach {
		fmt.Fprintf(out, "follow it with: ax backfill status %d\n", res.ID)
		return nil
	}
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := ""
	for {
		var v api.BackfillView
		if err := c.Get(ctx, fmt.Sprintf("/api/v1/backfills/%d", res.ID), &v); err != nil {
			return err
		}
		line := progress(v.Backfill, time.Since(start)) + instancesLine(v.Instances)
		if line != last {
			fmt.Fprintln(out, line)
			last = line
		}
		switch v.State {
		case engine.BackfillDone, engine.BackfillFailed, engine.BackfillCancelled:
			if v.FailedRuns > 0 || v.State != engine.BackfillDone {
				return &exitError{code: exitFailed, err: fmt.Errorf("backfill %d %s: %d of %d run(s) failed; %s", v.ID, v.State, v.FailedRuns, v.TotalRuns, v.Error)}
			}
			fmt.Fprintf(out, "backfill %d done: %d run(s)\n", v.ID, v.TotalRuns)
			return nil
		}
		select {
		case <-ctx.Done():
			return &exitError{code: exitFailed, err: fmt.Errorf("stopped following backfill %d; it goes on on the server (ax backfill status %d, ax backfill cancel %d)", res.ID, res.ID, res.ID)}
		case <-tick.C:
		}
	}
}

func backfillStatusAPI(ctx context.Context, out io.Writer, f apiFlags, arg string) error {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return usageErr("%q is not a backfill id", arg)
	}
	c, err := newAPIClient(f.server)
	if err != nil {
		return err
	}
	raw, err := c.Call(ctx, http.MethodGet, fmt.Sprintf("/api/v1/backfills/%d", id), nil)
	if err != nil || f.json {
		return orThen(err, func() error { return printJSON(out, raw) })
	}
	var v api.BackfillView
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	fmt.Fprintln(out, progress(v.Backfill, v.UpdatedAt.Sub(v.CreatedAt))+instancesLine(v.Instances))
	if v.Error != "" {
		fmt.Fprintln(out, v.Error)
	}
	return nil
}

func newRunCmd() *cobra.Command {
	var (
		at, sel, target string
		pipelines       []string
		approve         bool
	)
	cmd := &cobra.Command{
		Use:   "run FILE|PIPELINE",
		Short: "Run a pipeline once, here and now, printing each task as it starts and ends",
		Long: `Run a pipeline (or the tasks --select names) once for one logical time
(--at, default now), in the foreground, on an engine of its own: what a
pipeline author runs to try a pipeline, and what CI can run as a smoke
test. Upstreams outside the selection, and in other pipelines, count as
done. The exit status is 0 only when every selected task succeeded, 1 when
one failed, and 3 when the run stopped at manual gates nobody approved
(--approve-manual approves them up front); Ctrl-C kills the running tasks.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOnce(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], at, sel, pipelines, target, approve)
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "logical time: a date or date-time in the pipeline's zone (default now)")
	cmd.Flags().StringVar(&sel, "select", "", "tasks: task, task+, +task, +task+, group:NAME, comma-separated")
	cmd.Flags().StringSliceVar(&pipelines, "pipelines", []string{"examples"}, "pipeline directories, when PIPELINE is a name")
	cmd.Flags().StringVar(&target, "store", "", "store to record the run in (default: a temporary file, removed after)")
	cmd.Flags().BoolVar(&approve, "approve-manual", false, "approve the manual gates up front (otherwise the run stops at them and exits 3)")
	return cmd
}

func runOnce(ctx context.Context, out, errOut io.Writer, what, at, sel string, pipelines []string, target string, approve bool) error {
	var (
		g    *dag.Graph
		name = what
	)
	info, err := os.Stat(what)
	if err != nil && (strings.HasSuffix(what, ".yaml") || strings.HasSuffix(what, ".yml") || strings.ContainsRune(what, os.PathSeparator)) {
		return usageErr("%s: no such pipeline file: give a file that exists, or the name of a pipeline under --pipelines", what)
	}
	if err == nil && !info.IsDir() {
		p, errs := defs.ParseFile(what, defs.Options{})
		if errs.Err() == nil {
			var cerrs defs.Errors
			g, cerrs = dag.Compile([]*defs.Pipeline{p}, dag.Options{External: true, DispatchRate: -1})
			errs = append(errs, cerrs...)
		}
		if errs.Err() != nil {
			for _, e := range errs.Fatal() {
				fmt.Fprintln(errOut, e.Error())
			}
			return &exitError{code: exitFailed, err: fmt.Errorf("%s is not a valid pipeline file", what)}
		}
		name = p.Name
	} else {
		var err error
		if g, err = loadGraph(pipelines, errOut); err != nil {
			return err
		}
	}
	p := g.Pipeline(name)
	if p == nil {
		var names []string
		for _, q := range g.Pipelines() {
			names = append(names, q.Name)
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("no pipeline %q%s", name, defs.DidYouMean(name, names))}
	}
	when := time.Now().Truncate(time.Second)
	if at != "" {
		var err error
		if when, err = api.ParseWhen(at, p.Location, false); err != nil {
			return usageErr("--at: %v", err)
		}
	}
	tasks, err := g.Select(name, sel)
	if err != nil {
		return &exitError{code: exitFailed, err: errors.New(strings.TrimPrefix(err.Error(), "dag: "))}
	}
	spec := engine.BackfillSpec{Pipeline: name, From: when, To: when, Select: sel, Times: []time.Time{when}, MaxActiveRuns: 1, Rerun: engine.RerunAll,
		ApproveManual: approve}
	for _, t := range tasks {
		spec.Tasks = append(spec.Tasks, t.Name)
	}
	if target == "" {
		dir, err := os.MkdirTemp("", "ax-run-")
		if err != nil {
			return &exitError{code: exitFailed, err: err}
		}
		defer os.RemoveAll(dir)
		target = filepath.Join(dir, "ax.db")
	}
	st, err := store.Open(ctx, target, store.Options{})
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	defer st.Close()
	id, err := engine.CreateBackfill(ctx, st, spec, actor(), time.Now())
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	var eng *engine.Engine
	execs, err := executors(g, st, alertVia(&eng))
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	fmt.Fprintf(out, "run %s for %s: %d task(s)\n", name, api.Stamp(when, p.Location), len(spec.Tasks))
	events := make(chan engine.Event, 1024)
	eng, err = engine.New(engine.Config{NoSchedules: true, FailIfHeld: true, Holder: "run", Grace: time.Millisecond,
		OnEvent: func(ev engine.Event) { events <- ev }}, st, g, execs)
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- eng.Run(runCtx) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	failed := 0
	for {
		select {
		case ev := <-events:
			failed += printEvent(out, ev)
			continue
		case err := <-done:
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			return &exitError{code: exitFailed, err: errors.New("interrupted: running tasks were killed")}
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
		status := engine.StatusOf(ins, func(task string) bool { t := g.Task(task); return t != nil && t.Manual })
		if status.State != engine.RunAwaiting && bs[0].State != engine.BackfillDone && bs[0].State != engine.BackfillFailed {
			continue
		}
		stop()
		<-done
		for len(events) > 0 {
			failed += printEvent(out, <-events)
		}
		return runOutcome(out, name, status, ins, bs[0])
	}
}

// runOutcome reports how `ax run` ended: every task succeeded (exit 0), one
// failed (1), or it stopped at manual gates nobody approved (3). A task that
// did not run is never counted as succeeded.
func runOutcome(out io.Writer, name string, st engine.RunStatus, ins []axtype.Instance, b store.Backfill) error {
	succeeded := 0
	for _, in := range ins {
		if in.State == axtype.Success {
			succeeded++
		}
	}
	switch {
	case len(st.Failed) > 0 || b.FailedRuns > 0:
		return &exitError{code: exitFailed, err: fmt.Errorf("%s: %d of %d task(s) succeeded; failed: %s", name, succeeded, len(ins), strings.Join(st.Failed, ", "))}
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
		return &exitError{code: exitGated, err: errors.New(msg + "; run again with --approve-manual to approve them up front")}
	case succeeded != len(ins):
		return &exitError{code: exitFailed, err: fmt.Errorf("%s: %d of %d task(s) succeeded; the run ended %s", name, succeeded, len(ins), st.State)}
	}
	fmt.Fprintf(out, "ok: %d task(s) succeeded\n", succeeded)
	return nil
}

// printEvent prints an attempt starting or ending; it returns 1 for a failure.
func printEvent(w io.Writer, ev engine.Event) int {
	ts := time.Now().Format("15:04:05.000")
	if ev.Kind == "started" {
		fmt.Fprintf(w, "%s  start  %s\n", ts, ev.Task)
		return 0
	}
	line := fmt.Sprintf("%s  %-7s %s (%s)", ts, strings.ToLower(string(ev.State)), ev.Task, ev.Duration.Round(time.Millisecond))
	if ev.Error != "" {
		line += ": " + ev.Error
	}
	fmt.Fprintln(w, line)
	if ev.State == axtype.Failed || ev.State == axtype.Killed {
		return 1
	}
	return 0
}
