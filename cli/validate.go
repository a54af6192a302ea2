package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/taskexec"
	"github.com/spf13/cobra"
)

// WriteValidateText prints every problem to out and a summary to errOut:
// when the files are valid, with the zone each pipeline schedules in.
func WriteValidateText(out, errOut io.Writer, files []string, errs defs.Errors, pls []*defs.Pipeline) error {
	for _, e := range errs {
		if _, err := fmt.Fprintln(out, e.Error()); err != nil {
			return err
		}
	}
	nerr, nwarn := len(errs.Fatal()), len(errs.Warnings())
	if nerr == 0 {
		_, err := fmt.Fprintf(errOut, "ok: %d file(s) valid, %d warning(s)\n", len(files), nwarn)
		if err == nil && len(pls) > 0 {
			_, err = fmt.Fprintf(errOut, "zones: %s\n", ZonesLine(pls))
		}
		return err
	}
	_, err := fmt.Fprintf(errOut, "invalid: %d error(s), %d warning(s) in %d file(s)\n", nerr, nwarn, len(files))
	return err
}

// ZonesLine names the zone each pipeline schedules in, grouped by zone
// ("Asia/Shanghai (billing_daily*, orders_daily), UTC (events_hourly)"),
// marking with * those whose file names none and says what that means.
func ZonesLine(pls []*defs.Pipeline) string {
	byZone := map[string][]string{}
	defaulted := false
	for _, p := range pls {
		name := p.Name
		if p.ZoneDefault {
			name += "*"
			defaulted = true
		}
		byZone[p.Timezone] = append(byZone[p.Timezone], name)
	}
	var parts []string
	for _, z := range slices.Sorted(maps.Keys(byZone)) {
		names := byZone[z]
		slices.Sort(names)
		if len(names) > 5 {
			names = append(names[:5:5], fmt.Sprintf("%d more", len(names)-5))
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", z, strings.Join(names, ", ")))
	}
	line := strings.Join(parts, ", ")
	if defaulted {
		line += fmt.Sprintf("; * names no timezone: %s is the default (write timezone: in the file to change it)", defs.DefaultTimezone)
	}
	return line
}

// ValidateReport is the --format json output of ax validate.
type ValidateReport struct {
	Valid    bool          `json:"valid"`
	Files    []string      `json:"files"`
	Errors   []*defs.Error `json:"errors"`
	Warnings []*defs.Error `json:"warnings"`
}

func WriteValidateJSON(out io.Writer, files []string, errs defs.Errors) error {
	r := ValidateReport{
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

func NewValidateCmd() *cobra.Command {
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
				return Usage("--format %q: use text or json", format)
			}
			files, err := defs.FindFiles(args)
			if err != nil {
				return Usage("%v", err)
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
				err = WriteValidateJSON(out, files, errs)
			} else {
				var pls []*defs.Pipeline
				if g != nil {
					pls = g.Pipelines()
				}
				err = WriteValidateText(out, cmd.ErrOrStderr(), files, errs, pls)
			}
			if err != nil {
				return err
			}
			if len(errs.Fatal()) > 0 || (strict && len(errs) > 0) {
				return Failed()
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
	names, err := taskexec.FunctionNames()
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
			return nil, nil, Usage("%v", l.err)
		}
		return l.g, l.errs, nil
	case <-ctx.Done():
		return nil, nil, Fail(fmt.Errorf("validate: stopped by a signal before the files were read"))
	}
}
