package engine

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// logWriter keeps the output of running attempts in the store: every
// FlushEvery it writes what each attempt printed since the last time, in one
// transaction for all of them, so that a crash loses at most that much. When
// an attempt ends, its last chunk and its record (executor, times, exit
// status) go with its result, and are written in the transaction that
// records the results (applyResults): the reader of an ended attempt finds
// all of its output, and an attempt costs no transaction of its own. An
// attempt's stored output is kept to its limit by trimming its oldest chunks.
type logWriter struct {
	now   func() time.Time
	log   *slog.Logger
	limit int
	m     logMetrics

	mu   sync.Mutex
	live map[*liveLog]struct{}
	// started: attempts whose command just started, their process records
	// not written yet; kick wakes the writer to write them (flushProcs).
	started []*liveLog
	kick    chan struct{}

	flushMu sync.Mutex // one writer at a time; guards the stored state of every liveLog
}

// liveLog is the output of one running attempt.
type liveLog struct {
	out      *runner.Output
	instance int64
	attempt  int
	fence    *store.Fence // of the term that started the attempt
	w        *logWriter
	// proc is where the attempt's command runs, set once it started (see
	// setProc); flushProcs writes it within procFlushGap, so that a primary
	// inheriting the attempt can check its process group.
	proc atomic.Pointer[store.ProcRecord]
	// Owned by the flusher (under flushMu).
	procStored bool
	seq        int
	stored     []storedChunk
	storedText int64 // text bytes kept in the store (what the header's bytes say)
	storedSize int64 // their records' size, held to the limit
	trimmed    int64 // bytes deleted from the store by trims
	// retry holds the chunks whose write failed (the store unavailable, or
	// the lease lost): written again with the next flush, or with the
	// attempt's result, which a primary that lost its lease leaves in the
	// inbox for the next one (leaveResults). Those the limit trims away go.
	retry []store.LogChunk
}

type storedChunk struct {
	seq  int
	text int64
	size int64 // len(Data): the records, headers included
}

type logMetrics struct {
	bytes  prometheus.Counter
	writes prometheus.Counter
	errors prometheus.Counter
}

func newLogWriter(cfg Config) *logWriter {
	f := promauto.With(cfg.Registerer)
	return &logWriter{now: cfg.Now, log: cfg.Logger, limit: cfg.LogMax, live: map[*liveLog]struct{}{}, kick: make(chan struct{}, 1),
		m: logMetrics{
			bytes:  f.NewCounter(prometheus.CounterOpts{Name: "ax_task_output_bytes_total", Help: "Bytes of task output written to the store."}),
			writes: f.NewCounter(prometheus.CounterOpts{Name: "ax_task_output_writes_total", Help: "Transactions that wrote task output and attempt records."}),
			errors: f.NewCounter(prometheus.CounterOpts{Name: "ax_task_output_errors_total", Help: "Writes of task output that failed (that output is written again with the next one, or with the attempt's result)."}),
		}}
}

// start registers the output of an attempt that begins.
func (w *logWriter) start(instance int64, attempt int, fence *store.Fence) *liveLog {
	l := &liveLog{out: runner.NewOutput(w.limit), instance: instance, attempt: attempt, fence: fence, w: w}
	w.mu.Lock()
	w.live[l] = struct{}{}
	w.mu.Unlock()
	return l
}

// setProc records where the attempt's command runs: written within
// procFlushGap, with the records of every command started meanwhile
// (flushProcs), rather than with the next flush of output a second later.
// Until then the store holds the scheduler process that handed the attempt
// out, and a primary taking over judges the command by it.
func (l *liveLog) setProc(p store.ProcRecord) {
	l.proc.Store(&p)
	w := l.w
	w.mu.Lock()
	w.started = append(w.started, l)
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// procFlushGap is how long after a command starts its process group's
// record is written, at most: the starts of that time share a transaction.
const procFlushGap = 20 * time.Millisecond

// flushProcs writes the process records of the commands started since the
// last time, in one transaction per fence. The caller holds flushMu. A
// record whose write fails goes with the next flush of output.
func (w *logWriter) flushProcs(ctx context.Context) {
	w.mu.Lock()
	started := w.started
	w.started = nil
	w.mu.Unlock()
	byFence := map[*store.Fence][]*liveLog{}
	for _, l := range started {
		if !l.procStored && l.proc.Load() != nil {
			byFence[l.fence] = append(byFence[l.fence], l)
		}
	}
	for f, ls := range byFence {
		recs := make([]store.ProcRecord, len(ls))
		for i, l := range ls {
			recs[i] = *l.proc.Load()
		}
		if err := f.WriteLogs(ctx, store.LogWrite{Procs: recs}); err != nil {
			w.log.Warn("process_records_not_stored", "records", len(recs), "err", err)
			continue
		}
		for _, l := range ls {
			l.procStored = true
		}
	}
}

// end takes the attempt's last output and completes its record: what to
// write with its result. Nothing is written here; an attempt that printed
// nothing since the last flush adds no chunk.
func (w *logWriter) end(l *liveLog, res runner.Result, rec store.AttemptRecord) *store.LogWrite {
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
	w.mu.Lock()
	delete(w.live, l)
	w.mu.Unlock()
	p := &store.LogWrite{}
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.take(l, true, w.now(), p)
	_, _, dropped := l.out.Take(true)
	rec.LogBytes, rec.LogDropped = l.storedText, dropped+l.trimmed
	p.Attempts = append(p.Attempts, rec)
	return p
}

// take adds to p what l printed since the last take: a chunk, and the trim
// that keeps the stored output to its limit. The caller holds flushMu.
func (w *logWriter) take(l *liveLog, final bool, now time.Time, p *store.LogWrite) {
	if rec := l.proc.Load(); rec != nil && !l.procStored && !final {
		// An attempt that ended needs none: its result says what happened.
		p.Procs = append(p.Procs, *rec)
		l.procStored = true
	}
	if len(l.retry) > 0 {
		for _, c := range l.retry {
			if len(l.stored) > 0 && c.Seq >= l.stored[0].seq {
				p.Chunks = append(p.Chunks, c)
			}
		}
		l.retry = nil
	}
	data, text, dropped := l.out.Take(final)
	if len(data) == 0 {
		return
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
	p.Chunks[len(p.Chunks)-1].Dropped = dropped + l.trimmed
}

// wrote counts a transaction that wrote p (or failed to).
func (w *logWriter) wrote(p store.LogWrite, err error) {
	var n int64
	for _, c := range p.Chunks {
		n += c.Text
	}
	if err != nil {
		w.m.errors.Inc()
		w.log.Warn("task_output_not_stored", "chunks", len(p.Chunks), "attempts", len(p.Attempts), "bytes", n, "err", err)
		return
	}
	w.m.writes.Inc()
	w.m.bytes.Add(float64(n))
}

// run flushes the output of running attempts every interval until ctx ends.
func (w *logWriter) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var procs <-chan time.Time // armed by the first command started since the last flushProcs
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
			if procs == nil {
				procs = time.After(procFlushGap)
			}
		case <-procs:
			procs = nil
			w.flushMu.Lock()
			w.flushProcs(ctx)
			w.flushMu.Unlock()
		case <-t.C:
			w.flushMu.Lock()
			w.flush(ctx)
			w.flushMu.Unlock()
		}
	}
}

// flush writes what the running attempts printed since the last flush, in
// one transaction per fence. The caller holds flushMu.
func (w *logWriter) flush(ctx context.Context) {
	w.mu.Lock()
	live := make([]*liveLog, 0, len(w.live))
	for l := range w.live {
		live = append(live, l)
	}
	w.mu.Unlock()
	if len(live) == 0 {
		return
	}
	now := w.now()
	byFence := map[*store.Fence]*store.LogWrite{}
	for _, l := range live {
		p := byFence[l.fence]
		if p == nil {
			p = &store.LogWrite{}
			byFence[l.fence] = p
		}
		w.take(l, false, now, p)
	}
	for f, p := range byFence {
		err := f.WriteLogs(ctx, *p)
		if len(p.Chunks)+len(p.Trims) > 0 {
			w.wrote(*p, err)
		}
		if err == nil {
			continue
		}
		unwritten := make(map[string]bool, len(p.Procs))
		for _, r := range p.Procs {
			unwritten[r.Ticket] = true
		}
		for _, l := range live {
			if rec := l.proc.Load(); rec != nil && l.fence == f && unwritten[rec.Ticket] {
				l.procStored = false // written again at the next flush, as its chunks are
			}
		}
		for _, l := range live {
			if l.fence != f {
				continue
			}
			for _, c := range p.Chunks { // written again with the next take
				if l.instance == c.InstanceID && l.attempt == c.Attempt {
					l.retry = append(l.retry, c)
				}
			}
		}
	}
}
