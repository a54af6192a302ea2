package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// opFlags are the flags every operation command takes. By default the
// operation goes to the admin API of a running ax server; with --store it
// is queued in that store for whichever scheduler is primary on it.
type opFlags struct {
	store  string
	reason string
	wait   time.Duration
	api    apiFlags
	cmd    *cobra.Command
}

func (f *opFlags) add(cmd *cobra.Command) {
	f.cmd = cmd
	cmd.Flags().StringVar(&f.store, "store", store.DefaultPath, "queue it in this store instead of calling the API: a SQLite file path, or mysql://user:pass@tcp(host:3306)/db")
	cmd.Flags().StringVar(&f.reason, "reason", "", "why, for the action log")
	cmd.Flags().DurationVar(&f.wait, "wait", 15*time.Second, "with --store: how long to wait for the scheduler to apply it")
	f.api.add(cmd)
}

// opRoute is the API endpoint and body of an operation.
func opRoute(op cliOp) (string, map[string]any, error) {
	body := map[string]any{"reason": op.reason}
	esc := url.PathEscape
	task := func(target, verb string) (string, map[string]any, error) {
		p, t, err := splitTask(target)
		if err != nil {
			return "", nil, err
		}
		return "/api/v1/pipelines/" + esc(p) + "/tasks/" + esc(t) + "/" + verb, body, nil
	}
	pause := func(scope store.PauseScope, target, verb string) (string, map[string]any, error) {
		switch scope {
		case store.ScopeGroup:
			return "/api/v1/groups/" + esc(target) + "/" + verb, body, nil
		case store.ScopePipeline:
			return "/api/v1/pipelines/" + esc(target) + "/" + verb, body, nil
		}
		return task(target, verb)
	}
	switch r := op.req.(type) {
	case engine.Pause:
		return pause(r.Scope, r.Target, r.Verb())
	case engine.Resume:
		return pause(r.Scope, r.Target, r.Verb())
	case engine.Trigger:
		if op.atText != "" {
			body["at"] = op.atText
		}
		if len(r.Params) > 0 {
			body["params"] = r.Params
		}
		if !strings.Contains(r.Target, ".") {
			return "/api/v1/pipelines/" + esc(r.Target) + "/trigger", body, nil
		}
		body["downstream"] = r.Downstream
		return task(r.Target, r.Verb())
	case engine.Mark:
		body["state"] = strings.ToLower(string(r.State))
		if r.Instance != 0 {
			return fmt.Sprintf("/api/v1/instances/%d/mark", r.Instance), body, nil
		}
		if r.Run != 0 {
			body["run"] = r.Run
		}
		if op.atText != "" {
			body["at"] = op.atText
		}
		return task(r.Target, r.Verb())
	case engine.Kill:
		if r.Instance != 0 {
			return fmt.Sprintf("/api/v1/instances/%d/kill", r.Instance), body, nil
		}
		return task(r.Target, r.Verb())
	case engine.Rerun:
		switch {
		case r.Instance != 0:
			return fmt.Sprintf("/api/v1/instances/%d/rerun", r.Instance), body, nil
		case r.Run != 0:
			return fmt.Sprintf("/api/v1/runs/%d/rerun", r.Run), body, nil
		}
		return task(r.Target, r.Verb())
	case engine.Cancel:
		return fmt.Sprintf("/api/v1/runs/%d/cancel", r.Run), body, nil
	}
	return "", nil, fmt.Errorf("ax: %s has no API route here", op.req.Verb())
}

// cliOp is an operation as the CLI has it: --at stays as written, for the
// server to read in the pipeline's zone.
type cliOp struct {
	req    engine.Request
	atText string
	reason string
}

// submitAPI sends op to the admin API and prints what the scheduler did.
func submitAPI(ctx context.Context, w io.Writer, f opFlags, op cliOp) error {
	c, err := newAPIClient(f.api.server)
	if err != nil {
		return err
	}
	op.reason = f.reason
	path, body, err := opRoute(op)
	if err != nil {
		return err
	}
	raw, err := c.Call(ctx, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	if f.api.json {
		return printJSON(w, raw)
	}
	var res api.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("unexpected answer from %s: %s", path, raw)}
	}
	_, err = fmt.Fprintln(w, res.Result)
	return err
}

func actor() string {
	if u := os.Getenv("USER"); u != "" {
		return "operator:" + u
	}
	return "operator"
}

// submit queues op for the primary scheduler and waits for its outcome. A
// request no scheduler took within the wait is withdrawn, so that it cannot
// surprise anyone later.
func submit(ctx context.Context, w io.Writer, f opFlags, op engine.Request) error {
	return submitOp(ctx, w, f, cliOp{req: op})
}

// submitOp is submit for an operation with a --at.
func submitOp(ctx context.Context, w io.Writer, f opFlags, cop cliOp) error {
	if !viaStore(f.cmd) {
		return submitAPI(ctx, w, f, cop)
	}
	op := cop.req
	if cop.atText != "" {
		at, err := time.Parse(time.RFC3339, cop.atText)
		if err != nil {
			return usageErr("--at %q: with --store give RFC 3339 with an offset (2026-03-01T02:00:00+08:00); the API reads other forms in the pipeline's zone", cop.atText)
		}
		switch r := op.(type) {
		case engine.Trigger:
			r.At, op = at, r
		case engine.Mark:
			r.At, op = at, r
		}
	}
	st, err := store.Open(ctx, f.store, store.Options{})
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	defer st.Close()
	if err := checkTarget(ctx, st, op); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	res, err := queueRequest(ctx, st, op, engine.By{Actor: actor(), Reason: f.reason}, f.wait)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, res)
	return err
}

// queueRequest queues req made by by (queueOp) and waits for its outcome.
func queueRequest(ctx context.Context, st *store.Store, req engine.Request, by engine.By, wait time.Duration) (string, error) {
	verb, args, err := engine.EncodeRequest(req, by)
	if err != nil {
		return "", &exitError{code: exitFailed, err: err}
	}
	_, target := opTarget(req)
	return queueOp(ctx, st, store.Op{Kind: verb, Target: target, Args: string(args), Actor: by.Actor, Reason: by.Reason}, wait)
}

// opTarget says what a request acts on: the scope and name of a task,
// pipeline or group (scope is empty for a run's task or a pipeline to
// trigger), or else the instance, run or backfill, as the queue shows it.
func opTarget(req engine.Request) (scope store.PauseScope, target string) {
	byID := func(what string, id int64) string { return what + " " + strconv.FormatInt(id, 10) }
	switch r := req.(type) {
	case engine.Pause:
		return r.Scope, r.Target
	case engine.Resume:
		return r.Scope, r.Target
	case engine.Trigger:
		if !strings.Contains(r.Target, ".") {
			return store.ScopePipeline, r.Target
		}
		return store.ScopeTask, r.Target
	case engine.Kill:
		if r.Instance != 0 {
			return "", byID("instance", r.Instance)
		}
		return store.ScopeTask, r.Target
	case engine.Rerun:
		switch {
		case r.Instance != 0:
			return "", byID("instance", r.Instance)
		case r.Run != 0:
			return "", byID("run", r.Run)
		}
		return store.ScopeTask, r.Target
	case engine.Mark:
		if r.Instance != 0 {
			return "", byID("instance", r.Instance)
		}
		return store.ScopeTask, r.Target
	case engine.Cancel:
		return "", byID("run", r.Run)
	case engine.CancelBackfill:
		return "", byID("backfill", r.Backfill)
	case engine.ResumeBackfill:
		return "", byID("backfill", r.Backfill)
	}
	return "", ""
}

// queueOp queues a request in the store for the primary scheduler to apply
// (the one way --store reaches the engine: nothing here writes state), and
// waits for its outcome. A request no scheduler took within wait is
// withdrawn, so that it cannot surprise anyone later.
func queueOp(ctx context.Context, st *store.Store, o store.Op, wait time.Duration) (string, error) {
	id, err := st.EnqueueOp(ctx, o, time.Now())
	if err != nil {
		return "", &exitError{code: exitFailed, err: err}
	}
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := st.GetOp(ctx, id)
		if err != nil {
			return "", &exitError{code: exitFailed, err: err}
		}
		switch got.State {
		case store.OpDone:
			return got.Result, nil
		case store.OpFailed:
			return "", &exitError{code: exitFailed, err: fmt.Errorf("%s %s: %s", o.Kind, o.Target, got.Error)}
		}
		if time.Now().After(deadline) {
			err := st.FinishOp(ctx, id, "", fmt.Errorf("withdrawn: no scheduler applied it within %s", wait), 0, time.Now())
			if errors.Is(err, store.ErrConflict) {
				continue // applied just now: read its outcome
			}
			return "", &exitError{code: exitFailed, err: fmt.Errorf("%s %s: no scheduler applied it within %s; is ax server running on %s? (the request was withdrawn)", o.Kind, o.Target, wait, st)}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-tick.C:
		}
	}
}

// checkTarget refuses an unknown task, pipeline or group before anything is
// queued, with a suggestion.
func checkTarget(ctx context.Context, st *store.Store, op engine.Request) error {
	scope, target := opTarget(op)
	if scope == "" || target == "" {
		return nil
	}
	return checkName(ctx, st, scope, target)
}

// checkName refuses an unknown task, pipeline or group (scope, name).
func checkName(ctx context.Context, st *store.Store, scope store.PauseScope, name string) error {
	tasks, err := st.Tasks(ctx, store.TaskFilter{})
	if err != nil {
		return err
	}
	var names []string
	found := false
	for _, t := range tasks {
		var n string
		switch scope {
		case store.ScopeGroup:
			n = t.Group
		case store.ScopePipeline:
			n = t.Pipeline
		default:
			n = t.ID
		}
		names = append(names, n)
		found = found || n == name
	}
	if found {
		return nil
	}
	kind := cmp.Or(string(scope), "task")
	if len(tasks) == 0 {
		return fmt.Errorf("no %s %q: the store has no pipelines yet (has ax server run on it?)", kind, name)
	}
	return fmt.Errorf("no %s %q%s", kind, name, defs.DidYouMean(name, slices.Compact(names)))
}

// pauseTarget reads `pipeline.task`, `pipeline` or --group NAME.
func pauseTarget(args []string, group string) (store.PauseScope, string, error) {
	switch {
	case group != "" && len(args) == 0:
		return store.ScopeGroup, group, nil
	case group == "" && len(args) == 1 && strings.Contains(args[0], "."):
		return store.ScopeTask, args[0], nil
	case group == "" && len(args) == 1:
		return store.ScopePipeline, args[0], nil
	}
	return "", "", usageErr("give PIPELINE.TASK, PIPELINE, or --group NAME")
}

func newPauseCmds() []*cobra.Command {
	var out []*cobra.Command
	for _, kind := range []string{engine.OpPause, engine.OpResume} {
		var (
			f     opFlags
			group string
		)
		verb := map[string]string{engine.OpPause: "Pause", engine.OpResume: "Resume"}[kind]
		cmd := &cobra.Command{
			Use:   kind + " PIPELINE.TASK | PIPELINE | --group NAME",
			Short: verb + " a task, a pipeline or a group, without touching the others",
			Args:  cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				scope, target, err := pauseTarget(args, group)
				if err != nil {
					return err
				}
				var req engine.Request = engine.Pause{Scope: scope, Target: target}
				if kind == engine.OpResume {
					req = engine.Resume{Scope: scope, Target: target}
				}
				return submit(cmd.Context(), cmd.OutOrStdout(), f, req)
			},
		}
		f.add(cmd)
		cmd.Flags().StringVar(&group, "group", "", "a pipeline group instead of a task or pipeline")
		out = append(out, cmd)
	}
	return out
}

func newTriggerCmd() *cobra.Command {
	var (
		f          opFlags
		downstream bool
		at         string
		params     []string
	)
	cmd := &cobra.Command{
		Use:   "trigger PIPELINE.TASK | PIPELINE [--at TIME] [--param KEY=VALUE]...",
		Short: "Run a task (or a whole pipeline) now, in a run of its own; for a manual task, approve it",
		Long: `Run a task now, in a manual run of its own beside its periodic instances
(--downstream: and everything downstream of it), or a whole pipeline.
--at sets the run's logical time (a date or date-time in the pipeline's
zone, or RFC 3339 with an offset; default now); --param KEY=VALUE
(repeatable) is merged over the tasks' params, seen by executors and
templates, and stored with the run.

For a manual task (manual: true) the trigger is the approval: it releases
the gate of its oldest instance awaiting approval (the one at --at, when
given), which then runs once its upstreams have succeeded; with none
waiting it runs the task at once.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := engine.Trigger{Target: args[0], Downstream: downstream}
			if downstream && !strings.Contains(args[0], ".") {
				return usageErr("--downstream applies to a task (PIPELINE.TASK): a pipeline trigger runs every task")
			}
			for _, p := range params {
				k, v, ok := strings.Cut(p, "=")
				if !ok || k == "" {
					return usageErr("--param %q: give KEY=VALUE", p)
				}
				if op.Params == nil {
					op.Params = map[string]string{}
				}
				op.Params[k] = v
			}
			if err := api.CheckParams(op.Params); err != nil {
				return usageErr("--param: %v", err)
			}
			return submitOp(cmd.Context(), cmd.OutOrStdout(), f, cliOp{req: op, atText: at})
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&downstream, "downstream", false, "run everything downstream of it too")
	cmd.Flags().StringVar(&at, "at", "", "logical time of the run, in the pipeline's zone (default now)")
	cmd.Flags().StringArrayVar(&params, "param", nil, "KEY=VALUE merged over the tasks' params (repeatable)")
	return cmd
}

func newMarkCmd() *cobra.Command {
	var (
		f   opFlags
		run int64
		at  string
	)
	cmd := &cobra.Command{
		Use:   "mark PIPELINE.TASK --run RUN|--at TIME (success|failed) | mark INSTANCE_ID (success|failed)",
		Short: "Set the outcome of a waiting, failed or killed instance (success releases its downstream)",
		Long: `Set the outcome of an instance by hand, with --reason for the action log:
success releases its downstream (and brings back those that failed without
running behind it); failed fails what waits on it. A running, scheduled or
paused instance is refused: kill it, or cancel its run.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := api.MarkState(args[1])
			if err != nil {
				return usageErr("%v", err)
			}
			op := engine.Mark{State: st, Run: run}
			if id, err := strconv.ParseInt(args[0], 10, 64); err == nil {
				if run != 0 || at != "" {
					return usageErr("%d is an instance id: --run and --at select a task's instance", id)
				}
				op.Instance = id
			} else {
				if _, _, err := splitTask(args[0]); err != nil {
					return usageErr("%v", err)
				}
				if (run == 0) == (at == "") {
					return usageErr("say which instance of %s: --run RUN or --at TIME", args[0])
				}
				op.Target = args[0]
			}
			return submitOp(cmd.Context(), cmd.OutOrStdout(), f, cliOp{req: op, atText: at})
		},
	}
	f.add(cmd)
	cmd.Flags().Int64Var(&run, "run", 0, "the task's instance in this run")
	cmd.Flags().StringVar(&at, "at", "", "the task's instance at this logical time (in the pipeline's zone)")
	return cmd
}

func newCancelCmd() *cobra.Command {
	var f opFlags
	cmd := &cobra.Command{
		Use:   "cancel RUN",
		Short: "End every unfinished instance of a run: running ones are killed, the others fail as cancelled",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return usageErr("%q is not a run id", args[0])
			}
			return submit(cmd.Context(), cmd.OutOrStdout(), f, engine.Cancel{Run: id})
		},
	}
	f.add(cmd)
	return cmd
}

func newKillCmd() *cobra.Command {
	var f opFlags
	cmd := &cobra.Command{
		Use:   "kill PIPELINE.TASK | INSTANCE_ID",
		Short: "Stop a task's running instances (or one instance) on their executors",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := engine.Kill{}
			if id, err := strconv.ParseInt(args[0], 10, 64); err == nil {
				op.Instance = id
			} else {
				op.Target = args[0]
			}
			return submit(cmd.Context(), cmd.OutOrStdout(), f, op)
		},
	}
	f.add(cmd)
	return cmd
}

func newRerunCmd() *cobra.Command {
	var (
		f        opFlags
		failed   bool
		instance bool
	)
	cmd := &cobra.Command{
		Use:   "rerun PIPELINE.TASK | RUN_ID --failed | INSTANCE_ID --instance",
		Short: "Run again a task's latest failed instance, a run's failed instances, or one instance",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := engine.Rerun{}
			id, err := strconv.ParseInt(args[0], 10, 64)
			switch {
			case failed && instance:
				return usageErr("--failed and --instance exclude each other")
			case (failed || instance) && err != nil:
				return usageErr("%q is not a number: --failed takes a run id, --instance an instance id", args[0])
			case failed:
				op.Run = id
			case instance:
				op.Instance = id
			case err == nil:
				return usageErr("%s is a number: say --failed (a run's failed instances) or --instance (that instance)", args[0])
			default:
				op.Target = args[0]
			}
			return submit(cmd.Context(), cmd.OutOrStdout(), f, op)
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&failed, "failed", false, "rerun the FAILED and KILLED instances of the run RUN_ID")
	cmd.Flags().BoolVar(&instance, "instance", false, "rerun the instance INSTANCE_ID (FAILED, KILLED or SUCCESS)")
	return cmd
}

func newHistoryCmd() *cobra.Command {
	var (
		target string
		limit  int
		af     apiFlags
	)
	cmd := &cobra.Command{
		Use:   "history PIPELINE.TASK",
		Short: "Show a task's transitions and actions, newest last",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if !viaStore(cmd) {
				return historyAPI(ctx, cmd.OutOrStdout(), af, args[0], limit)
			}
			st, err := store.Open(ctx, target, store.Options{})
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			defer st.Close()
			if err := checkName(ctx, st, store.ScopeTask, args[0]); err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			return writeHistory(ctx, cmd.OutOrStdout(), st, args[0], limit, api.StoreZones(ctx, st, af.utc))
		},
	}
	cmd.Flags().StringVar(&target, "store", store.DefaultPath, "read this store instead of calling the API: a SQLite file path, or mysql://user:pass@tcp(host:3306)/db")
	cmd.Flags().IntVarP(&limit, "limit", "n", 50, "newest entries shown")
	af.add(cmd)
	return cmd
}

type historyLine struct {
	at                          time.Time
	instance                    int64
	what, actor, reason, ticket string
}

func writeHistory(ctx context.Context, w io.Writer, st *store.Store, task string, limit int, zs *api.Zones) error {
	var (
		hs   []store.HistoryRow
		acts []store.Action
	)
	for after := int64(0); ; {
		h, err := st.History(ctx, store.LogFilter{TaskID: task, AfterID: after, Limit: 1000})
		if err != nil {
			return err
		}
		hs = append(hs, h...)
		if len(h) < 1000 {
			break
		}
		after = h[len(h)-1].ID
	}
	for after := int64(0); ; {
		a, err := st.Actions(ctx, store.LogFilter{TaskID: task, AfterID: after, Limit: 1000})
		if err != nil {
			return err
		}
		acts = append(acts, a...)
		if len(a) < 1000 {
			break
		}
		after = a[len(a)-1].ID
	}
	p, _, _ := strings.Cut(task, ".")
	loc, err := zs.Of(p)
	if err != nil {
		return err
	}
	return printHistory(w, historyLines(hs, acts), limit, loc)
}

// historyLines merges transitions and actions, oldest first.
func historyLines(hs []store.HistoryRow, acts []store.Action) []historyLine {
	var lines []historyLine
	for _, r := range hs {
		from := string(r.From)
		if from == "" {
			from = "(created)"
		}
		lines = append(lines, historyLine{r.At, r.InstanceID, from + " → " + string(r.To), r.Actor, r.Reason, r.Ticket})
	}
	for _, a := range acts {
		lines = append(lines, historyLine{a.At, a.InstanceID, "action " + a.Action, a.Actor, strings.TrimSpace(a.Reason + " " + a.Detail), a.Ticket})
	}
	slices.SortStableFunc(lines, func(a, b historyLine) int { return a.at.Compare(b.at) })
	return lines
}

// printHistory prints the newest limit lines, oldest first.
func printHistory(w io.Writer, lines []historyLine, limit int, loc *time.Location) error {
	if len(lines) > limit {
		lines = lines[len(lines)-limit:]
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tINSTANCE\tWHAT\tACTOR\tREASON\tTICKET")
	for _, l := range lines {
		inst := ""
		if l.instance != 0 {
			inst = strconv.FormatInt(l.instance, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", api.StampMS(l.at, loc), inst, l.what, l.actor, l.reason, shortTicket(l.ticket))
	}
	return tw.Flush()
}

func shortTicket(t string) string {
	if len(t) > 12 {
		return t[:12]
	}
	return t
}
