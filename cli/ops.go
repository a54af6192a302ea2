package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/direct"
	"github.com/ax-sched/ax/engine"
	"github.com/spf13/cobra"
)

// OpOptions are the flags every operation command takes. By default the
// operation goes to the admin API of a running ax server; with --store it
// is queued in that store for whichever scheduler is primary on it.
type OpOptions struct {
	Store  string
	Reason string
	Wait   time.Duration
	API    APIOptions
	// ViaStore says whether --store was given: queue in the store rather
	// than call the API.
	ViaStore func() bool
}

// Op is an operation as the CLI has it: --at stays as written, for the
// server to read in the pipeline's zone.
type Op struct {
	Req    engine.Request
	AtText string
}

// Actor is who the commands act as, in the action log: operator:$USER.
func Actor() string {
	if u := os.Getenv("USER"); u != "" {
		return "operator:" + u
	}
	return "operator"
}

// Submit sends op to the scheduler (its API, or with --store queued for
// the primary on the store, which withdraws a request no scheduler took
// within the wait) and prints what the scheduler did.
func Submit(ctx context.Context, w io.Writer, f OpOptions, op engine.Request) error {
	return SubmitOp(ctx, w, f, Op{Req: op})
}

// SubmitOp is Submit for an operation with a --at.
func SubmitOp(ctx context.Context, w io.Writer, f OpOptions, cop Op) error {
	// Over-long text is refused here, before it is sent or queued.
	if err := engine.CheckRequest(cop.Req, engine.By{Actor: Actor(), Reason: f.Reason}); err != nil {
		return Usage("%s", strings.TrimPrefix(err.Error(), engine.ErrBadOp.Error()+": "))
	}
	if f.ViaStore() && cop.AtText != "" {
		if _, err := direct.ParseAt(cop.AtText); err != nil { // before the store is opened
			return asked(err)
		}
	}
	s, done, err := Connect(ctx, f.API, Target{ViaStore: f.ViaStore(), Store: f.Store, Wait: f.Wait})
	if err != nil {
		return err
	}
	defer done()
	res, raw, err := s.Apply(ctx, cop.Req, cop.AtText, f.Reason)
	if err != nil || (f.API.JSON && raw != nil) {
		return OrThen(asked(err), func() error { return PrintJSON(w, raw) })
	}
	_, err = fmt.Fprintln(w, res.Result)
	return err
}

// PauseTarget reads `pipeline.task`, `pipeline` or --group NAME.
func PauseTarget(args []string, group string) (axtype.PauseScope, string, error) {
	switch {
	case group != "" && len(args) == 0:
		return axtype.ScopeGroup, group, nil
	case group == "" && len(args) == 1 && strings.Contains(args[0], "."):
		return axtype.ScopeTask, args[0], nil
	case group == "" && len(args) == 1:
		return axtype.ScopePipeline, args[0], nil
	}
	return "", "", Usage("give PIPELINE.TASK, PIPELINE, or --group NAME")
}

// addOpFlags adds the flags every operation command takes.
func addOpFlags(cmd *cobra.Command, f *OpOptions) {
	f.ViaStore = func() bool { return viaStore(cmd) }
	cmd.Flags().StringVar(&f.Store, "store", direct.DefaultPath, "queue it in this store instead of calling the API: a SQLite file path, mysql://user:pass@tcp(host:3306)/db or postgres://user:pass@host:5432/db")
	cmd.Flags().StringVar(&f.Reason, "reason", "", "why, for the action log")
	cmd.Flags().DurationVar(&f.Wait, "wait", 15*time.Second, "with --store: how long to wait for the scheduler to apply it")
	addAPIFlags(cmd, &f.API)
}

func NewPauseCmds() []*cobra.Command {
	var out []*cobra.Command
	for _, kind := range []string{engine.OpPause, engine.OpResume} {
		var (
			f     OpOptions
			group string
		)
		verb := map[string]string{engine.OpPause: "Pause", engine.OpResume: "Resume"}[kind]
		cmd := &cobra.Command{
			Use:   kind + " PIPELINE.TASK | PIPELINE | --group NAME",
			Short: verb + " a task, a pipeline or a group, without touching the others",
			Args:  cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				scope, target, err := PauseTarget(args, group)
				if err != nil {
					return err
				}
				var req engine.Request = engine.Pause{Scope: scope, Target: target}
				if kind == engine.OpResume {
					req = engine.Resume{Scope: scope, Target: target}
				}
				return Submit(cmd.Context(), cmd.OutOrStdout(), f, req)
			},
		}
		addOpFlags(cmd, &f)
		cmd.Flags().StringVar(&group, "group", "", "a pipeline group instead of a task or pipeline")
		out = append(out, cmd)
	}
	return out
}

func NewTriggerCmd() *cobra.Command {
	var (
		f          OpOptions
		downstream bool
		hold       bool
		at         string
		in         string
		params     []string
	)
	cmd := &cobra.Command{
		Use:   "trigger PIPELINE.TASK | PIPELINE [--at TIME] [--param KEY=VALUE]...",
		Short: "Run a task (or a whole pipeline) now, in a run of its own; for a manual task, approve it",
		Long: `Run a task now, in a manual run of its own beside its periodic instances
(--downstream: and everything downstream of it), or a whole pipeline.
--at sets the run's logical time (a date-time in the pipeline's zone, or
RFC 3339 with an offset; default now). A date alone is the schedule's fire
on that date (refused, listing them, when there are several or none; its
midnight when nothing schedules the target); --param KEY=VALUE
(repeatable) is merged over the tasks' params, seen by executors and
templates, and stored with the run.

For a manual task (manual: true) the trigger is the approval: it releases
the gate of its oldest instance awaiting approval (the one at --at, when
given), which then runs once its upstreams have succeeded; with none
waiting it runs the task at once.

A trigger (or an approval) of a task under a pause (its own, its group's
or its pipeline's) is refused with the pause and how to lift it, and
creates nothing; --hold creates the run anyway with what the pause covers
held PAUSED until the resume.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := engine.Trigger{Target: args[0], Downstream: downstream, Hold: hold}
			if downstream && !strings.Contains(args[0], ".") {
				return Usage("--downstream applies to a task (PIPELINE.TASK): a pipeline trigger runs every task")
			}
			var err error
			if op.Params, err = ParseParams(params); err != nil {
				return err
			}
			if in != "" {
				d, err := engine.ParseDelay(in, at != "")
				if err != nil {
					return Usage("--%v", err)
				}
				op.In = d
			}
			return SubmitOp(cmd.Context(), cmd.OutOrStdout(), f, Op{Req: op, AtText: at})
		},
	}
	addOpFlags(cmd, &f)
	cmd.Flags().BoolVar(&downstream, "downstream", false, "run everything downstream of it too")
	cmd.Flags().BoolVar(&hold, "hold", false, "under a pause: create the run, with what the pause covers held PAUSED until the resume (without it the trigger is refused)")
	cmd.Flags().StringVar(&at, "at", "", "logical time of the run, in the pipeline's zone (default now); a time to come delays the run until then")
	cmd.Flags().StringVar(&in, "in", "", "delay the run: it fires this long from now (10m, 2h), stored so that a restart keeps it")
	cmd.Flags().StringArrayVar(&params, "param", nil, "KEY=VALUE merged over the tasks' params (repeatable)")
	return cmd
}

func NewMarkCmd() *cobra.Command {
	var (
		f   OpOptions
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
				return Usage("%v", err)
			}
			op := engine.Mark{State: st, Run: run}
			if id, err := strconv.ParseInt(args[0], 10, 64); err == nil {
				if run != 0 || at != "" {
					return Usage("%d is an instance id: --run and --at select a task's instance", id)
				}
				op.Instance = id
			} else {
				if _, _, err := SplitTask(args[0]); err != nil {
					return Usage("%v", err)
				}
				if (run == 0) == (at == "") {
					return Usage("say which instance of %s: --run RUN or --at TIME", args[0])
				}
				op.Target = args[0]
			}
			return SubmitOp(cmd.Context(), cmd.OutOrStdout(), f, Op{Req: op, AtText: at})
		},
	}
	addOpFlags(cmd, &f)
	cmd.Flags().Int64Var(&run, "run", 0, "the task's instance in this run")
	cmd.Flags().StringVar(&at, "at", "", "the task's instance at this logical time (in the pipeline's zone)")
	return cmd
}

func NewCancelCmd() *cobra.Command {
	var f OpOptions
	cmd := &cobra.Command{
		Use:   "cancel RUN",
		Short: "End every unfinished instance of a run: running ones are killed, the others fail as cancelled",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return Usage("%q is not a run id", args[0])
			}
			return Submit(cmd.Context(), cmd.OutOrStdout(), f, engine.Cancel{Run: id})
		},
	}
	addOpFlags(cmd, &f)
	return cmd
}

func NewKillCmd() *cobra.Command {
	var f OpOptions
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
			return Submit(cmd.Context(), cmd.OutOrStdout(), f, op)
		},
	}
	addOpFlags(cmd, &f)
	return cmd
}

func NewRerunCmd() *cobra.Command {
	var (
		f        OpOptions
		failed   bool
		instance bool
		hold     bool
	)
	cmd := &cobra.Command{
		Use:   "rerun PIPELINE.TASK | RUN_ID --failed | INSTANCE_ID --instance",
		Short: "Run again a task's latest failed instance, a run's failed instances, or one instance",
		Long: `Run again a task's latest failed instance, a run's failed instances, or
one instance. A rerun of a task under a pause is refused with the pause
and how to lift it, and changes nothing; --hold reruns it held PAUSED
until the resume.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := engine.Rerun{Hold: hold}
			id, err := strconv.ParseInt(args[0], 10, 64)
			switch {
			case failed && instance:
				return Usage("--failed and --instance exclude each other")
			case (failed || instance) && err != nil:
				return Usage("%q is not a number: --failed takes a run id, --instance an instance id", args[0])
			case failed:
				op.Run = id
			case instance:
				op.Instance = id
			case err == nil:
				return Usage("%s is a number: say --failed (a run's failed instances) or --instance (that instance)", args[0])
			default:
				op.Target = args[0]
			}
			return Submit(cmd.Context(), cmd.OutOrStdout(), f, op)
		},
	}
	addOpFlags(cmd, &f)
	cmd.Flags().BoolVar(&failed, "failed", false, "rerun the FAILED and KILLED instances of the run RUN_ID")
	cmd.Flags().BoolVar(&instance, "instance", false, "rerun the instance INSTANCE_ID (FAILED, KILLED or SUCCESS)")
	cmd.Flags().BoolVar(&hold, "hold", false, "under a pause: rerun it held PAUSED until the resume (without it the rerun is refused)")
	return cmd
}

func NewHistoryCmd() *cobra.Command {
	var (
		target string
		limit  int
		af     APIOptions
	)
	cmd := &cobra.Command{
		Use:   "history PIPELINE.TASK",
		Short: "Show a task's transitions and actions, newest last",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return History(cmd.Context(), cmd.OutOrStdout(), viaStore(cmd), target, af, args[0], limit)
		},
	}
	cmd.Flags().StringVar(&target, "store", direct.DefaultPath, "read this store instead of calling the API: a SQLite file path, mysql://user:pass@tcp(host:3306)/db or postgres://user:pass@host:5432/db")
	cmd.Flags().IntVarP(&limit, "limit", "n", 50, "newest entries shown")
	addAPIFlags(cmd, &af)
	return cmd
}
