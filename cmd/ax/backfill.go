package main

import (
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

func newBackfillCmd() *cobra.Command {
	var f cli.BackfillOptions
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
			local := cmd.Flags().Changed("pipelines")
			if f.DryRun && !local && (f.Standalone || viaStore(cmd)) {
				return cli.Usage("--dry-run with --store or --standalone plans from pipeline files: name them with --pipelines (without these flags it plans from the server's)")
			}
			if !f.Standalone && !viaStore(cmd) && !(f.DryRun && local) {
				return cli.BackfillAPI(cmd.Context(), cmd.OutOrStdout(), args[0], f)
			}
			return cli.RunBackfill(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.From, "from", "", "first logical time: 2026-03-01 or 2026-03-01T02:00:00 (pipeline time zone)")
	fl.StringVar(&f.To, "to", "", "last logical time, inclusive (a date means the whole day)")
	fl.StringVar(&f.Select, "select", "", "tasks: task, task+, +task, +task+, group:NAME, comma-separated")
	fl.BoolVar(&f.DryRun, "dry-run", false, "print the plan and change nothing")
	fl.IntVar(&f.MaxActive, "max-active-runs", 1, "runs in flight at once")
	fl.BoolVar(&f.Reverse, "reverse", false, "newest logical time first")
	fl.StringVar(&f.Rerun, "rerun", engine.RerunNone, "existing instances: none (fill gaps only), failed (rerun failed ones), all")
	fl.BoolVar(&f.StopOnFailure, "stop-on-failure", false, "start no new run after a run failed")
	fl.BoolVar(&f.ApproveManual, "approve-manual", false, "approve the manual gates of its runs up front (otherwise each run waits at its gates for ax backfill approve ID or ax trigger)")
	fl.BoolVar(&f.WaitCross, "wait-cross", false, "wait for other pipelines' runs for the same dates, as scheduled runs do (otherwise they count as done)")
	fl.BoolVar(&f.Hold, "hold", false, "under a pause: start it, with what the pause covers held PAUSED until the resume (without it the backfill is refused)")
	addRunFlags(fl, &f)
	addAPIFlags(cmd, &f.API)
	cmd.AddCommand(newBackfillResumeCmd(), newBackfillStatusCmd(), newBackfillListCmd(), newBackfillCancelCmd(), newBackfillApproveCmd())
	return cmd
}

// addRunFlags adds the flags that say where and how a backfill runs.
func addRunFlags(fl *pflag.FlagSet, f *cli.BackfillOptions) {
	fl.BoolVar(&f.Standalone, "standalone", false, "run it here on an engine of its own instead of the server's")
	fl.BoolVar(&f.Detach, "detach", false, "queue it for the server and return at once")
	fl.StringSliceVar(&f.Pipelines, "pipelines", []string{"examples"}, "pipeline files or directories")
	fl.StringVar(&f.Store, "store", store.DefaultPath, "use this store instead of the server's API: a SQLite file path, mysql://user:pass@tcp(host:3306)/db or postgres://user:pass@host:5432/db")
	fl.DurationVar(&f.Wait, "wait", 30*time.Second, "without --standalone: how long to wait for a server to pick it up")
	addSecretsFlag(fl, &f.SecretsDir)
}

func newBackfillResumeCmd() *cobra.Command {
	var f cli.BackfillOptions
	cmd := &cobra.Command{
		Use:   "resume ID",
		Short: "Continue an interrupted backfill without rerunning what succeeded",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSecretsDir(f); err != nil {
				return err
			}
			if !f.Standalone && !viaStore(cmd) {
				return cli.ResumeBackfillAPI(cmd.Context(), cmd.OutOrStdout(), f, args[0])
			}
			return cli.ResumeBackfill(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f, args[0])
		},
	}
	addRunFlags(cmd.Flags(), &f)
	addAPIFlags(cmd, &f.API)
	return cmd
}

func newBackfillStatusCmd() *cobra.Command {
	var (
		target string
		af     cli.APIOptions
	)
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show a backfill's progress",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.BackfillStatus(cmd.Context(), cmd.OutOrStdout(), viaStore(cmd), target, af, args[0])
		},
	}
	cmd.Flags().StringVar(&target, "store", store.DefaultPath, "read this store instead of calling the API")
	addAPIFlags(cmd, &af)
	return cmd
}

func newBackfillListCmd() *cobra.Command {
	var (
		target string
		af     cli.APIOptions
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List backfills, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cli.ListBackfills(cmd.Context(), cmd.OutOrStdout(), viaStore(cmd), target, af)
		},
	}
	cmd.Flags().StringVar(&target, "store", store.DefaultPath, "read this store instead of calling the API")
	addAPIFlags(cmd, &af)
	return cmd
}

func newBackfillCancelCmd() *cobra.Command {
	var af cli.APIOptions
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Stop a backfill from starting more runs (those in flight finish)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.CancelBackfill(cmd.Context(), cmd.OutOrStdout(), af, args[0])
		},
	}
	addAPIFlags(cmd, &af)
	return cmd
}

func newBackfillApproveCmd() *cobra.Command {
	var (
		f    cli.OpOptions
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
				return cli.Usage("%q is not a backfill id (ax backfill list shows them)", args[0])
			}
			return cli.Submit(cmd.Context(), cmd.OutOrStdout(), f, engine.ApproveBackfill{Backfill: id, Hold: hold})
		},
	}
	addOpFlags(cmd, &f)
	cmd.Flags().BoolVar(&hold, "hold", false, "under a pause of a gate: approve it, held PAUSED until the resume (without it the approval is refused)")
	return cmd
}

func newRunCmd() *cobra.Command {
	var (
		at, sel, target string
		secretsDir      string
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
			return cli.RunOnce(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], at, sel, pipelines, target, approve, secretsDir)
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "logical time: a date-time in the pipeline's zone, or a date: its schedule's fire that day (default now)")
	cmd.Flags().StringVar(&sel, "select", "", "tasks: task, task+, +task, +task+, group:NAME, comma-separated")
	cmd.Flags().StringSliceVar(&pipelines, "pipelines", []string{"examples"}, "pipeline directories, when PIPELINE is a name")
	cmd.Flags().StringVar(&target, "store", "", "store to record the run in (default: a temporary file, removed after)")
	cmd.Flags().BoolVar(&approve, "approve-manual", false, "approve the manual gates up front (otherwise the run stops at them and exits 3)")
	addSecretsFlag(cmd.Flags(), &secretsDir)
	return cmd
}
