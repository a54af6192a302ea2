package main

import (
	"context"
	"fmt"

	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/stock"
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
cross-pipeline references (against the other files given), executors
(a function must be one this binary registers), schedules, templates, and
the lengths the store keeps (names up to 128 characters). Every problem of every file is reported, as file:line:col.

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
			popts, err := parseOptions()
			if err != nil {
				return err
			}
			g, errs, err := loadUntilSignal(cmd.Context(), files, popts, rate)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if format == "json" {
				err = cli.WriteValidateJSON(out, files, errs)
			} else {
				var pls []*defs.Pipeline
				if g != nil {
					pls = g.Pipelines()
				}
				err = cli.WriteValidateText(out, cmd.ErrOrStderr(), files, errs, pls)
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

// parseOptions are the options pipeline files are read with by the commands
// that judge them as ax server would: the functions this binary registers.
func parseOptions() (defs.Options, error) {
	names, err := stock.FunctionNames()
	if err != nil {
		return defs.Options{}, err
	}
	return defs.Options{Functions: names}, nil
}

// loadUntilSignal loads files as ax validate does, giving up when ctx ends
// (SIGINT, SIGTERM): no file system call, however slow, keeps the command
// from stopping.
func loadUntilSignal(ctx context.Context, files []string, popts defs.Options, rate int) (*dag.Graph, defs.Errors, error) {
	type loaded struct {
		g    *dag.Graph
		errs defs.Errors
		err  error
	}
	done := make(chan loaded, 1)
	go func() {
		g, errs, err := dag.Load(files, popts, dag.Options{DispatchRate: rate})
		done <- loaded{g, errs, err}
	}()
	select {
	case l := <-done:
		if l.err != nil {
			return nil, nil, cli.Usage("%v", l.err)
		}
		return l.g, l.errs, nil
	case <-ctx.Done():
		return nil, nil, cli.Fail(fmt.Errorf("validate: stopped by a signal before the files were read"))
	}
}
