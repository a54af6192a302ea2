package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/direct"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/taskexec"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// LoadGraph compiles the pipelines of paths, printing problems the way ax
// validate does.
func LoadGraph(paths []string, stderr io.Writer) (*dag.Graph, error) {
	g, errs, err := dag.Load(paths, defs.Options{}, dag.Options{DispatchRate: -1})
	if err != nil {
		return nil, Usage("%v", err)
	}
	if g == nil {
		for _, e := range errs.Fatal() {
			fmt.Fprintln(stderr, e.Error())
		}
		return nil, Fail(fmt.Errorf("%d error(s) in the pipeline files (see ax validate)", len(errs.Fatal())))
	}
	return g, nil
}

type BackfillOptions struct {
	From, To, Select, Rerun string
	DryRun, Reverse         bool
	StopOnFailure           bool
	ApproveManual           bool
	WaitCross               bool
	Hold                    bool // under a pause: start it, what the pause covers held PAUSED (else refused)
	Standalone, Detach      bool
	MaxActive               int
	Pipelines               []string
	Store                   string
	Wait                    time.Duration
	API                     APIOptions
	SecretsDir              string            // --secrets-dir of the standalone engine's tasks
	Params                  map[string]string // every run's params (--param)
}

func RunBackfill(ctx context.Context, out, errOut io.Writer, pipeline string, f BackfillOptions) error {
	g, err := LoadGraph(f.Pipelines, errOut)
	if err != nil {
		return err
	}
	loc := time.UTC
	if p := g.Pipeline(pipeline); p != nil {
		loc = p.Location
	}
	from, err := api.ParseWhen(f.From, loc, false)
	if err != nil {
		return Usage("--from: %v", err)
	}
	to, err := api.ParseWhen(f.To, loc, true)
	if err != nil {
		return Usage("--to: %v", err)
	}
	spec, err := engine.PlanBackfill(g, engine.BackfillParams{Pipeline: pipeline, From: from, To: to, Select: f.Select,
		MaxActiveRuns: f.MaxActive, Reverse: f.Reverse, Rerun: f.Rerun, StopOnFailure: f.StopOnFailure,
		ApproveManual: f.ApproveManual, WaitCross: f.WaitCross, Hold: f.Hold, Params: f.Params})
	if err != nil {
		return Fail(err)
	}
	if f.DryRun {
		return WritePlan(out, spec, loc)
	}
	// Queued for a scheduler, the store must be its (a mistyped path must
	// not become a new store no scheduler reads); --standalone runs its own.
	st, err := store.Open(ctx, f.Store, store.Options{Existing: !f.Standalone})
	if err != nil {
		return Fail(err)
	}
	defer st.Close()
	var id int64
	if f.Standalone {
		// The lease first: while a server holds it, nothing is written.
		l, err := holdLease(ctx, st, "backfill:new:"+strconv.Itoa(os.Getpid()), "drop --standalone to queue the backfill for it")
		if err != nil {
			return err
		}
		if id, err = engine.CreateBackfillFenced(ctx, st, st.Fence(l.Epoch), g, spec, Actor(), time.Now()); err != nil {
			releaseLease(st, l)
			return Fail(err)
		}
		// Handed on to the backfill's own holder name, so that ax backfill
		// resume --standalone takes it back at once after this process is
		// killed.
		l, err = st.AcquireLease(ctx, store.LeaseParams{Holder: standaloneHolder(id), From: l.Holder, TTL: engine.DefaultLeaseTTL, Now: time.Now()})
		if err != nil {
			return Fail(fmt.Errorf("backfill %d stored, but its lease could not be kept: %w; continue it with: ax backfill resume %d --standalone", id, err, id))
		}
		defer releaseLease(st, l) // only if the engine never took it over: a stale epoch releases nothing
	} else if id, err = engine.CreateBackfill(ctx, st, g, spec, Actor(), time.Now()); err != nil {
		return Fail(fmt.Errorf("backfill refused: %w", err))
	}
	fmt.Fprintf(out, "backfill %d: %s, %d run(s) × %d task(s)\n", id, pipeline, len(spec.Times), len(spec.Tasks))
	return FollowBackfill(ctx, out, st, g, id, f)
}

// standaloneHolder names the lease holder of the engine of ax backfill
// --standalone and ax backfill resume --standalone for backfill id.
func standaloneHolder(id int64) string { return "backfill:" + strconv.FormatInt(id, 10) }

// holdLease takes the scheduler lease of st for holder, before the first
// write of a command that runs its own engine (ax run, ax backfill
// --standalone): while another scheduler holds it, the command refuses and
// nothing is written (the lease is taken in a transaction of its own, and
// every write after it is fenced by its epoch). The engine started next
// under the same holder takes it over.
func holdLease(ctx context.Context, st *store.Store, holder, hint string) (store.Lease, error) {
	l, err := st.AcquireLease(ctx, store.LeaseParams{Holder: holder, TTL: engine.DefaultLeaseTTL, Now: time.Now()})
	if errors.Is(err, store.ErrLeaseHeld) {
		return l, Fail(fmt.Errorf("%w; a scheduler runs on %s: %s (nothing was written)", err, st, hint))
	}
	if err != nil {
		return l, Fail(err)
	}
	return l, nil
}

// releaseLease gives back a lease holdLease took, when the command stops
// before its engine starts.
func releaseLease(st *store.Store, l store.Lease) {
	_ = st.ReleaseLease(context.Background(), store.LeaseParams{Holder: l.Holder, Epoch: l.Epoch, Now: time.Now()})
}

// FollowBackfill runs (standalone) or waits for a backfill, showing
// Progress, until it ends. The exit status is 0 only when no run failed.
func FollowBackfill(ctx context.Context, out io.Writer, st *store.Store, g *dag.Graph, id int64, f BackfillOptions) error {
	if f.Detach && !f.Standalone {
		fmt.Fprintf(out, "queued for the scheduler on %s; follow it with: ax backfill status %d\n", st, id)
		return nil
	}
	sa, err := StartStandalone(ctx, st, g, id, f.Standalone, f.SecretsDir)
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

// StartStandalone starts that engine when on, as standaloneHolder(id),
// whose lease the caller took (holdLease).
func StartStandalone(ctx context.Context, st *store.Store, g *dag.Graph, id int64, on bool, secretsDir string) (*standalone, error) {
	runCtx, stop := context.WithCancel(ctx)
	sa := &standalone{on: on, stop: stop, done: make(chan error, 1)}
	if !on {
		return sa, nil
	}
	secrets, err := OpenSecrets(secretsDir)
	if err != nil {
		stop()
		return nil, err
	}
	var eng *engine.Engine
	execs, err := taskexec.Executors(g, st, taskexec.AlertVia(&eng), secrets)
	if err != nil {
		stop()
		return nil, Fail(err)
	}
	eng, err = engine.New(engine.Config{NoSchedules: true, FailIfHeld: true, Holder: standaloneHolder(id)}, st, g, execs)
	if err != nil {
		stop()
		return nil, Fail(err)
	}
	go func() { sa.done <- eng.Run(runCtx) }()
	return sa, nil
}

// follow shows a backfill's Progress until it ends.
func (sa *standalone) follow(ctx context.Context, out io.Writer, st *store.Store, g *dag.Graph, id int64, f BackfillOptions) error {
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
				return Fail(fmt.Errorf("backfill %d: %w (a scheduler runs on this store: drop --standalone)", id, err))
			}
			return Fail(fmt.Errorf("backfill %d interrupted; continue it with: ax backfill resume %d", id, id))
		case <-ctx.Done():
			stop()
			if f.Standalone {
				<-engineDone
			}
			fmt.Fprintln(out)
			return Fail(fmt.Errorf("backfill %d interrupted; continue it with: ax backfill resume %d", id, id))
		case <-tick.C:
		}
		bs, err := st.Backfills(ctx, id)
		if err != nil || len(bs) == 0 {
			continue
		}
		b := bs[0]
		if !f.Standalone && b.State == axtype.BackfillPending && time.Since(start) > f.Wait {
			return Fail(fmt.Errorf("no scheduler picked up backfill %d within %s; it stays queued for the next ax server on %s, or run: ax backfill resume %d --standalone", id, f.Wait, st, id))
		}
		line := Progress(b, time.Since(start))
		if pr, err := st.BackfillProgress(ctx, id, api.ManualTasks(g, b.Pipeline)); err == nil {
			line += InstancesLine(pr)
		}
		if tty {
			fmt.Fprintf(out, "\r%s\x1b[K", line)
		} else if time.Since(lastLine) >= 5*time.Second || b.State == axtype.BackfillDone || b.State == axtype.BackfillFailed {
			fmt.Fprintln(out, line)
			lastLine = time.Now()
		}
		if b.State == axtype.BackfillDone || b.State == axtype.BackfillFailed || b.State == axtype.BackfillCancelled {
			if tty {
				fmt.Fprintln(out)
			}
			stop()
			if f.Standalone {
				<-engineDone
			}
			if b.FailedRuns > 0 || b.State != axtype.BackfillDone {
				return Fail(fmt.Errorf("backfill %d %s: %d of %d run(s) failed; %s", id, b.State, b.FailedRuns, b.TotalRuns, b.Error))
			}
			fmt.Fprintf(out, "backfill %d done: %d run(s)\n", id, b.TotalRuns)
			return nil
		}
	}
}

// Progress renders runs done/total, failures, elapsed and ETA.
// InstancesLine is the instance count of a backfill's Progress line: the
// gates awaiting approval apart, since they are not done.
func InstancesLine(p axtype.Progress) string {
	s := fmt.Sprintf("; instances %d/%d", p.Ended, p.Total)
	if p.Awaiting > 0 {
		s += fmt.Sprintf(", %d awaiting approval (ax trigger the gate, ax backfill approve ID for every run, or --approve-manual)", p.Awaiting)
	}
	return s
}

func Progress(b axtype.Backfill, elapsed time.Duration) string {
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

// WritePlan prints what a backfill would run: each logical time with the
// selected tasks in order, the manual gates marked "(gate)" and said how
// they get approved, and the waits on other pipelines.
func WritePlan(w io.Writer, spec axtype.BackfillSpec, loc *time.Location) error {
	fmt.Fprintf(w, "plan: %s, %d run(s) × %d task(s), rerun %s, max %d active\n", spec.Pipeline, len(spec.Times), len(spec.Tasks), spec.Rerun, spec.MaxActiveRuns)
	tasks := make([]string, len(spec.Tasks))
	for i, n := range spec.Tasks {
		tasks[i] = n
		if slices.Contains(spec.Gates, n) {
			tasks[i] += " (gate)"
		}
	}
	for _, at := range spec.Times {
		fmt.Fprintf(w, "%s  %s\n", api.Stamp(at, loc), strings.Join(tasks, " → "))
	}
	switch {
	case len(spec.Gates) > 0 && spec.ApproveManual:
		fmt.Fprintf(w, "gates: %s, approved up front in every run (--approve-manual)\n", strings.Join(spec.Gates, ", "))
	case len(spec.Gates) > 0:
		fmt.Fprintf(w, "gates: %s; every run waits at them for approval: approve them all at once with ax backfill approve ID once it started, or start it with --approve-manual\n", strings.Join(spec.Gates, ", "))
	}
	if len(spec.Waits) > 0 {
		fmt.Fprintln(w, "waits for other pipelines (--wait-cross):")
	}
	for _, x := range spec.Waits {
		fmt.Fprintf(w, "%s  %s waits for %s: %s\n", api.Stamp(x.At, loc), x.Task, x.Upstream, x.Window)
	}
	return nil
}

// OpenBackfill opens the store and reads the backfill whose id is arg; the
// caller closes the store.
func OpenBackfill(ctx context.Context, target, arg string) (*store.Store, axtype.Backfill, error) {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return nil, axtype.Backfill{}, Usage("%q is not a backfill id", arg)
	}
	st, err := store.Open(ctx, target, store.Options{Existing: true})
	if err != nil {
		return nil, axtype.Backfill{}, Fail(err)
	}
	bs, err := st.Backfills(ctx, id)
	if err == nil && len(bs) == 0 {
		err = fmt.Errorf("no backfill %d (ax backfill list shows them)", id)
	}
	if err != nil {
		st.Close()
		return nil, axtype.Backfill{}, Fail(err)
	}
	return st, bs[0], nil
}

// BackfillAPI starts a backfill through the server's API and follows it
// until it ends; with DryRun it prints the plan the server makes from its
// own pipelines and changes nothing.
func BackfillAPI(ctx context.Context, out io.Writer, pipeline string, f BackfillOptions) error {
	c, err := NewAPIClient(f.API.Server)
	if err != nil {
		return err
	}
	req := api.BackfillRequest{Pipeline: pipeline, From: f.From, To: f.To, Select: f.Select, MaxActiveRuns: f.MaxActive, Reverse: f.Reverse,
		Rerun: f.Rerun, StopOnFailure: f.StopOnFailure, ApproveManual: f.ApproveManual, WaitCross: f.WaitCross, Hold: f.Hold, Params: f.Params}
	if f.From == "" || f.To == "" {
		return Usage("give --from and --to")
	}
	req.DryRun = f.DryRun
	res, raw, err := c.StartBackfill(ctx, req)
	if err != nil {
		return err
	}
	if f.DryRun {
		if f.API.JSON {
			return PrintJSON(out, raw)
		}
		loc, err := api.APIZones(ctx, c, f.API.UTC).Of(pipeline)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "from the pipelines of %s\n", c.Base())
		return WritePlan(out, res.Plan, loc)
	}
	if f.API.JSON && f.Detach {
		return PrintJSON(out, raw)
	}
	fmt.Fprintf(out, "backfill %d: %s, %d run(s) × %d task(s), on %s\n", res.ID, pipeline, len(res.Plan.Times), len(res.Plan.Tasks), c.Base())
	if f.Detach {
		fmt.Fprintf(out, "follow it with: ax backfill status %d\n", res.ID)
		return nil
	}
	return followAPI(ctx, out, c, res.ID)
}

// ResumeBackfillAPI asks the server's API to continue a backfill (the
// primary applies it) and follows it until it ends, as BackfillAPI does.
func ResumeBackfillAPI(ctx context.Context, out io.Writer, f BackfillOptions, arg string) error {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return Usage("%q is not a backfill id", arg)
	}
	c, err := NewAPIClient(f.API.Server)
	if err != nil {
		return err
	}
	res, raw, err := c.ResumeBackfill(ctx, id)
	if err != nil || (f.API.JSON && f.Detach) {
		return OrThen(err, func() error { return PrintJSON(out, raw) })
	}
	fmt.Fprintln(out, res.Result)
	if f.Detach {
		fmt.Fprintf(out, "follow it with: ax backfill status %d\n", id)
		return nil
	}
	return followAPI(ctx, out, c, id)
}

// followAPI prints backfill id's progress from the API until it ends.
func followAPI(ctx context.Context, out io.Writer, c *api.Client, id int64) error {
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := ""
	for {
		v, _, err := c.Backfill(ctx, id)
		if err != nil {
			return err
		}
		line := Progress(v.Backfill, time.Since(start)) + InstancesLine(v.Instances)
		if line != last {
			fmt.Fprintln(out, line)
			last = line
		}
		switch v.State {
		case axtype.BackfillDone, axtype.BackfillFailed, axtype.BackfillCancelled:
			if v.FailedRuns > 0 || v.State != axtype.BackfillDone {
				return Fail(fmt.Errorf("backfill %d %s: %d of %d run(s) failed; %s", v.ID, v.State, v.FailedRuns, v.TotalRuns, v.Error))
			}
			fmt.Fprintf(out, "backfill %d done: %d run(s)\n", v.ID, v.TotalRuns)
			return nil
		}
		select {
		case <-ctx.Done():
			return Fail(fmt.Errorf("stopped following backfill %d; it goes on on the server (ax backfill status %d, ax backfill cancel %d)", id, id, id))
		case <-tick.C:
		}
	}
}

// BackfillStatus prints a backfill's progress, from the API or, viaStore,
// from the store at target.
func BackfillStatus(ctx context.Context, w io.Writer, viaStore bool, target string, af APIOptions, arg string) error {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return Usage("%q is not a backfill id", arg)
	}
	s, done, err := Connect(ctx, af, Target{ViaStore: viaStore, Store: target})
	if err != nil {
		return err
	}
	defer done()
	v, raw, err := s.Backfill(ctx, id)
	if err != nil || (af.JSON && raw != nil) {
		return OrThen(asked(err), func() error { return PrintJSON(w, raw) })
	}
	line := Progress(v.Backfill, v.UpdatedAt.Sub(v.CreatedAt))
	if raw != nil {
		line += InstancesLine(v.Instances) // counted by the server, which knows the manual gates
	}
	fmt.Fprintln(w, line)
	if v.Error != "" {
		fmt.Fprintln(w, v.Error)
	}
	return nil
}

// ListBackfills lists backfills, newest first, from the API or, viaStore,
// from the store at target.
func ListBackfills(ctx context.Context, w io.Writer, viaStore bool, target string, af APIOptions) error {
	s, done, err := Connect(ctx, af, Target{ViaStore: viaStore, Store: target})
	if err != nil {
		return err
	}
	defer done()
	views, raw, err := s.Backfills(ctx)
	if err != nil || (af.JSON && raw != nil) {
		return OrThen(asked(err), func() error { return PrintJSON(w, raw) })
	}
	zs := s.Zones(ctx, af.UTC)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPIPELINE\tSTATE\tRUNS\tFAILED\tBY\tCREATED")
	for _, b := range views {
		loc, err := zs.Of(b.Pipeline)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%d\t%s\t%s\n", b.ID, b.Pipeline, b.State, b.DoneRuns, b.TotalRuns, b.FailedRuns, b.Actor, api.Stamp(b.CreatedAt, loc))
	}
	return tw.Flush()
}

// CancelBackfill asks the API to stop a backfill from starting more runs.
func CancelBackfill(ctx context.Context, w io.Writer, af APIOptions, arg string) error {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return Usage("%q is not a backfill id", arg)
	}
	c, err := NewAPIClient(af.Server)
	if err != nil {
		return err
	}
	res, raw, err := c.CancelBackfill(ctx, id)
	if err != nil || af.JSON {
		return OrThen(err, func() error { return PrintJSON(w, raw) })
	}
	_, err = fmt.Fprintln(w, res.Result)
	return err
}

// ResumeBackfill queues the resume of a backfill in the store of f for the
// primary (or, with --standalone, an engine started here) and follows it.
func ResumeBackfill(ctx context.Context, w, errOut io.Writer, f BackfillOptions, arg string) error {
	g, err := LoadGraph(f.Pipelines, errOut)
	if err != nil {
		return err
	}
	st, b, err := OpenBackfill(ctx, f.Store, arg)
	if err != nil {
		return err
	}
	defer st.Close()
	id := b.ID
	if b.State == axtype.BackfillDone {
		return Fail(fmt.Errorf("backfill %d is done already", id))
	}
	// The primary applies the resume (fenced, action-logged); with
	// --standalone that is the engine started here, under the lease taken
	// before the request is queued.
	if f.Standalone {
		l, err := holdLease(ctx, st, standaloneHolder(id), "drop --standalone to have it resume the backfill")
		if err != nil {
			return err
		}
		defer releaseLease(st, l) // only if the engine never took it over: a stale epoch releases nothing
	}
	sa, err := StartStandalone(ctx, st, g, id, f.Standalone, f.SecretsDir)
	if err != nil {
		return err
	}
	defer sa.stop()
	res, err := direct.QueueRequest(ctx, st, engine.ResumeBackfill{Backfill: id}, engine.By{Actor: Actor(), Reason: "ax backfill resume"}, f.Wait)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, res)
	if f.Detach && !f.Standalone {
		return nil
	}
	return sa.follow(ctx, w, st, g, id, f)
}

func NewBackfillCmd() *cobra.Command {
	var (
		f      BackfillOptions
		params []string
	)
	cmd := &cobra.Command{
		Use:   "backfill PIPELINE --from T1 --to T2",
		Short: "Run a pipeline (or a selection of it) once for every logical time its schedule gives in a range",
		Long: `Run a pipeline, or the tasks --select names (task, task+, +task, +task+,
group:NAME, comma-separated), once for every logical time its schedule gives
between --from and --to (both inclusive; a date or a date-time, read in the
pipeline's time zone), each task receiving its logical time, in dependency
order. Tasks outside the selection count as done.

By default it goes to a running ax server's API (--server, AX_SERVER),
which plans it from its own pipeline files; --dry-run prints the plan the
server would make, its manual gates marked, and changes nothing (with
--pipelines, the plan from those files, without a server); with --store it is written into
that store for the server on it to pick up; --standalone runs it here, on an
engine of its own, and exits when done. Either way it resumes where it
stopped after an interruption (ax backfill resume ID), without running any
succeeded instance again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSecretsDir(f); err != nil {
				return err
			}
			var err error
			if f.Params, err = ParseParams(params); err != nil {
				return err
			}
			local := cmd.Flags().Changed("pipelines")
			if f.DryRun && !local && (f.Standalone || viaStore(cmd)) {
				return Usage("--dry-run with --store or --standalone plans from pipeline files: name them with --pipelines (without these flags it plans from the server's)")
			}
			if !f.Standalone && !viaStore(cmd) && !(f.DryRun && local) {
				return BackfillAPI(cmd.Context(), cmd.OutOrStdout(), args[0], f)
			}
			return RunBackfill(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.From, "from", "", "first logical time: 2026-03-01 or 2026-03-01T02:00:00 (pipeline time zone)")
	fl.StringVar(&f.To, "to", "", "last logical time, inclusive (a date means the whole day)")
	fl.StringVar(&f.Select, "select", "", "tasks: task, task+, +task, +task+, group:NAME, comma-separated")
	fl.BoolVar(&f.DryRun, "dry-run", false, "print the plan and change nothing")
	fl.IntVar(&f.MaxActive, "max-active-runs", 1, "runs in flight at once")
	fl.BoolVar(&f.Reverse, "reverse", false, "newest logical time first")
	fl.StringVar(&f.Rerun, "rerun", axtype.RerunNone, "existing instances: none (fill gaps only), failed (rerun failed ones), all")
	fl.BoolVar(&f.StopOnFailure, "stop-on-failure", false, "start no new run after a run failed")
	fl.BoolVar(&f.ApproveManual, "approve-manual", false, "approve the manual gates of its runs up front (otherwise each run waits at its gates for ax backfill approve ID or ax trigger)")
	fl.BoolVar(&f.WaitCross, "wait-cross", false, "wait for other pipelines' runs for the same dates, as scheduled runs do (otherwise they count as done)")
	fl.BoolVar(&f.Hold, "hold", false, "under a pause: start it, with what the pause covers held PAUSED until the resume (without it the backfill is refused)")
	fl.StringArrayVar(&params, "param", nil, "KEY=VALUE given to every run, over the tasks' params (repeatable)")
	addRunFlags(fl, &f)
	addAPIFlags(cmd, &f.API)
	cmd.AddCommand(NewBackfillResumeCmd(), NewBackfillStatusCmd(), NewBackfillListCmd(), NewBackfillCancelCmd(), NewBackfillApproveCmd())
	return cmd
}

// addRunFlags adds the flags that say where and how a backfill runs.
func addRunFlags(fl *pflag.FlagSet, f *BackfillOptions) {
	fl.BoolVar(&f.Standalone, "standalone", false, "run it here on an engine of its own instead of the server's")
	fl.BoolVar(&f.Detach, "detach", false, "queue it for the server and return at once")
	fl.StringSliceVar(&f.Pipelines, "pipelines", []string{"examples"}, "pipeline files or directories")
	fl.StringVar(&f.Store, "store", direct.DefaultPath, "use this store instead of the server's API: a SQLite file path, mysql://user:pass@tcp(host:3306)/db or postgres://user:pass@host:5432/db")
	fl.DurationVar(&f.Wait, "wait", 30*time.Second, "without --standalone: how long to wait for a server to pick it up")
	AddSecretsFlag(fl, &f.SecretsDir)
}

func NewBackfillResumeCmd() *cobra.Command {
	var f BackfillOptions
	cmd := &cobra.Command{
		Use:   "resume ID",
		Short: "Continue an interrupted backfill without rerunning what succeeded",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSecretsDir(f); err != nil {
				return err
			}
			if !f.Standalone && !viaStore(cmd) {
				return ResumeBackfillAPI(cmd.Context(), cmd.OutOrStdout(), f, args[0])
			}
			return ResumeBackfill(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f, args[0])
		},
	}
	addRunFlags(cmd.Flags(), &f)
	addAPIFlags(cmd, &f.API)
	return cmd
}

func NewBackfillStatusCmd() *cobra.Command {
	var (
		target string
		af     APIOptions
	)
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show a backfill's progress",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return BackfillStatus(cmd.Context(), cmd.OutOrStdout(), viaStore(cmd), target, af, args[0])
		},
	}
	cmd.Flags().StringVar(&target, "store", direct.DefaultPath, "read this store instead of calling the API")
	addAPIFlags(cmd, &af)
	return cmd
}

func NewBackfillListCmd() *cobra.Command {
	var (
		target string
		af     APIOptions
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List backfills, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ListBackfills(cmd.Context(), cmd.OutOrStdout(), viaStore(cmd), target, af)
		},
	}
	cmd.Flags().StringVar(&target, "store", direct.DefaultPath, "read this store instead of calling the API")
	addAPIFlags(cmd, &af)
	return cmd
}

func NewBackfillCancelCmd() *cobra.Command {
	var af APIOptions
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Stop a backfill from starting more runs (those in flight finish)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return CancelBackfill(cmd.Context(), cmd.OutOrStdout(), af, args[0])
		},
	}
	addAPIFlags(cmd, &af)
	return cmd
}

func NewBackfillApproveCmd() *cobra.Command {
	var (
		f    OpOptions
		hold bool
	)
	cmd := &cobra.Command{
		Use:   "approve ID",
		Short: "Approve the manual gates of every run of a backfill, those to come included",
		Long: `Approve, in one action, the manual gates of every run of a backfill: the
gates its runs wait at now are approved (each then runs once its upstreams
have succeeded), and the runs it has yet to start are created approved.
Refused, with nothing changed, for an unknown or finished backfill, one
that selects no manual task, and under a pause of a gate unless --hold
(the approved gates then wait PAUSED until the resume).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return Usage("%q is not a backfill id (ax backfill list shows them)", args[0])
			}
			return Submit(cmd.Context(), cmd.OutOrStdout(), f, engine.ApproveBackfill{Backfill: id, Hold: hold})
		},
	}
	addOpFlags(cmd, &f)
	cmd.Flags().BoolVar(&hold, "hold", false, "under a pause of a gate: approve it, held PAUSED until the resume (without it the approval is refused)")
	return cmd
}

func NewRunCmd() *cobra.Command {
	var (
		at, sel, target string
		secretsDir      string
		pipelines       []string
		approve, force  bool
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
(--approve-manual approves them up front); Ctrl-C kills the running tasks.
A pipeline with disabled: true is refused with the reason (exit 1) unless
--ignore-disabled is given.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return RunOnce(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], at, sel, pipelines, target, approve, force, secretsDir)
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "logical time: a date-time in the pipeline's zone, or a date: its schedule's fire that day (default now)")
	cmd.Flags().StringVar(&sel, "select", "", "tasks: task, task+, +task, +task+, group:NAME, comma-separated")
	cmd.Flags().StringSliceVar(&pipelines, "pipelines", []string{"examples"}, "pipeline directories, when PIPELINE is a name")
	cmd.Flags().StringVar(&target, "store", "", "store to record the run in (default: a temporary file, removed after)")
	cmd.Flags().BoolVar(&approve, "approve-manual", false, "approve the manual gates up front (otherwise the run stops at them and exits 3)")
	cmd.Flags().BoolVar(&force, "ignore-disabled", false, "run a pipeline with disabled: true all the same (otherwise refused)")
	AddSecretsFlag(cmd.Flags(), &secretsDir)
	return cmd
}
