package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

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
	Instance int64    `json:"instance"`
	Task     string   `json:"task"`
	Run      int64    `json:"run"`
	Attempt  int      `json:"attempt"`
	Attempts int      `json:"attempts"` // how many the instance has had
	State    string   `json:"state"`    // the instance's state now
	Running  bool     `json:"running"`  // this attempt is still running
	Executor string   `json:"executor,omitempty"`
	Argv     []string `json:"argv,omitempty"` // a command task's command as this attempt ran it (from its record)
	// Where an attempt the scheduler ran itself runs or ran: the host, its
	// boot id, and the command's process group (Pgid) or, for a function
	// and for a command whose group is not recorded yet, the scheduler's
	// process (Pid). Empty for HTTP tasks.
	Host      string    `json:"host,omitempty"`
	BootID    string    `json:"boot_id,omitempty"`
	Pgid      int       `json:"pgid,omitempty"`
	Pid       int       `json:"pid,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	Status    string    `json:"status,omitempty"` // success, failed, timeout, killed; empty while running or unknown
	ExitCode  *int      `json:"exit_code,omitempty"`
	Error     string    `json:"error,omitempty"`
	Bytes     int64     `json:"bytes"`   // output kept
	Dropped   int64     `json:"dropped"` // output dropped over the limit (the oldest)
	// Outputs are what the attempt gave its downstream (key=value).
	Outputs map[string]string `json:"outputs,omitempty"`
}

// LogPage is the answer of GET /api/v1/instances/{id}/logs.
type LogPage struct {
	LogHeader
	Lines []LogLine `json:"lines"`
	Next  int       `json:"next"` // pass as after= to read only what came since
}

// LogEvent is one line of the streaming form (follow=true): NDJSON objects,
// the header first, then lines as they are stored, then the end.
type LogEvent struct {
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
			h.Executor, h.Argv, h.StartedAt, h.EndedAt, h.Status, h.ExitCode, h.Error = r.Executor, r.Argv, r.StartedAt, r.EndedAt, r.Status, r.ExitCode, r.Error
			h.Bytes, h.Dropped, h.Outputs = r.LogBytes, r.LogDropped, r.Outputs
			h.Host, h.BootID, h.Pgid, h.Pid = r.Host, r.BootID, r.Pgid, r.Pid
			return h, nil
		}
	}
	if in.Attempt == t.attempt {
		h.Executor, h.StartedAt, h.EndedAt, h.Error = in.Executor, in.StartedAt, in.EndedAt, in.Error
		if in.Ticket != "" {
			procs, err := a.st.Procs(ctx, []string{in.Ticket})
			if err != nil {
				return h, err
			}
			var r store.AttemptRecord
			r.SetProcess(procs[in.Ticket])
			h.Host, h.BootID, h.Pgid, h.Pid = r.Host, r.BootID, r.Pgid, r.Pid
		}
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
	send := func(ev LogEvent) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second)) // a long stream outlives the server's write timeout
		return enc.Encode(ev) == nil
	}
	if !send(LogEvent{Header: &h}) {
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
			if !send(LogEvent{Line: &lines[i]}) {
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
			send(LogEvent{End: &end})
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
