package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/store"
)

// crossWaits lists what the runs of a backfill of tasks sel at times wait
// for in other pipelines: each dependency's window (defs.CrossWindow) for
// the schedule sched whose runs hold them, in loc.
func crossWaits(sel []*defs.Task, sched *defs.Schedule, loc *time.Location, times []time.Time) []CrossWait {
	var out []CrossWait
	for _, at := range times {
		for _, t := range sel {
			for _, d := range t.DependsOn {
				if d.Pipeline != "" {
					out = append(out, CrossWait{At: at, Task: t.Name, Upstream: d.String(), Window: defs.CrossWindow(d, sched, loc, at).String()})
				}
			}
		}
	}
	return out
}

// BackfillParams are the options of `ax backfill`.
type BackfillParams struct {
	Pipeline      string
	From, To      time.Time // inclusive
	Select        string
	MaxActiveRuns int // zero means 1
	Reverse       bool
	Rerun         string // zero means none
	StopOnFailure bool
	ApproveManual bool
	WaitCross     bool
	Hold          bool
	// Params are given to every run, as a trigger's --param values.
	Params map[string]string
}

// PlanBackfill returns what a backfill would run: one logical time per fire
// of the schedule whose runs hold the selected tasks (the pipeline's, or a
// task cron's) in [From, To], and the selected tasks in dependency order.
// It writes nothing; bad parameters are errors that say what to fix.
func PlanBackfill(g *dag.Graph, p BackfillParams) (BackfillSpec, error) {
	pl := g.Pipeline(p.Pipeline)
	if pl == nil {
		var names []string
		for _, q := range g.Pipelines() {
			names = append(names, q.Name)
		}
		return BackfillSpec{}, fmt.Errorf("no pipeline %q%s", p.Pipeline, defs.DidYouMean(p.Pipeline, names))
	}
	switch {
	case p.From.IsZero() || p.To.IsZero():
		return BackfillSpec{}, errors.New("give both --from and --to")
	case p.From.After(p.To):
		return BackfillSpec{}, fmt.Errorf("--from %s is after --to %s", p.From.Format(time.RFC3339), p.To.Format(time.RFC3339))
	}
	if p.Rerun == "" {
		p.Rerun = RerunNone
	}
	if p.Rerun != RerunNone && p.Rerun != RerunFailed && p.Rerun != RerunAll {
		return BackfillSpec{}, fmt.Errorf("--rerun %q: use none, failed or all", p.Rerun)
	}
	if p.MaxActiveRuns == 0 {
		p.MaxActiveRuns = 1
	}
	if p.MaxActiveRuns < 0 {
		return BackfillSpec{}, fmt.Errorf("--max-active-runs %d: give a positive number", p.MaxActiveRuns)
	}
	sel, err := g.Select(p.Pipeline, p.Select)
	if err != nil {
		return BackfillSpec{}, errors.New(strings.TrimPrefix(err.Error(), "dag: "))
	}
	// The schedule: the trigger whose run set holds the selection.
	var sched *defs.Schedule
	for _, tr := range g.Triggers() {
		if tr.Pipeline != p.Pipeline {
			continue
		}
		for _, t := range sel {
			if slices.Contains(tr.Tasks, t.Name) {
				if sched != nil && sched != tr.Schedule {
					return BackfillSpec{}, fmt.Errorf("the selection spans two schedules of %s: select the tasks of one", p.Pipeline)
				}
				sched = tr.Schedule
				break
			}
		}
	}
	if sched == nil {
		return BackfillSpec{}, fmt.Errorf("the selected tasks of %s are started by no schedule: use ax trigger", p.Pipeline)
	}
	if err := backfillParams(pl, sel, p.Params); err != nil {
		return BackfillSpec{}, err
	}
	spec := BackfillSpec{Pipeline: p.Pipeline, From: p.From, To: p.To, Select: p.Select, MaxActiveRuns: p.MaxActiveRuns, Rerun: p.Rerun, StopOnFailure: p.StopOnFailure,
		ApproveManual: p.ApproveManual, WaitCross: p.WaitCross, Hold: p.Hold, Params: p.Params}
	for _, t := range sel {
		spec.Tasks = append(spec.Tasks, t.Name)
		if t.Manual {
			spec.Gates = append(spec.Gates, t.Name)
		}
	}
	// Next is strictly after its argument: start just before From.
	for at := sched.Next(p.From.Add(-time.Nanosecond)); !at.IsZero() && !at.After(p.To); at = sched.Next(at) {
		spec.Times = append(spec.Times, at)
		if len(spec.Times) > 1_000_000 {
			return BackfillSpec{}, errors.New("more than 1,000,000 logical times in the range: backfill a shorter range at a time")
		}
	}
	if len(spec.Times) == 0 {
		return BackfillSpec{}, fmt.Errorf("the schedule %q gives no fire time between %s and %s", sched.Spec(), p.From.Format(time.RFC3339), p.To.Format(time.RFC3339))
	}
	if p.Reverse {
		slices.Reverse(spec.Times)
	}
	if p.WaitCross {
		spec.Waits = crossWaits(sel, sched, pl.Location, spec.Times)
	}
	return spec, nil
}

// bfState is an active backfill as the loop drives it.
type bfState struct {
	rec     store.Backfill
	spec    BackfillSpec
	next    int                 // index of the next logical time to start
	active  map[int64]time.Time // run id → logical time
	created map[int64]bool      // logical times (Unix ms) whose runs existed at resume: adopted, not started again
	failed  []string            // "logical: task, task" of failed runs
	stop    bool
}

// backfiller owns the backfills in progress on this primary: their state,
// when the store was last polled for new and resumed ones, and whether
// results came in since they last stepped. Its rule, due: step as soon as
// results came in while some are active, and poll the store every second.
// It creates runs only through its host's newRunWith (trigger.go), so that
// a backfill's runs are runs like any other, and learns that a run is over
// from the resolver's rule (runFinished); it must not record results nor
// start attempts. The loop goroutine owns it.
type backfiller struct {
	backfills map[int64]*bfState
	bfChecked time.Time
	bfDirty   bool // results were applied since the backfills last stepped

	host  backfillHost
	st    backfillReader
	log   *slog.Logger
	gauge *prometheus.GaugeVec // ax_backfill_runs, by backfill and state
	sched *inForce             // the schedule in force (snapshot.go)
}

// backfillHost is what the backfiller asks of the other components: the
// planner creates its runs, the resolver says when a run is over, the
// leadership fences its writes, and the loop takes another turn.
type backfillHost interface {
	newRunWith(ctx context.Context, spec newRunSpec, now time.Time) (*runState, error)
	runFinished(ctx context.Context, runID int64) (done bool, failedTasks []string, err error)
	w() *store.Fence // the leadership's fence
	soon()
}

// backfillReader is what the backfiller reads from the store.
type backfillReader interface {
	Backfills(ctx context.Context, id int64) ([]store.Backfill, error)
	BackfillRuns(ctx context.Context, backfill int64) ([]axtype.Run, error)
	Instances(ctx context.Context, f store.InstanceFilter) ([]axtype.Instance, error)
}

func newBackfiller(host backfillHost, st backfillReader, log *slog.Logger, gauge *prometheus.GaugeVec) backfiller {
	return backfiller{backfills: map[int64]*bfState{}, sched: &inForce{&snapshot{}}, host: host, st: st, log: log, gauge: gauge}
}

// newTerm forgets the backfills of an earlier term: the store is read again.
func (b *backfiller) newTerm() { b.backfills = map[int64]*bfState{} }

// resultsIn notes that results were recorded: active backfills step at
// the next turn.
func (b *backfiller) resultsIn() { b.bfDirty = true }

// pollNext has the store read for new and resumed backfills at the next turn.
func (b *backfiller) pollNext() { b.bfChecked = time.Time{} }

// due reports whether the backfills step at now: as soon as results came
// in while some are active (a finished run makes room for the next at
// once); and every second, when poll is set, the store is read for new and
// resumed ones.
func (b *backfiller) due(now time.Time) (step, poll bool) {
	poll = now.Sub(b.bfChecked) >= time.Second
	if !poll && !(b.bfDirty && len(b.backfills) > 0) {
		return false, false
	}
	if poll {
		b.bfChecked = now
	}
	b.bfDirty = false
	return true, poll
}

// drive starts the runs that backfills may have in flight and records
// progress: with poll, it picks up new and resumed backfills from the
// store, and drops the ones cancelled.
func (b *backfiller) drive(ctx context.Context, now time.Time, poll bool) error {
	var recs []store.Backfill
	if poll {
		var err error
		if recs, err = b.st.Backfills(ctx, 0); err != nil {
			return err
		}
	}
	for _, r := range recs {
		bf := b.backfills[r.ID]
		switch {
		case bf == nil && (r.State == BackfillPending || r.State == BackfillRunning):
			var err error
			if bf, err = b.resume(ctx, r); err != nil {
				r.State, r.Error = BackfillFailed, err.Error()
				if uerr := b.host.w().UpdateBackfill(ctx, r, now); uerr != nil {
					return uerr
				}
				continue
			}
			b.backfills[r.ID] = bf
		case bf != nil && r.State == BackfillCancelled:
			delete(b.backfills, r.ID)
			b.forget(r.ID)
		}
	}
	for _, id := range sortedIDs(b.backfills) {
		if err := b.step(ctx, b.backfills[id], now); err != nil {
			return err
		}
	}
	return nil
}

// resume rebuilds a backfill's progress from the runs it created (their
// dedup keys make creating one twice impossible).
func (b *backfiller) resume(ctx context.Context, r store.Backfill) (*bfState, error) {
	spec, err := b.spec(r)
	if err != nil {
		return nil, err
	}
	bf := &bfState{rec: r, spec: spec, active: map[int64]time.Time{}, created: map[int64]bool{}}
	runs, err := b.st.BackfillRuns(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	created := map[int64]int64{}
	for _, run := range runs {
		created[run.LogicalTime.UnixMilli()] = run.ID
	}
	bf.rec.DoneRuns, bf.rec.FailedRuns, bf.rec.TotalRuns = 0, 0, len(bf.spec.Times)
	// Every run created before is adopted (finished ones are counted by the
	// first step); the others start in order. Created runs need not be a
	// prefix: a logical time with nothing to do creates none.
	for _, at := range bf.spec.Times {
		if id, ok := created[at.UnixMilli()]; ok {
			bf.active[id] = at
			bf.created[at.UnixMilli()] = true
		}
	}
	bf.rec.State = BackfillRunning
	b.log.Info("backfill_resumed", "backfill", r.ID, "pipeline", bf.spec.Pipeline, "runs", len(bf.spec.Times), "created", len(created))
	return bf, nil
}

// spec reads a backfill's stored spec and checks that its pipeline and
// tasks are still defined.
func (b *backfiller) spec(r store.Backfill) (BackfillSpec, error) {
	var spec BackfillSpec
	if err := json.Unmarshal([]byte(r.Spec), &spec); err != nil {
		return spec, fmt.Errorf("backfill %d: bad spec: %v", r.ID, err)
	}
	if b.sched.g.Pipeline(spec.Pipeline) == nil {
		return spec, fmt.Errorf("backfill %d: pipeline %s is no longer defined", r.ID, spec.Pipeline)
	}
	for _, n := range spec.Tasks {
		if b.sched.tasks[spec.Pipeline+"."+n] == nil {
			return spec, fmt.Errorf("backfill %d: task %s.%s is no longer defined", r.ID, spec.Pipeline, n)
		}
	}
	return spec, nil
}

// step counts finished runs and starts new ones up to MaxActiveRuns.
func (b *backfiller) step(ctx context.Context, bf *bfState, now time.Time) error {
	changed, err := b.countFinished(ctx, bf)
	if err != nil {
		return err
	}
	for !bf.stop && len(bf.active) < bf.spec.MaxActiveRuns && bf.next < len(bf.spec.Times) {
		at := bf.spec.Times[bf.next]
		bf.next++
		if bf.created[at.UnixMilli()] {
			continue // adopted at resume: in active already
		}
		changed = true
		names, err := b.tasksToRun(ctx, bf.spec, at)
		if err != nil {
			return err
		}
		if len(names) == 0 { // everything succeeded before: nothing to do
			bf.rec.DoneRuns++
			continue
		}
		rs, err := b.host.newRunWith(ctx, bf.runSpec(names, at), now)
		if errors.Is(err, store.ErrDuplicate) {
			// Created since resume read the runs: this view is out of
			// date. The next poll rebuilds it from the store.
			b.log.Warn("backfill_reloaded", "backfill", bf.rec.ID, "logical_time", at.Format(time.RFC3339))
			delete(b.backfills, bf.rec.ID)
			return nil
		}
		if err != nil {
			return err
		}
		bf.active[rs.id] = at
	}
	finished := len(bf.active) == 0 && (bf.stop || bf.next >= len(bf.spec.Times))
	if !changed && !finished {
		return nil
	}
	if finished {
		bf.rec.State = BackfillDone
		if bf.stop {
			bf.rec.State = BackfillFailed
		}
		delete(b.backfills, bf.rec.ID)
		b.log.Info("backfill_finished", "backfill", bf.rec.ID, "state", bf.rec.State, "runs", bf.rec.DoneRuns, "failed", bf.rec.FailedRuns)
	}
	bf.rec.Error = ""
	if len(bf.failed) > 0 {
		bf.rec.Error = "failed runs: " + strings.Join(bf.failed, "; ")
	}
	b.publish(bf, finished)
	return b.host.w().UpdateBackfill(ctx, bf.rec, now)
}

// countFinished counts the runs of bf that are over, with the failed ones
// (which stop it under StopOnFailure); it reports whether any was.
func (b *backfiller) countFinished(ctx context.Context, bf *bfState) (changed bool, err error) {
	for _, id := range sortedIDs(bf.active) {
		done, failedTasks, err := b.host.runFinished(ctx, id)
		if err != nil {
			return changed, err
		}
		if !done {
			continue
		}
		changed = true
		at := bf.active[id]
		delete(bf.active, id)
		bf.rec.DoneRuns++
		if len(failedTasks) > 0 {
			bf.rec.FailedRuns++
			bf.failed = append(bf.failed, fmt.Sprintf("%s: %s", at.In(b.sched.g.Pipeline(bf.spec.Pipeline).Location).Format(time.RFC3339), strings.Join(failedTasks, ", ")))
			if bf.spec.StopOnFailure {
				bf.stop = true
			}
		}
	}
	return changed, nil
}

// runSpec is the run of backfill b at logical time at, of tasks names
// (approved at their gates with --approve-manual).
func (b *bfState) runSpec(names []string, at time.Time) newRunSpec {
	spec := newRunSpec{pipeline: b.spec.Pipeline, trig: fmt.Sprintf("backfill:%d", b.rec.ID), kind: axtype.RunBackfill, names: names, at: at,
		key: fmt.Sprintf("backfill/%d/%d", b.rec.ID, at.UnixMilli()), backfill: b.rec.ID, waitCross: b.spec.WaitCross}
	spec.params, _ = encodeParams(b.spec.Params) // checked when planned
	if b.spec.ApproveManual {
		spec.approvedBy = "backfill:" + strconv.FormatInt(b.rec.ID, 10) + " (--approve-manual, by " + b.rec.Actor + ")"
		if b.spec.ApprovedBy != "" {
			spec.approvedBy = "backfill:" + strconv.FormatInt(b.rec.ID, 10) + " (approved by " + b.spec.ApprovedBy + ")"
		}
		spec.approve = map[string]bool{}
		for _, n := range names {
			spec.approve[n] = true
		}
	}
	return spec
}

// publish sets ax_backfill_runs for an active backfill, or drops its
// series once it finished.
func (b *backfiller) publish(bf *bfState, finished bool) {
	if finished {
		b.forget(bf.rec.ID)
		return
	}
	bid := strconv.FormatInt(bf.rec.ID, 10)
	b.gauge.WithLabelValues(bid, "done").Set(float64(bf.rec.DoneRuns))
	b.gauge.WithLabelValues(bid, "failed").Set(float64(bf.rec.FailedRuns))
	b.gauge.WithLabelValues(bid, "total").Set(float64(bf.rec.TotalRuns))
}

// forget drops the series of a backfill that ended (done, failed or
// cancelled): only active backfills have them, so backfill ids, which grow
// for ever, are not an unbounded label.
func (b *backfiller) forget(id int64) {
	b.gauge.DeletePartialMatch(prometheus.Labels{"backfill": strconv.FormatInt(id, 10)})
}

// cancel stops a backfill from starting more runs; the runs in flight
// finish. A finished backfill cannot be cancelled.
func (b *backfiller) cancel(ctx context.Context, r CancelBackfill, by By, now time.Time) (string, error) {
	bs, err := b.st.Backfills(ctx, r.Backfill)
	if err != nil {
		return "", err
	}
	if len(bs) == 0 {
		return "", fmt.Errorf("no backfill %d", r.Backfill)
	}
	rec := bs[0]
	if bf := b.backfills[r.Backfill]; bf != nil {
		rec = bf.rec
	}
	switch rec.State {
	case BackfillDone, BackfillFailed, BackfillCancelled:
		return "", fmt.Errorf("backfill %d is %s already", rec.ID, rec.State)
	}
	active := 0
	if bf := b.backfills[r.Backfill]; bf != nil {
		active = len(bf.active)
		delete(b.backfills, r.Backfill)
	}
	b.forget(r.Backfill)
	rec.State = BackfillCancelled
	rec.Error = strings.TrimSpace(rec.Error + " cancelled by " + by.Actor)
	if err := b.host.w().UpdateBackfill(ctx, rec, now); err != nil {
		return "", err
	}
	return fmt.Sprintf("backfill %d cancelled at %d/%d runs; %d run(s) in flight finish", rec.ID, rec.DoneRuns, rec.TotalRuns, active), nil
}

// resumeCancelled continues a backfill an operator cancelled, that stopped
// on a failure, or whose process died: it goes back to pending, under this
// engine's epoch, and the next poll of the backfills adopts the runs it
// created and starts the rest (resume). One that this engine drives
// already, or that waits to be picked up, is left as it is; a done one,
// or one whose pipeline or tasks are gone, is refused with nothing changed.
func (b *backfiller) resumeCancelled(ctx context.Context, r ResumeBackfill, now time.Time) (string, error) {
	bs, err := b.st.Backfills(ctx, r.Backfill)
	if err != nil {
		return "", err
	}
	if len(bs) == 0 {
		return "", fmt.Errorf("no backfill %d (ax backfill list shows them)", r.Backfill)
	}
	rec := bs[0]
	if bf := b.backfills[rec.ID]; bf != nil {
		return fmt.Sprintf("backfill %d runs already (%d/%d runs)", rec.ID, bf.rec.DoneRuns, bf.rec.TotalRuns), nil
	}
	switch rec.State {
	case BackfillDone:
		return "", fmt.Errorf("backfill %d is done already", rec.ID)
	case BackfillPending, BackfillRunning:
		return fmt.Sprintf("backfill %d is queued already: the scheduler continues it", rec.ID), nil
	}
	if _, err := b.spec(rec); err != nil { // what cannot resume is refused now, not failed later
		return "", err
	}
	was := rec.State
	rec.State = BackfillPending
	if err := b.host.w().UpdateBackfill(ctx, rec, now); err != nil {
		return "", err
	}
	b.pollNext() // picked up at the next turn
	b.host.soon()
	return fmt.Sprintf("backfill %d resumed (was %s at %d/%d runs)", rec.ID, was, rec.DoneRuns, rec.TotalRuns), nil
}

// tasksToRun returns the selected tasks to run for logical time at under
// the spec's rerun policy, in dependency order: none fills gaps only
// (an instance in any state is left alone), failed also reruns failed and
// killed ones, all reruns succeeded ones too. One that is waiting or running
// elsewhere (the live schedule) is never started beside it.
func (b *backfiller) tasksToRun(ctx context.Context, spec BackfillSpec, at time.Time) ([]string, error) {
	all, err := b.st.Instances(ctx, store.InstanceFilter{Pipeline: spec.Pipeline, LogicalFrom: at, LogicalTo: at, Limit: 1 << 20})
	if err != nil {
		return nil, err
	}
	byTask := map[string][]axtype.Instance{}
	for _, in := range all {
		byTask[in.TaskID] = append(byTask[in.TaskID], in)
	}
	var out []string
	for _, n := range spec.Tasks {
		succeeded, failed, active := false, false, false
		for _, in := range byTask[spec.Pipeline+"."+n] {
			switch in.State {
			case axtype.Success:
				succeeded = true
			case axtype.Failed, axtype.Killed:
				failed = true
			case axtype.Waiting:
				// Blocked for good behind a failure in a finished run: as failed.
				done, _, err := b.host.runFinished(ctx, in.RunID)
				if err != nil {
					return nil, err
				}
				if done {
					failed = true
				} else {
					active = true
				}
			default:
				active = true // scheduled or running elsewhere (the live schedule): never run it twice at once
			}
		}
		switch {
		case active:
		case spec.Rerun == RerunAll:
			out = append(out, n)
		case succeeded:
		case failed && spec.Rerun == RerunNone:
		default: // missing, or failed under --rerun failed
			out = append(out, n)
		}
	}
	return out, nil
}

// BackfillWriter stores a backfill: a *store.Store, for a backfill queued
// for the primary scheduler (the API, ax backfill --store), or the
// *store.Fence of a lease the caller holds, for one it runs itself (ax run,
// ax backfill --standalone: the write checks the lease in its own
// transaction).
type BackfillWriter interface {
	CreateBackfill(ctx context.Context, b store.Backfill, now time.Time) (int64, error)
}

// CreateBackfill stores a backfill of spec, over the tasks of graph g, for
// the primary scheduler to run (CreateBackfillFenced: for the caller's own
// lease).
func CreateBackfill(ctx context.Context, st *store.Store, g *dag.Graph, spec BackfillSpec, actor string, now time.Time) (int64, error) {
	return CreateBackfillFenced(ctx, st, st, g, spec, actor, now)
}

// CreateBackfillFenced stores a backfill of spec, over the tasks of graph g,
// through w. A backfill of tasks a stored pause (read from st) covers is
// refused (PausedError) unless spec.Hold; nothing is stored then.
func CreateBackfillFenced(ctx context.Context, st *store.Store, w BackfillWriter, g *dag.Graph, spec BackfillSpec, actor string, now time.Time) (int64, error) {
	ps, err := st.Pauses(ctx)
	if err != nil {
		return 0, fmt.Errorf("backfill: read the pauses in force: %w", err)
	}
	var tasks []*defs.Task
	for _, n := range spec.Tasks {
		if t := g.Task(spec.Pipeline + "." + n); t != nil {
			tasks = append(tasks, t)
		}
	}
	set := store.NewPauseSet(ps)
	if err := underPause(&set, spec.Hold, tasks...); err != nil {
		return 0, err
	}
	b, err := backfillRecord(spec, actor)
	if err != nil {
		return 0, err
	}
	return w.CreateBackfill(ctx, b, now)
}

// backfillRecord is the stored form of a backfill of spec.
func backfillRecord(spec BackfillSpec, actor string) (store.Backfill, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return store.Backfill{}, err
	}
	return store.Backfill{Pipeline: spec.Pipeline, Spec: string(b), State: BackfillPending, TotalRuns: len(spec.Times), Actor: actor}, nil
}

// approveBackfill approves the manual gates of every run of a backfill in
// one request: the gates its runs wait at now are approved (and released
// when their upstreams allow), and the runs it has yet to start are created
// approved. It is refused, with nothing changed, for an unknown or
// finished backfill, one that selects no gate, and, unless r.Hold, when a
// pause covers a gate (the pause rule of an approval, underPause).
func (op *operator) approveBackfill(ctx context.Context, r ApproveBackfill, by By, now time.Time) (string, error) {
	bs, err := op.st.Backfills(ctx, r.Backfill)
	if err != nil {
		return "", err
	}
	if len(bs) == 0 {
		return "", fmt.Errorf("no backfill %d (ax backfill list shows them)", r.Backfill)
	}
	rec := bs[0]
	active := op.bf.backfills[rec.ID]
	if active != nil {
		rec = active.rec
	}
	switch rec.State {
	case BackfillDone, BackfillFailed, BackfillCancelled:
		return "", fmt.Errorf("backfill %d is %s: it starts no more runs, so there is nothing to approve for it (approve a run's gate with ax trigger PIPELINE.TASK --at TIME)", rec.ID, rec.State)
	}
	spec, err := op.bf.spec(rec)
	if err != nil {
		return "", err
	}
	gates, defsOf := op.backfillGates(spec)
	if len(gates) == 0 {
		return "", fmt.Errorf("backfill %d selects no manual task of %s: it has no gate to approve", rec.ID, spec.Pipeline)
	}
	if err := underPause(&op.pauses.PauseSet, r.Hold, defsOf...); err != nil {
		return "", err
	}
	names := make([]string, len(gates))
	for i, t := range gates {
		names[i] = t.id
	}
	// The runs it creates from now on are created approved.
	later := ""
	if !spec.ApproveManual {
		spec.ApproveManual, spec.ApprovedBy = true, by.Actor
		raw, err := json.Marshal(spec)
		if err != nil {
			return "", err
		}
		rec.Spec = string(raw)
		if err := op.host.w().UpdateBackfill(ctx, rec, now); err != nil {
			return "", err
		}
		if active != nil {
			active.rec.Spec, active.spec.ApproveManual, active.spec.ApprovedBy = rec.Spec, true, by.Actor
			later = fmt.Sprintf("; its %d run(s) yet to start are created approved", len(spec.Times)-active.next)
		} else {
			later = "; the runs it has yet to start are created approved"
		}
	}
	approved, err := op.approveWaitingGates(ctx, rec.ID, gates, by, now)
	if err != nil {
		return "", err
	}
	if approved == 0 && later == "" {
		return fmt.Sprintf("backfill %d: its gates (%s) are approved already; nothing changed", rec.ID, strings.Join(names, ", ")), nil
	}
	return fmt.Sprintf("approved the gates (%s) of backfill %d: %d instance(s) waiting at them now%s", strings.Join(names, ", "), rec.ID, approved, later) +
		op.heldNote(defsOf...), nil
}

// backfillGates returns the manual tasks a backfill's spec selects, and
// their definitions.
func (op *operator) backfillGates(spec BackfillSpec) (gates []*taskInfo, defsOf []*defs.Task) {
	for _, n := range spec.Tasks {
		if t := op.sched.tasks[spec.Pipeline+"."+n]; t != nil && t.def.Manual {
			gates, defsOf = append(gates, t), append(defsOf, t.def)
		}
	}
	return gates, defsOf
}

// approveWaitingGates approves the gates the backfill's runs wait at now
// and returns how many instances it approved.
func (op *operator) approveWaitingGates(ctx context.Context, backfill int64, gates []*taskInfo, by By, now time.Time) (int, error) {
	runs, err := op.st.BackfillRuns(ctx, backfill)
	if err != nil {
		return 0, err
	}
	approved := 0
	for _, run := range runs {
		for _, t := range gates {
			waiting, err := op.st.Instances(ctx, store.InstanceFilter{RunID: run.ID, TaskID: t.id, States: []axtype.State{axtype.Waiting}, Limit: 10})
			if err != nil {
				return approved, err
			}
			for i := range waiting {
				if waiting[i].ApprovedBy != "" {
					continue
				}
				if _, err := op.approveOne(ctx, t, &waiting[i], by, now); err != nil {
					return approved, err
				}
				approved++
			}
		}
	}
	return approved, nil
}
