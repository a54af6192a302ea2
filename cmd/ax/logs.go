package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// LogLine is one line of an attempt's output on the API. Text is escaped
// (runner.Escape): bytes that are not UTF-8 and control characters come as
// \xNN, so binary output never breaks JSON, a terminal or the console.
type LogLine struct {
	Stream string    `json:"stream"` // stdout, stderr, log (a function's logger), ax (a note from ax)
	Text   string    `json:"text"`
	Cont   bool      `json:"cont,omitempty"` // the line goes on in the next one (longer than a record, or unfinished)
	At     time.Time `json:"at"`             // when its chunk was stored (within a second of its printing)
}

// LogHeader says which attempt a log is and how it ended.
type LogHeader struct {
	Instance  int64     `json:"instance"`
	Task      string    `json:"task"`
	Run       int64     `json:"run"`
	Attempt   int       `json:"attempt"`
	Attempts  int       `json:"attempts"` // how many the instance has had
	State     string    `json:"state"`    // the instance's state now
	Running   bool      `json:"running"`  // this attempt is still running
	Executor  string    `json:"executor,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	Status    string    `json:"status,omitempty"` // success, failed, timeout, killed; empty while running or unknown
	ExitCode  *int      `json:"exit_code,omitempty"`
	Error     string    `json:"error,omitempty"`
	Bytes     int64     `json:"bytes"`   // output kept
	Dropped   int64     `json:"dropped"` // output dropped over the limit (the oldest)
}

// LogPage is the answer of GET /api/v1/instances/{id}/logs.
type LogPage struct {
	LogHeader
	Lines []LogLine `json:"lines"`
	Next  int       `json:"next"` // pass as after= to read only what came since
}

// logEvent is one line of the streaming form (follow=true): NDJSON objects,
// the header first, then lines as they are stored, then the end.
type logEvent struct {
	Header *LogHeader `json:"header,omitempty"`
	Line   *LogLine   `json:"line,omitempty"`
	End    *LogHeader `json:"end,omitempty"`
}

// followPoll is how often a follower reads new chunks from the store (the
// scheduler writes them every second).
const followPoll = 250 * time.Millisecond

// streamer is a handler's answer that writes itself (a stream), instead of
// one JSON document.
type streamer func(w http.ResponseWriter)

// logTarget is what a logs request names.
type logTarget struct {
	in      axtype.Instance
	attempt int
}

// resolveLog finds the instance and attempt of a logs request, with a 404
// that names what is missing.
func (a *admin) resolveLog(ctx context.Context, id int64, task string, attempt int) (logTarget, error) {
	in, err := a.st.Instance(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return logTarget{}, errf(http.StatusNotFound, "instance %d: no such instance (runs that ended before the retention horizon are pruned, their logs with them)", id)
	}
	if err != nil {
		return logTarget{}, err
	}
	if task != "" && in.TaskID != task {
		return logTarget{}, errf(http.StatusNotFound, "instance %d is of task %s, not %s", id, in.TaskID, task)
	}
	if in.Attempt == 0 {
		return logTarget{}, errf(http.StatusNotFound, "instance %d of %s has no attempt yet (it is %s): no log", id, in.TaskID, in.State)
	}
	if attempt == 0 {
		attempt = in.Attempt
	}
	if attempt > in.Attempt {
		return logTarget{}, errf(http.StatusNotFound, "instance %d of %s has no attempt %d: it has had %d (attempt=1 to %d)", id, in.TaskID, attempt, in.Attempt, in.Attempt)
	}
	return logTarget{in: in, attempt: attempt}, nil
}

// header builds the header of an attempt from its record, or, while it
// runs (or when its process died before recording it), from the instance.
func (a *admin) header(ctx context.Context, t logTarget) (LogHeader, error) {
	in := t.in
	h := LogHeader{Instance: in.ID, Task: in.TaskID, Run: in.RunID, Attempt: t.attempt, Attempts: in.Attempt, State: string(in.State)}
	h.Running = in.State == axtype.Running && in.Attempt == t.attempt
	recs, err := a.st.Attempts(ctx, in.ID)
	if err != nil {
		return h, err
	}
	for _, r := range recs {
		if r.Attempt == t.attempt {
			h.Executor, h.StartedAt, h.EndedAt, h.Status, h.ExitCode, h.Error = r.Executor, r.StartedAt, r.EndedAt, r.Status, r.ExitCode, r.Error
			h.Bytes, h.Dropped = r.LogBytes, r.LogDropped
			return h, nil
		}
	}
	if in.Attempt == t.attempt {
		h.Executor, h.StartedAt, h.EndedAt, h.Error = in.Executor, in.StartedAt, in.EndedAt, in.Error
		if !h.Running {
			h.Status = "unknown" // ended without a record: its process died (the instance says how it ended)
		}
	}
	return h, nil
}

// readLines reads the chunks of an attempt after seq; it returns the lines,
// the last sequence number read, and the bytes kept and dropped so far.
func (a *admin) readLines(ctx context.Context, in int64, attempt, after int) ([]LogLine, int, int64, int64, error) {
	chunks, err := a.st.LogChunks(ctx, in, attempt, after, 0)
	if err != nil {
		return nil, after, 0, 0, err
	}
	lines := []LogLine{}
	var kept, dropped int64
	for _, c := range chunks {
		ls, err := runner.DecodeLines(c.Data)
		if err != nil {
			lines = append(lines, LogLine{Stream: runner.StreamAx.String(), Text: fmt.Sprintf("chunk %d is damaged: %v", c.Seq, err), At: c.At})
		}
		for _, l := range ls {
			lines = append(lines, LogLine{Stream: l.Stream.String(), Text: runner.Escape(l.Text), Cont: l.Cont, At: c.At})
		}
		after, kept, dropped = c.Seq, kept+c.Text, c.Dropped
	}
	return lines, after, kept, dropped, nil
}

// logs serves GET /api/v1/instances/{id}/logs: the output of one attempt
// (the latest by default), or, with follow=true, a stream of it until it ends.
func (a *admin) logs(r *http.Request) (any, error) {
	q, err := parseQuery(r, "attempt", "task", "after", "follow")
	if err != nil {
		return nil, err
	}
	id, perr := strconv.ParseInt(r.PathValue("id"), 10, 64)
	attempt := int(q.int("attempt", 0, 1, 1<<30))
	after := int(q.int("after", 0, 0, 1<<30))
	follow := q.bool("follow")
	if perr != nil || id <= 0 {
		q.errs = append(q.errs, fmt.Sprintf("instance %q: give an instance id (a whole number)", r.PathValue("id")))
	}
	task := q.str("task")
	if err := a.checkTaskFilter(r.Context(), q, task); err != nil {
		return nil, err
	}
	if err := q.err(); err != nil {
		return nil, err
	}
	t, err := a.resolveLog(r.Context(), id, task, attempt)
	if err != nil {
		return nil, err
	}
	h, err := a.header(r.Context(), t)
	if err != nil {
		return nil, err
	}
	if follow {
		return streamer(func(w http.ResponseWriter) { a.follow(r.Context(), w, t, h, after) }), nil
	}
	lines, next, kept, dropped, err := a.readLines(r.Context(), t.in.ID, t.attempt, after)
	if err != nil {
		return nil, err
	}
	if h.Running || h.Status == "unknown" {
		h.Bytes, h.Dropped = kept, dropped
	}
	return LogPage{LogHeader: h, Lines: lines, Next: next}, nil
}

// follow streams an attempt's output as NDJSON until it ends (or the client
// goes away): what is stored already, then each chunk as the scheduler
// stores it, then the attempt's end with its exit status.
func (a *admin) follow(ctx context.Context, w http.ResponseWriter, t logTarget, h LogHeader, after int) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	send := func(ev logEvent) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second)) // a long stream outlives the server's write timeout
		return enc.Encode(ev) == nil
	}
	if !send(logEvent{Header: &h}) {
		return
	}
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for {
		// Whether it ended is read before the chunks: the scheduler stores an
		// attempt's last chunk before its result, so an attempt seen ended
		// here has all its output stored by the read that follows.
		in, err := a.st.Instance(ctx, t.in.ID)
		ended := err != nil || in.State != axtype.Running || in.Attempt != t.attempt
		lines, next, _, _, rerr := a.readLines(ctx, t.in.ID, t.attempt, after)
		if rerr != nil && ctx.Err() == nil {
			lines = []LogLine{{Stream: runner.StreamAx.String(), Text: "reading the log failed: " + rerr.Error(), At: time.Now().UTC()}}
		}
		after = next
		for i := range lines {
			if !send(logEvent{Line: &lines[i]}) {
				return
			}
		}
		_ = rc.Flush()
		if ended {
			if err == nil {
				t.in = in
			}
			end, herr := a.header(ctx, t)
			if herr != nil {
				end = h
			}
			end.Running = false
			send(logEvent{End: &end})
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func newLogsCmd() *cobra.Command {
	var (
		f        apiFlags
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

The latest attempt of the task's latest instance that ran is shown unless
--run, --instance or --attempt say otherwise. With -f, a running attempt is
followed live and the command ends when the attempt ends.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if run != 0 && instance != 0 {
				return usageErr("--run and --instance name the instance twice: give one")
			}
			// The flags' zero value means "not given": 0 given by hand is no
			// run, instance or attempt, and is refused like a negative one.
			for _, c := range []struct {
				name, what string
				v          int64
			}{{"run", "a run number", run}, {"instance", "an instance id", instance}, {"attempt", "an attempt number", int64(attempt)}} {
				if cmd.Flags().Changed(c.name) && c.v < 1 {
					return usageErr("--%s %d: give %s from 1", c.name, c.v, c.what)
				}
			}
			return logsAPI(cmd.Context(), cmd.OutOrStdout(), f, args[0], run, instance, attempt, follow)
		},
	}
	cmd.Flags().Int64Var(&run, "run", 0, "the task's instance in this run")
	cmd.Flags().Int64Var(&instance, "instance", 0, "this instance (of the task)")
	cmd.Flags().IntVar(&attempt, "attempt", 0, "this attempt (default the latest)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow a running attempt until it ends")
	f.add(cmd)
	return cmd
}

// noLogWhy says why task has no instance that ran (in run, when not 0):
// the run does not exist, retention pruned what ran, or nothing ran yet.
func noLogWhy(ctx context.Context, c *apiClient, task string, run int64) error {
	pruned := "runs that ended before the retention horizon are pruned, their logs with them"
	if run != 0 {
		var ins []axtype.Instance
		if err := c.get(ctx, fmt.Sprintf("/api/v1/instances?run=%d&limit=1", run), &ins); err == nil && len(ins) == 0 {
			return fmt.Errorf("run %d: no such run (%s)", run, pruned)
		}
		return fmt.Errorf("%s has no instance that ran in run %d: no log (ax status %s shows its state)", task, run, task)
	}
	p, t, _ := splitTask(task)
	var info struct {
		Summary store.Summary `json:"summary"`
	}
	if err := c.get(ctx, "/api/v1/pipelines/"+url.PathEscape(p)+"/tasks/"+url.PathEscape(t), &info); err == nil {
		// No instance that ran is left, yet the summary kept what retention
		// pruned (every instance, or a last executor only pruned ones had).
		if s := info.Summary; s.Pruned != nil || s.LastExecutor != "" {
			return fmt.Errorf("%s has no instance that ran left: %s", task, pruned)
		}
	}
	return fmt.Errorf("%s has no instance that ran yet: no log (ax status %s shows its state)", task, task)
}

// logsAPI prints (or follows) a task's log through the admin API.
func logsAPI(ctx context.Context, w io.Writer, f apiFlags, task string, run, instance int64, attempt int, follow bool) error {
	if _, _, err := splitTask(task); err != nil {
		return err
	}
	c, err := newAPIClient(f.server)
	if err != nil {
		return err
	}
	if instance == 0 {
		// The newest instance that ran, however many newer ones have not
		// (scheduled ahead, paused, failed behind an upstream).
		q := url.Values{"task": {task}, "ran": {"true"}, "limit": {"1"}}
		if run != 0 {
			q.Set("run", strconv.FormatInt(run, 10))
		}
		var ins []axtype.Instance
		if err := c.get(ctx, "/api/v1/instances?"+q.Encode(), &ins); err != nil {
			return err
		}
		if len(ins) > 0 {
			instance = ins[0].ID
		}
		if instance == 0 {
			return &exitError{code: exitFailed, err: noLogWhy(ctx, c, task, run)}
		}
	}
	q := url.Values{"task": {task}}
	if attempt > 0 {
		q.Set("attempt", strconv.Itoa(attempt))
	}
	path := fmt.Sprintf("/api/v1/instances/%d/logs?", instance)
	pipeline, _, _ := splitTask(task)
	loc, err := zoneOf(ctx, c, pipeline, f.utc)
	if err != nil {
		return err
	}
	if !follow {
		raw, err := c.call(ctx, http.MethodGet, path+q.Encode(), nil)
		if err != nil || f.json {
			return orThen(err, func() error { return printJSON(w, raw) })
		}
		var p LogPage
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		writeLogHeader(w, p.LogHeader, loc)
		for _, l := range p.Lines {
			writeLogLine(w, l)
		}
		return nil
	}
	q.Set("follow", "true")
	ended := false // the header said how the attempt ended: its end event says it again
	return c.stream(ctx, path+q.Encode(), func(raw []byte) error {
		if f.json {
			_, err := w.Write(append(raw, '\n'))
			return err
		}
		var ev logEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return fmt.Errorf("malformed log stream from the server: %w", err)
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
}

// stream GETs path and calls each for every line of the NDJSON answer, until
// the server ends it.
func (c *apiClient) stream(ctx context.Context, path string, each func([]byte) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := *c.hc
	hc.Timeout = 0 // a follow lasts as long as the attempt
	resp, err := hc.Do(req)
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("cannot reach ax server at %s: %v", c.base, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("%s (HTTP %d)", msg, resp.StatusCode)}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if err := each(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("the log stream broke off: %w", err)}
	}
	return nil
}

func writeLogHeader(w io.Writer, h LogHeader, loc *time.Location) {
	fmt.Fprintf(w, "== %s instance %d (run %d), attempt %d of %d, executor %s\n", h.Task, h.Instance, h.Run, h.Attempt, h.Attempts, orDash(h.Executor))
	fmt.Fprintf(w, "== started %s", stamp(h.StartedAt, loc))
	if h.Running {
		fmt.Fprintf(w, ", running\n")
	} else {
		fmt.Fprintf(w, ", %s\n", endText(h, loc))
	}
	if h.Dropped > 0 {
		fmt.Fprintf(w, "== truncated: the first %d bytes of output were dropped (over the limit); the last %d are kept\n", h.Dropped, h.Bytes)
	}
}

func endText(h LogHeader, loc *time.Location) string {
	var b strings.Builder
	if !h.EndedAt.IsZero() {
		fmt.Fprintf(&b, "ended %s, ", stamp(h.EndedAt, loc))
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

func writeLogLine(w io.Writer, l LogLine) {
	end := "\n"
	if l.Cont {
		end = "…\n"
	}
	fmt.Fprintf(w, "%-6s| %s%s", l.Stream, l.Text, end)
}

func writeLogEnd(w io.Writer, h LogHeader, loc *time.Location) {
	if h.Running {
		return
	}
	fmt.Fprintf(w, "== %s\n", endText(h, loc))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
