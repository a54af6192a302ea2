package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/spf13/cobra"
)

// noLogWhy says why task has no instance that ran (in run, when not 0):
// the run does not exist, retention pruned what ran, or nothing ran yet.
func noLogWhy(ctx context.Context, c *api.Client, task string, run int64) error {
	pruned := "runs that ended before the retention horizon are pruned, their logs with them"
	if run != 0 {
		if ins, err := c.Instances(ctx, api.InstanceQuery{Run: run, Limit: 1}); err == nil && len(ins) == 0 {
			return fmt.Errorf("run %d: no such run (%s)", run, pruned)
		}
		return fmt.Errorf("%s has no instance that ran in run %d: no log (ax status %s shows its state)", task, run, task)
	}
	p, t, _ := SplitTask(task)
	if info, err := c.Task(ctx, p, t); err == nil {
		// No instance that ran is left, yet the summary kept what retention
		// pruned (every instance, or a last executor only pruned ones had).
		if s := info.Summary; s.Pruned != nil || s.LastExecutor != "" {
			return fmt.Errorf("%s has no instance that ran left: %s", task, pruned)
		}
	}
	return fmt.Errorf("%s has no instance that ran yet: no log (ax status %s shows its state)", task, task)
}

// LogsAPI prints (or follows) a task's log through the admin API.
func LogsAPI(ctx context.Context, w io.Writer, f APIOptions, task string, run, instance int64, attempt int, follow bool) error {
	if _, _, err := SplitTask(task); err != nil {
		return err
	}
	c, err := NewAPIClient(f.Server)
	if err != nil {
		return err
	}
	if instance == 0 {
		// The instance of the task's latest attempt, however many newer
		// ones have not run (scheduled ahead, paused, failed behind an
		// upstream), and an older one rerun after a newer one ran.
		ins, err := c.Instances(ctx, api.InstanceQuery{Task: task, Run: run, Ran: true, Started: true, Limit: 1})
		if err != nil {
			return err
		}
		if len(ins) > 0 {
			instance = ins[0].ID
		}
		if instance == 0 {
			return Fail(noLogWhy(ctx, c, task, run))
		}
	}
	pipeline, _, _ := SplitTask(task)
	loc, err := api.ZoneOf(ctx, c, pipeline, f.UTC)
	if err != nil {
		return err
	}
	if !follow {
		p, raw, err := c.Logs(ctx, instance, task, attempt)
		if err != nil {
			return err
		}
		if f.JSON {
			return OrThen(PrintJSON(w, raw), func() error { return attemptExit(p.LogHeader) })
		}
		writeLogHeader(w, p.LogHeader, loc)
		for _, l := range p.Lines {
			writeLogLine(w, l)
		}
		return attemptExit(p.LogHeader)
	}
	var last api.LogHeader // how the attempt stands: the header, then its end
	ended := false         // the header said how the attempt ended: its end event says it again
	err = c.FollowLogs(ctx, instance, task, attempt, func(raw []byte) error {
		var ev api.LogEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return fmt.Errorf("malformed log stream from the server: %w", err)
		}
		if ev.Header != nil {
			last = *ev.Header
		} else if ev.End != nil {
			last = *ev.End
		}
		if f.JSON {
			_, err := w.Write(append(raw, '\n'))
			return err
		}
		switch {
		case ev.Header != nil:
			writeLogHeader(w, *ev.Header, loc)
			ended = !ev.Header.Running
		case ev.Line != nil:
			writeLogLine(w, *ev.Line)
		case ev.End != nil && !ended:
			writeLogEnd(w, *ev.End, loc)
		}
		return nil
	})
	return OrThen(err, func() error { return attemptExit(last) })
}

// attemptExit is the exit status of ax logs for the attempt it showed: 0
// while it runs and when it succeeded, 1 (ExitFailed, nothing more printed:
// the header says how it ended) when it failed, was killed or timed out.
// An attempt that ended without a record (its process died) has the
// outcome of its instance.
func attemptExit(h api.LogHeader) error {
	switch h.Status {
	case string(runner.StatusFailed), string(runner.StatusKilled), string(runner.StatusTimeout):
		return Failed()
	case "unknown":
		if s := axtype.State(h.State); s == axtype.Failed || s == axtype.Killed {
			return Failed()
		}
	}
	return nil
}

func writeLogHeader(w io.Writer, h api.LogHeader, loc *time.Location) {
	fmt.Fprintf(w, "== %s instance %d (run %d), attempt %d of %d, executor %s%s\n", h.Task, h.Instance, h.Run, h.Attempt, h.Attempts, orDash(h.Executor), processText(h))
	fmt.Fprintf(w, "== started %s", api.Stamp(h.StartedAt, loc))
	if h.Running {
		fmt.Fprintf(w, ", running\n")
	} else {
		fmt.Fprintf(w, ", %s\n", endText(h, loc))
		writeOutputs(w, h)
	}
	if h.Dropped > 0 {
		fmt.Fprintf(w, "== truncated: the first %d bytes of output were dropped (over the limit); the last %d are kept\n", h.Dropped, h.Bytes)
	}
}

// processText says where a local attempt runs or ran: " (pgid N, boot
// ID)" for a command's process group, " (pid N, boot ID)" for the
// scheduler process that ran it; empty when nothing is recorded.
func processText(h api.LogHeader) string {
	switch {
	case h.Pgid > 0:
		return fmt.Sprintf(" (pgid %d on %s, boot %s)", h.Pgid, h.Host, h.BootID)
	case h.Pid > 0:
		return fmt.Sprintf(" (pid %d on %s, boot %s)", h.Pid, h.Host, h.BootID)
	}
	return ""
}

func endText(h api.LogHeader, loc *time.Location) string {
	var b strings.Builder
	if !h.EndedAt.IsZero() {
		fmt.Fprintf(&b, "ended %s, ", api.Stamp(h.EndedAt, loc))
	}
	b.WriteString(orDash(h.Status))
	if h.ExitCode != nil {
		fmt.Fprintf(&b, " (exit status %d)", *h.ExitCode)
	}
	if h.Error != "" && h.ExitCode == nil {
		fmt.Fprintf(&b, ": %s", h.Error)
	}
	return b.String()
}

func writeLogLine(w io.Writer, l api.LogLine) {
	end := "\n"
	if l.Cont {
		end = "…\n"
	}
	fmt.Fprintf(w, "%-6s| %s%s", l.Stream, l.Text, end)
}

func writeLogEnd(w io.Writer, h api.LogHeader, loc *time.Location) {
	if h.Running {
		return
	}
	fmt.Fprintf(w, "== %s\n", endText(h, loc))
	writeOutputs(w, h)
}

// writeOutputs writes the outputs an attempt gave its downstream, if any.
func writeOutputs(w io.Writer, h api.LogHeader) {
	if len(h.Outputs) > 0 {
		fmt.Fprintf(w, "== outputs: %s\n", OutputsText(h.Outputs))
	}
}

// OutputsText renders an attempt's outputs as key=value, sorted by key,
// a value that is not plain printable text quoted (a newline, a terminal
// escape), so that it cannot drive the terminal.
func OutputsText(outs map[string]string) string {
	keys := make([]string, 0, len(outs))
	for k := range outs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := outs[k]
		if strings.ContainsFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) || strings.Contains(v, " ") || v == "" {
			v = strconv.Quote(v)
		}
		parts[i] = k + "=" + v
	}
	return strings.Join(parts, " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func NewLogsCmd() *cobra.Command {
	var (
		f        APIOptions
		run      int64
		instance int64
		attempt  int
		follow   bool
	)
	cmd := &cobra.Command{
		Use:   "logs PIPELINE.TASK",
		Short: "Print the output of a task's attempt (the latest by default); -f follows a running one until it ends",
		Long: `Print what an attempt of a task printed (stdout, stderr, a function's logger),
with a header: instance, attempt, executor, start, end, exit status. Lines are
marked by stream; bytes that are not text are shown escaped (\xNN).

The task's latest attempt (of the instance that started last: a rerun of an
older instance included) is shown unless --run, --instance or --attempt say
otherwise. With -f, a running attempt is
followed live and the command ends when the attempt ends.

Exit status: 0 when the attempt shown succeeded or is still running; 1 when
it failed, was killed or timed out (the header says how, nothing is printed
on stderr), and when there is no log to show or the server cannot be asked
(an "ax: …" message on stderr says why); 2 for a usage error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if run != 0 && instance != 0 {
				return Usage("--run and --instance name the instance twice: give one")
			}
			// The flags' zero value means "not given": 0 given by hand is no
			// run, instance or attempt, and is refused like a negative one.
			for _, c := range []struct {
				name, what string
				v          int64
			}{{"run", "a run number", run}, {"instance", "an instance id", instance}, {"attempt", "an attempt number", int64(attempt)}} {
				if cmd.Flags().Changed(c.name) && c.v < 1 {
					return Usage("--%s %d: give %s from 1", c.name, c.v, c.what)
				}
			}
			return LogsAPI(cmd.Context(), cmd.OutOrStdout(), f, args[0], run, instance, attempt, follow)
		},
	}
	cmd.Flags().Int64Var(&run, "run", 0, "the task's instance in this run")
	cmd.Flags().Int64Var(&instance, "instance", 0, "this instance (of the task)")
	cmd.Flags().IntVar(&attempt, "attempt", 0, "this attempt (default the latest)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow a running attempt until it ends")
	addAPIFlags(cmd, &f)
	return cmd
}
