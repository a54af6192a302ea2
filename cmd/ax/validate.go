package main

import (
	"encoding/json"
	"fmt"
	"io"

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
				return usageErr("--format %q: use text or json", format)
			}
			files, err := defs.FindFiles(args)
			if err != nil {
				return usageErr("%v", err)
			}
			_, errs, err := dag.Load(files, defs.Options{}, dag.Options{DispatchRate: rate})
			if err != nil {
				return usageErr("%v", err)
			}
			out := cmd.OutOrStdout()
			if format == "json" {
				err = writeValidateJSON(out, files, errs)
			} else {
				err = writeValidateText(out, cmd.ErrOrStderr(), files, errs)
			}
			if err != nil {
				return err
			}
			if len(errs.Fatal()) > 0 || (strict && len(errs) > 0) {
				return failed()
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	cmd.Flags().BoolVar(&strict, "strict", false, "fail on warnings too")
	cmd.Flags().IntVar(&rate, "dispatch-rate", dag.DefaultDispatchRate, "dispatch rate (tasks/s) against which fire-time collisions are judged")
	return cmd
}

func writeValidateText(out, errOut io.Writer, files []string, errs defs.Errors) error {
	for _, e := range errs {
		if _, err := fmt.Fprintln(out, e.Error()); err != nil {
			return err
		}
	}
	nerr, nwarn := len(errs.Fatal()), len(errs.Warnings())
	if nerr == 0 {
		_, err := fmt.Fprintf(errOut, "ok: %d file(s) valid, %d warning(s)\n", len(files), nwarn)
		return err
	}
	_, err := fmt.Fprintf(errOut, "invalid: %d error(s), %d warning(s) in %d file(s)\n", nerr, nwarn, len(files))
	return err
}

// validateReport is the --format json output of ax validate.
type validateReport struct {
	Valid    bool          `json:"valid"`
	Files    []string      `json:"files"`
	Errors   []*defs.Error `json:"errors"`
	Warnings []*defs.Error `json:"warnings"`
}

func writeValidateJSON(out io.Writer, files []string, errs defs.Errors) error {
	r := validateReport{
		Valid:    len(errs.Fatal()) == 0,
		Files:    files,
		Errors:   nonNil(errs.Fatal()),
		Warnings: nonNil(errs.Warnings()),
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func nonNil(es defs.Errors) []*defs.Error {
	if es == nil {
		return []*defs.Error{}
	}
	return es
}
