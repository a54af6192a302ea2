package main

import (
	"context"
	"fmt"

	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/spf13/cobra"
)

func newValidateCmd() *cobra.Command {
	var (
		format string
		strict bool
		rate   int
	)
	cmd := &cobra.Command{
		Use:   "validate PATH...",
		Short: "Check pipeline files (files, or directories searched for *.yaml and *.yml)",
		Long: `Check pipeline files: YAML syntax, unknown keys, required fields, cron
expressions, durations, priorities, task names, dependencies and cycles,
cross-pipeline references (against the other files given), executors and
schedules. Every problem of every file is reported, as file:line:col.

Exit status: 0 when all files are valid, 1 when any is invalid (or, with
--strict, has a warning), 2 on a usage error.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return cli.Usage("--format %q: use text or json", format)
			}
			files, err := defs.FindFiles(args)
			if err != nil {
				return cli.Usage("%v", err)
			}
			errs, err := loadUntilSignal(cmd.Context(), files, rate)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if format == "json" {
				err = cli.WriteValidateJSON(out, files, errs)
			} else {
				err = cli.WriteValidateText(out, cmd.ErrOrStderr(), files, errs)
			}
			if err != nil {
				return err
			}
			if len(errs.Fatal()) > 0 || (strict && len(errs) > 0) {
				return cli.Failed()
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	cmd.Flags().BoolVar(&strict, "strict", false, "fail on warnings too")
	cmd.Flags().IntVar(&rate, "dispatch-rate", dag.DefaultDispatchRate, "dispatch rate (tasks/s) against which fire-time collisions are judged")
	return cmd
}

// loadUntilSignal loads files as ax validate does, giving up when ctx ends
// (SIGINT, SIGTERM): no file system call, however slow, keeps the command
// from stopping.
func loadUntilSignal(ctx context.Context, files []string, rate int) (defs.Errors, error) {
	type loaded struct {
		errs defs.Errors
		err  error
	}
	done := make(chan loaded, 1)
	go func() {
		_, errs, err := dag.Load(files, defs.Options{}, dag.Options{DispatchRate: rate})
		done <- loaded{errs, err}
	}()
	select {
	case l := <-done:
		if l.err != nil {
			return nil, cli.Usage("%v", l.err)
		}
		return l.errs, nil
	case <-ctx.Done():
		return nil, cli.Fail(fmt.Errorf("validate: stopped by a signal before the files were read"))
	}
}
