package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// logWriter keeps the output of running attempts in the store (R41): every
// FlushEvery it writes what each attempt printed since the last time, in one
// transaction for all of them, so that a crash loses at most that much; when
// an attempt ends, its last chunk and its record (executor, times, exit
// status) are written before its result goes to the loop, and the
// attempts that end together share a transaction (group commit). An
// attempt's stored output is kept to its limit by trimming its oldest chunks.
type logWriter struct {
	now   func() time.Time
	log   *slog.Logger
	limit int
	m     logMetrics

	mu    sync.Mutex
	live  map[*liveLog]struct{}
	ended []*endedLog

	flushMu sync.Mutex // one writer at a time; guards the stored state of every liveLog
}

// liveLog is the output of one running attempt.
type liveLog struct {
	out      *runner.Output
	instance int64
	attempt  int
	fence    *store.Fence // of the term that started the attempt
	// Owned by the flusher (under flushMu).
	seq        int
	stored     []storedChunk
	storedText int64 // text bytes kept in the store (what the header's bytes say)
	storedSize int64 // their records' size, held to the limit
	trimmed    int64 // bytes deleted from the store by trims
	lost       int64 // bytes whose write failed
}

type storedChunk struct {
	seq  int
	text int64
	size int64 // len(Data): the records, headers included
}

// endedLog is an attempt that ended, waiting for its last write.
type endedLog struct {
	l    *liveLog
	rec  store.AttemptRecord
	done chan error
}

type logMetrics struct {
	bytes  prometheus.Counter
	writes prometheus.Counter
	errors prometheus.Counter
}

func newLogWriter(cfg Config) *logWriter {
	f := promauto.With(cfg.Registerer)
	return &logWriter{now: cfg.Now, log: cfg.Logger, limit: cfg.LogMax, live: map[*liveLog]struct{}{},
		m: logMetrics{
			bytes:  f.NewCounter(prometheus.CounterOpts{Name: "ax_task_output_bytes_total", Help: "Bytes of task output written to the store."}),
			writes: f.NewCounter(prometheus.CounterOpts{Name: "ax_task_output_writes_total", Help: "Transactions that wrote task output and attempt records."}),
			errors: f.NewCounter(prometheus.CounterOpts{Name: "ax_task_output_errors_total", Help: "Writes of task output that failed (that output is lost, and counted as dropped)."}),
		}}
}

// start registers the output of an attempt that begins.
func (w *logWriter) start(instance int64, attempt int, fence *store.Fence) *liveLog {
	l := &liveLog{out: runner.NewOutput(w.limit), instance: instance, attempt: attempt, fence: fence}
	w.mu.Lock()
	w.live[l] = struct{}{}
	w.mu.Unlock()
	return l
}

// end writes the attempt's last output and its record, and returns once
// they are stored (or failed to be).
func (w *logWriter) end(ctx context.Context, l *liveLog, res runner.Result, rec store.AttemptRecord) error {
	// An HTTP executor reports its output with its result.
	if len(res.Log) > 0 {
		if lines, err := runner.DecodeLines(res.Log); err == nil {
			for _, ln := range lines {
				wr := l.out.Writer(ln.Stream)
				wr.Write(ln.Text)
				if !ln.Cont {
					wr.Write([]byte{'\n'})
				}
			}
		} else {
			l.out.Note("the executor's output could not be read: %v", err)
		}
	} else if len(res.Output) > 0 {
		l.out.Writer(runner.StreamStdout).Write(res.Output)
	}
	if res.LogDropped > 0 {
		l.out.Note("the executor dropped %d bytes of output over its limit", res.LogDropped)
	}
	e := &endedLog{l: l, rec: rec, done: make(chan error, 1)}
	w.mu.Lock()
	delete(w.live, l)
	w.ended = append(w.ended, e)
	w.mu.Unlock()
	w.flushMu.Lock()
	select {
	case err := <-e.done: // written by the flush that ran while we waited
		w.flushMu.Unlock()
		return err
	default:
	}
	w.flush(ctx, false)
	w.flushMu.Unlock()
	return <-e.done
}

// run flushes the output of running attempts every interval until ctx ends.
func (w *logWriter) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.flushMu.Lock()
			w.flush(ctx, true)
			w.flushMu.Unlock()
		}
	}
}

// flush writes the ended attempts and, with running, what the running ones
// printed since the last flush. The caller holds flushMu.
func (w *logWriter) flush(ctx context.Context, running bool) {
	w.mu.Lock()
	ended := w.ended
	w.ended = nil
	var live []*liveLog
	if running {
		live = make([]*liveLog, 0, len(w.live))
		for l := range w.live {
			live = append(live, l)
		}
	}
	w.mu.Unlock()
	if len(ended)+len(live) == 0 {
		return
	}
	now := w.now()
	byFence := map[*store.Fence]*store.LogWrite{}
	var touched []*liveLog
	add := func(l *liveLog, final bool) *store.LogWrite {
		p := byFence[l.fence]
		if p == nil {
			p = &store.LogWrite{}
			byFence[l.fence] = p
		}
		data, text, dropped := l.out.Take(final)
		if len(data) == 0 {
			return p
		}
		l.seq++
		p.Chunks = append(p.Chunks, store.LogChunk{InstanceID: l.instance, Attempt: l.attempt, Seq: l.seq, Text: text,
			Data: bytes.Clone(data), At: now})
		l.stored = append(l.stored, storedChunk{l.seq, text, int64(len(data))})
		l.storedText += text
		l.storedSize += int64(len(data))
		// The limit counts records as runner.Output does in memory (a line's
		// bytes and its header), so output kept does not depend on how it
		// fell into chunks.
		trim := 0
		for l.storedSize > int64(w.limit) && len(l.stored) > 1 {
			l.storedText -= l.stored[0].text
			l.storedSize -= l.stored[0].size
			l.trimmed += l.stored[0].text
			l.stored = l.stored[1:]
			trim = l.stored[0].seq
		}
		if trim > 0 {
			p.Trims = append(p.Trims, store.LogTrim{InstanceID: l.instance, Attempt: l.attempt, BeforeSeq: trim})
		}
		p.Chunks[len(p.Chunks)-1].Dropped = dropped + l.trimmed + l.lost
		touched = append(touched, l)
		return p
	}
	for _, l := range live {
		add(l, false)
	}
	for _, e := range ended {
		p := add(e.l, true)
		_, _, dropped := e.l.out.Take(true)
		e.rec.LogBytes, e.rec.LogDropped = e.l.storedText, dropped+e.l.trimmed+e.l.lost
		p.Attempts = append(p.Attempts, e.rec)
	}
	var errs error
	for f, p := range byFence {
		err := f.WriteLogs(ctx, *p)
		var n int64
		for _, c := range p.Chunks {
			n += c.Text
		}
		if err != nil {
			w.m.errors.Inc()
			w.log.Warn("task_output_not_stored", "chunks", len(p.Chunks), "attempts", len(p.Attempts), "bytes", n, "err", err)
			errs = errors.Join(errs, err)
			for _, c := range p.Chunks {
				for _, l := range touched {
					if l.instance == c.InstanceID && l.attempt == c.Attempt && l.seq == c.Seq {
						l.lost += c.Text
						l.storedText -= c.Text
						l.storedSize -= int64(len(c.Data))
						l.stored = l.stored[:len(l.stored)-1]
					}
				}
			}
			continue
		}
		w.m.writes.Inc()
		w.m.bytes.Add(float64(n))
	}
	for _, e := range ended {
		e.done <- errs
	}
}

// endOutput stores the last output and the record of an attempt that
// ended, before its result goes to the loop: whoever reads the log of an
// ended attempt finds all of it. A failure to store costs the output only,
// never the result.
func (e *Engine) endOutput(l *liveLog, res runner.Result, rec store.AttemptRecord) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.logs.end(ctx, l, res, rec); err != nil {
		e.log.Warn("attempt_output_lost", "task", rec.TaskID, "run", rec.RunID, "ticket", rec.Ticket, "attempt", rec.Attempt, "err", err)
	}
}
