package store

import (
	"bytes"
	"compress/flate"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	sq "github.com/Masterminds/squirrel"
)

// LogChunk is a piece of an attempt's output, as the runner encodes it
// (records marked by stream; see runner.Output). Chunks are written while
// the attempt runs, so that a crash keeps what was written; Data is stored
// compressed.
type LogChunk struct {
	InstanceID int64
	Attempt    int
	Seq        int       // from 1, in the order written
	Text       int64     // bytes of output in Data (without record headers)
	Dropped    int64     // bytes of this attempt dropped over its limit so far, this chunk included
	Data       []byte    // encoded records, uncompressed
	At         time.Time // when it was written
}

// LogTrim deletes the chunks of an attempt before a sequence number: the
// oldest output, over the attempt's limit.
type LogTrim struct {
	InstanceID int64
	Attempt    int
	BeforeSeq  int
}

// AttemptRecord is one finished attempt of an instance: who ran it, when,
// how it ended and how much output it left.
type AttemptRecord struct {
	InstanceID int64     `json:"instance_id"`
	Attempt    int       `json:"attempt"`
	RunID      int64     `json:"run_id"`
	TaskID     string    `json:"task"`
	Ticket     string    `json:"ticket"`
	Executor   string    `json:"executor"`
	Argv       []string  `json:"argv,omitempty"`      // a command task's command as this attempt ran it, templates rendered
	Status     string    `json:"status"`              // the runner's status: success, failed, killed, timeout
	ExitCode   *int      `json:"exit_code,omitempty"` // a command's exit status
	Error      string    `json:"error,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	EndedAt    time.Time `json:"ended_at"`
	LogBytes   int64     `json:"log_bytes"`   // output kept
	LogDropped int64     `json:"log_dropped"` // output dropped over the limit
	// Outputs are what the attempt gave its downstream (key=value); a
	// downstream's templates read those of its upstream's attempt that
	// succeeded last in the run.
	Outputs map[string]string `json:"outputs,omitempty"`
	// Where an attempt run by the scheduler itself (a function or a
	// command) ran, read from its ProcRecord; empty for an HTTP task's and
	// for one recorded before version 11. Attempts fills them in; they are
	// not written with the record.
	Host   string `json:"host,omitempty"`
	BootID string `json:"boot_id,omitempty"` // the host's boot: a reboot ends every process of it
	Pgid   int    `json:"pgid,omitempty"`    // a command's process group
	Pid    int    `json:"pid,omitempty"`     // the scheduler process that ran it, until its group was recorded (a function's for good)
}

// SetProcess fills in a's Host, BootID and Pgid or Pid from p, the
// process recorded with its ticket (a claim ahead records none yet).
func (a *AttemptRecord) SetProcess(p ProcRecord) {
	switch p.Kind {
	case ProcGroup:
		a.Host, a.BootID, a.Pgid = p.Host, p.Boot, p.Pgid
	case ProcServer:
		a.Host, a.BootID, a.Pid = p.Host, p.Boot, p.Pgid
	}
}

// LogWrite is one transaction of output: new chunks, trims, the records
// of attempts that ended, and where command attempts that started run.
type LogWrite struct {
	Chunks   []LogChunk
	Trims    []LogTrim
	Attempts []AttemptRecord
	Procs    []ProcRecord
}

// empty reports whether p writes nothing.
func (p LogWrite) empty() bool {
	return len(p.Chunks)+len(p.Trims)+len(p.Attempts)+len(p.Procs) == 0
}

var flaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed) // a valid level never fails
	return w
}}

func compress(data []byte) []byte {
	var b bytes.Buffer
	w := flaters.Get().(*flate.Writer)
	w.Reset(&b)
	_, _ = w.Write(data) // writes to a bytes.Buffer never fail
	_ = w.Close()
	flaters.Put(w)
	return b.Bytes()
}

func decompress(data []byte) ([]byte, error) {
	r := flate.NewReader(bytes.NewReader(data))
	defer r.Close()
	return io.ReadAll(r)
}

// WriteLogs writes p in one transaction at the fence's epoch: nothing of it
// when the epoch is stale (ErrNotLeader) or the database fails.
func (f *Fence) WriteLogs(ctx context.Context, p LogWrite) error {
	if p.empty() {
		return nil
	}
	return f.tx(ctx, "write task output", func(tx *sql.Tx) error { return f.s.writeLogs(ctx, tx, p) })
}

// WriteLogs is Fence.WriteLogs unfenced: for tests and tools that never
// dispatch (a bench's generator).
func (s *Store) WriteLogs(ctx context.Context, p LogWrite) error {
	return s.inTx(ctx, "write task output", func(tx *sql.Tx) error { return s.writeLogs(ctx, tx, p) })
}

func (s *Store) writeLogs(ctx context.Context, tx *sql.Tx, p LogWrite) error {
	{
		rows := make([][]any, 0, len(p.Chunks))
		for _, c := range lastByKey(p.Chunks, func(c LogChunk) [3]int64 { return [3]int64{c.InstanceID, int64(c.Attempt), int64(c.Seq)} }) {
			rows = append(rows, []any{c.InstanceID, c.Attempt, c.Seq, c.Text, c.Dropped, compress(c.Data), c.At.UnixMilli()})
		}
		// Chunks go in a few at a time: each may be up to a megabyte.
		for start := 0; start < len(rows); start += 16 {
			b := s.sb.Insert("log_chunks").Columns("instance_id", "attempt", "seq", "text_bytes", "dropped", "data", "at")
			for _, r := range rows[start:min(start+16, len(rows))] {
				b = b.Values(r...)
			}
			// A chunk written again (its first write's outcome unknown, or
			// left in the inbox by a primary that lost its lease) replaces
			// the first: the same bytes.
			b = b.Suffix(s.d.upsert([]string{"instance_id", "attempt", "seq"}, []string{"text_bytes", "dropped", "data", "at"}))
			if _, err := s.exec(ctx, tx, "write output chunks", b); err != nil {
				return err
			}
		}
		for _, t := range p.Trims {
			d := s.sb.Delete("log_chunks").Where(sq.Eq{"instance_id": t.InstanceID, "attempt": t.Attempt}).Where(sq.Lt{"seq": t.BeforeSeq})
			if _, err := s.exec(ctx, tx, "trim output", d); err != nil {
				return err
			}
		}
		cols := attemptRecordCols
		attempts := lastByKey(p.Attempts, func(a AttemptRecord) [2]int64 { return [2]int64{a.InstanceID, int64(a.Attempt)} })
		// Attempt records, many per statement; a record written again (the
		// same attempt number after a refused dispatch) replaces the first.
		for start := 0; start < len(attempts); start += 100 {
			b := s.sb.Insert("attempts").Columns(cols...)
			for _, a := range attempts[start:min(start+100, len(attempts))] {
				var code any
				if a.ExitCode != nil {
					code = *a.ExitCode
				}
				argv, err := jsonOrNull(a.Argv, a.Argv == nil)
				if err != nil {
					return fmt.Errorf("record attempt %d of instance %d: %w", a.Attempt, a.InstanceID, err)
				}
				outs, err := jsonOrNull(a.Outputs, len(a.Outputs) == 0)
				if err != nil {
					return fmt.Errorf("record attempt %d of instance %d: %w", a.Attempt, a.InstanceID, err)
				}
				b = b.Values(a.InstanceID, a.Attempt, a.RunID, a.TaskID, a.Ticket, a.Executor, a.Status,
					code, a.Error, ms(a.StartedAt), a.EndedAt.UnixMilli(), a.LogBytes, a.LogDropped, argv, outs)
			}
			if _, err := s.exec(ctx, tx, "record attempts", b.Suffix(s.d.upsert([]string{"instance_id", "attempt"}, cols[2:]))); err != nil {
				return err
			}
		}
		return s.writeProcs(ctx, tx, p.Procs)
	}
}

// jsonOrNull is v as a JSON text, or NULL when null says so.
func jsonOrNull(v any, null bool) (any, error) {
	if null {
		return nil, nil
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(j), nil
}

// lastByKey returns xs with only the last of the items that share a key,
// in the order of those last items: the row a multi-row upsert would keep,
// since PostgreSQL refuses one statement that upserts a key twice.
func lastByKey[T any, K comparable](xs []T, key func(T) K) []T {
	last := make(map[K]int, len(xs))
	for i, x := range xs {
		last[key(x)] = i
	}
	if len(last) == len(xs) {
		return xs
	}
	out := make([]T, 0, len(last))
	for i, x := range xs {
		if last[key(x)] == i {
			out = append(out, x)
		}
	}
	return out
}

// LogChunks returns the stored chunks of an attempt after sequence number
// after, in order, decompressed; at most limit (zero: all).
func (s *Store) LogChunks(ctx context.Context, instanceID int64, attempt, after, limit int) ([]LogChunk, error) {
	b := s.sb.Select("seq", "text_bytes", "dropped", "data", "at").From("log_chunks").
		Where(sq.Eq{"instance_id": instanceID, "attempt": attempt}).Where(sq.Gt{"seq": after}).OrderBy("seq")
	if limit > 0 {
		b = b.Limit(uint64(limit))
	}
	var out []LogChunk
	err := s.query(ctx, s.read, "read task output", b, func(r *sql.Rows) error {
		c := LogChunk{InstanceID: instanceID, Attempt: attempt}
		var (
			data []byte
			at   int64
		)
		if err := r.Scan(&c.Seq, &c.Text, &c.Dropped, &data, &at); err != nil {
			return err
		}
		raw, err := decompress(data)
		if err != nil {
			return fmt.Errorf("chunk %d of instance %d attempt %d is corrupt: %w", c.Seq, instanceID, attempt, err)
		}
		c.Data, c.At = raw, time.UnixMilli(at).UTC()
		out = append(out, c)
		return nil
	})
	return out, err
}

// attemptRecordCols are the columns of an attempt's record, in the order
// WriteLogs writes them.
var attemptRecordCols = []string{"instance_id", "attempt", "run_id", "task_id", "ticket", "executor", "status", "exit_code", "error",
	"started_at", "ended_at", "log_bytes", "log_dropped", "argv", "outputs"}

// attemptCols are the columns scanAttempt reads, in its order: the record's,
// then where its process ran (attemptsFrom).
var attemptCols = append(prefixed("a.", attemptRecordCols), "p.host", "p.boot", "p.pgid", "p.kind")

// prefixed returns cols each with the table alias p before it.
func prefixed(p string, cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = p + c
	}
	return out
}

// attemptsFrom is the table scanAttempt reads: each attempt with the
// process record of its ticket, when the scheduler ran it itself.
const attemptsFrom = "attempts a LEFT JOIN procs p ON p.ticket = a.ticket"

// scanAttempt reads one row of attemptCols.
func scanAttempt(r *sql.Rows) (AttemptRecord, error) {
	var (
		a       AttemptRecord
		code    sql.NullInt64
		started sql.NullInt64
		ended   int64
		argv    sql.NullString
		outs    sql.NullString
		host    sql.NullString
		boot    sql.NullString
		pgid    sql.NullInt64
		kind    sql.NullString
	)
	if err := r.Scan(&a.InstanceID, &a.Attempt, &a.RunID, &a.TaskID, &a.Ticket, &a.Executor, &a.Status, &code, &a.Error,
		&started, &ended, &a.LogBytes, &a.LogDropped, &argv, &outs, &host, &boot, &pgid, &kind); err != nil {
		return a, err
	}
	if host.Valid {
		a.SetProcess(ProcRecord{Host: host.String, Boot: boot.String, Pgid: int(pgid.Int64), Kind: kind.String})
	}
	if code.Valid {
		c := int(code.Int64)
		a.ExitCode = &c
	}
	if argv.Valid && argv.String != "" {
		if err := json.Unmarshal([]byte(argv.String), &a.Argv); err != nil {
			return a, fmt.Errorf("attempt %d of instance %d: its recorded command is damaged: %w", a.Attempt, a.InstanceID, err)
		}
	}
	if outs.Valid && outs.String != "" {
		if err := json.Unmarshal([]byte(outs.String), &a.Outputs); err != nil {
			return a, fmt.Errorf("attempt %d of instance %d: its recorded outputs are damaged: %w", a.Attempt, a.InstanceID, err)
		}
	}
	a.StartedAt, a.EndedAt = fromMS(started), time.UnixMilli(ended).UTC()
	return a, nil
}

// RunOutputs returns, for each task of the run with an attempt that
// succeeded and gave outputs, the outputs of the one recorded last: what
// the run's downstream tasks read (a rerun's success replaces the first's).
func (s *Store) RunOutputs(ctx context.Context, runID int64, taskIDs []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	if len(taskIDs) == 0 {
		return out, nil
	}
	b := s.sb.Select("task_id", "outputs").From("attempts").Where(sq.Eq{"run_id": runID, "task_id": taskIDs, "status": "success"}).
		Where(sq.NotEq{"outputs": nil}).OrderBy("id")
	err := s.query(ctx, s.read, "read upstream outputs", b, func(r *sql.Rows) error {
		var (
			task string
			text string
		)
		if err := r.Scan(&task, &text); err != nil {
			return err
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			return fmt.Errorf("the outputs recorded for task %s in run %d are damaged: %w", task, runID, err)
		}
		out[task] = m
		return nil
	})
	return out, err
}

// Attempts returns the recorded attempts of an instance, in order.
func (s *Store) Attempts(ctx context.Context, instanceID int64) ([]AttemptRecord, error) {
	b := s.sb.Select(attemptCols...).From(attemptsFrom).Where(sq.Eq{"a.instance_id": instanceID}).OrderBy("a.attempt")
	var out []AttemptRecord
	err := s.query(ctx, s.read, "read attempts", b, func(r *sql.Rows) error {
		a, err := scanAttempt(r)
		out = append(out, a)
		return err
	})
	return out, err
}

// LatestAttempt returns the record of the task's attempt recorded last (a
// record is written when its attempt ends), or ErrNotFound when none is.
func (s *Store) LatestAttempt(ctx context.Context, taskID string) (AttemptRecord, error) {
	b := s.sb.Select(attemptCols...).From(attemptsFrom).Where(sq.Eq{"a.task_id": taskID}).OrderBy("a.id DESC").Limit(1)
	var (
		out   AttemptRecord
		found bool
	)
	err := s.query(ctx, s.read, "read latest attempt", b, func(r *sql.Rows) error {
		a, err := scanAttempt(r)
		out, found = a, true
		return err
	})
	if err == nil && !found {
		err = ErrNotFound
	}
	return out, err
}

// LogAttempts returns the attempt numbers of an instance that have stored
// output, in order.
func (s *Store) LogAttempts(ctx context.Context, instanceID int64) ([]int, error) {
	b := s.sb.Select("DISTINCT attempt").From("log_chunks").Where(sq.Eq{"instance_id": instanceID}).OrderBy("attempt")
	var out []int
	err := s.query(ctx, s.read, "read output attempts", b, func(r *sql.Rows) error {
		var a int
		if err := r.Scan(&a); err != nil {
			return err
		}
		out = append(out, a)
		return nil
	})
	return out, err
}
