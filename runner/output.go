package runner

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Stream says where a line of task output came from.
type Stream uint8

// Streams of task output. The values are stored: never renumber them.
const (
	StreamStdout Stream = 1 // a command's standard output
	StreamStderr Stream = 2 // a command's standard error
	StreamLog    Stream = 3 // a Go function's logger (Logger(ctx)), in-process or in an SDK executor
	StreamAx     Stream = 4 // a note from ax itself about the attempt (not the task's own output)
)

// String names the stream as the API and `ax logs` show it.
func (s Stream) String() string {
	switch s {
	case StreamStdout:
		return "stdout"
	case StreamStderr:
		return "stderr"
	case StreamLog:
		return "log"
	case StreamAx:
		return "ax"
	}
	return "stream" + strconv.Itoa(int(s))
}

// DefaultLogMax is the output kept per attempt when none is configured: the
// last 1 MiB.
const DefaultLogMax = 1 << 20

// Output captures the output of one attempt as lines marked by their stream,
// in the order they arrive, keeping at most Max bytes (the tail): older lines
// are dropped and counted. Its writers never block on storage and never hold
// more than Max bytes however much the task prints; whoever stores the
// output takes what arrived with [Output.Take], typically every second, so
// that a crash loses at most the last second. It is safe for concurrent use.
//
// The encoding Take returns is a sequence of records, each a header byte
// (the stream, with 0x80 set when the line goes on in the next record), a
// 4-byte big-endian length and the line's bytes without its newline; decode
// it with [DecodeLines].
type Output struct {
	mu      sync.Mutex
	max     int
	rec     int    // longest record's text: longer lines are split
	ring    []byte // encoded records, circular once grown to max (linear before)
	head    int    // offset of the oldest record
	used    int
	text    int64 // text bytes in the ring
	partial [5][]byte
	dropped int64 // text bytes written but never taken (over the limit)
	written int64 // text bytes written in all
	out     []byte
	secrets [][]byte // values replaced by *** in every line (see Mask)
}

// recHeader is the size of a record's header.
const recHeader = 5

// NewOutput returns an Output that keeps at most limit bytes; limit <= 0 means
// DefaultLogMax. Below 4 KiB it is raised to 4 KiB.
func NewOutput(limit int) *Output {
	if limit <= 0 {
		limit = DefaultLogMax
	}
	limit = max(limit, 4<<10)
	// The ring grows as output comes (an attempt that prints nothing costs
	// no buffer): allocating the limit up front cost a megabyte per attempt.
	return &Output{max: limit, rec: min(64<<10, limit/4)}
}

// Max returns the limit in bytes.
func (o *Output) Max() int { return o.max }

// Writer returns a writer whose bytes are lines of stream s.
func (o *Output) Writer(s Stream) io.Writer { return streamWriter{o, s} }

type streamWriter struct {
	o *Output
	s Stream
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.o.write(w.s, p)
	return len(p), nil
}

// Note adds a line from ax itself (stream ax).
func (o *Output) Note(format string, args ...any) {
	o.write(StreamAx, []byte(fmt.Sprintf(format, args...)+"\n"))
}

func (o *Output) write(s Stream, p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.written += int64(len(p))
	for len(p) > 0 {
		i := indexByte(p, '\n')
		if i < 0 {
			part := o.partial[s]
			if len(part)+len(p) < o.rec {
				o.partial[s] = append(part, p...)
				return
			}
			n := o.rec - len(part)
			o.partial[s] = append(part, p[:n]...)
			o.putPartial(s, true)
			p = p[n:]
			continue
		}
		if len(o.partial[s]) > 0 {
			if len(o.partial[s])+i <= o.rec {
				o.partial[s] = append(o.partial[s], p[:i]...)
				o.putPartial(s, false)
				p = p[i+1:]
				continue
			}
			o.putPartial(s, true)
		}
		line := p[:i]
		for len(line) > o.rec {
			o.put(s, true, line[:o.rec])
			line = line[o.rec:]
		}
		o.put(s, false, line)
		p = p[i+1:]
	}
}

func indexByte(p []byte, c byte) int {
	for i, b := range p {
		if b == c {
			return i
		}
	}
	return -1
}

// putPartial writes the buffered part of a line of s as a record.
func (o *Output) putPartial(s Stream, cont bool) {
	o.put(s, cont, o.partial[s])
	o.partial[s] = o.partial[s][:0]
}

// Masked is what replaces a secret's value in output and error texts.
const Masked = "***"

// Mask makes o replace each of values with *** in every line written from
// now on and in what MaskString returns: the secrets an attempt was given
// never reach the store, `ax logs` or the API in its output or its error.
// A value is masked within a line (and within a record, for a line longer
// than a record), and each line of a value of several lines on its own;
// empty values are ignored.
func (o *Output) Mask(values ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, v := range values {
		if v != "" {
			o.secrets = append(o.secrets, []byte(v))
		}
		// Output is masked a line at a time: a secret of several lines is
		// masked line by line too (its empty lines are not secrets).
		if strings.Contains(v, "\n") {
			for _, line := range strings.Split(v, "\n") {
				if line = strings.TrimSuffix(line, "\r"); line != "" {
					o.secrets = append(o.secrets, []byte(line))
				}
			}
		}
	}
	// The longest first, so that a secret holding another is masked whole.
	slices.SortFunc(o.secrets, func(a, b []byte) int { return len(b) - len(a) })
}

// MaskString returns s with the values given to Mask replaced by ***: an
// attempt's error text before it is stored, logged or shown.
func (o *Output) MaskString(s string) string {
	if o == nil {
		return s
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.mask([]byte(s)))
}

// mask replaces the secrets in p; the caller holds mu.
func (o *Output) mask(p []byte) []byte {
	for _, v := range o.secrets {
		if bytes.Contains(p, v) {
			p = bytes.ReplaceAll(p, v, []byte(Masked))
		}
	}
	return p
}

// put appends one record, dropping the oldest ones to make room.
func (o *Output) put(s Stream, cont bool, text []byte) {
	text = o.mask(text)
	need := recHeader + len(text)
	for o.used+need > o.max {
		o.dropOldest()
	}
	var h [recHeader]byte
	h[0] = byte(s)
	if cont {
		h[0] |= 0x80
	}
	binary.BigEndian.PutUint32(h[1:], uint32(len(text)))
	o.ringWrite(h[:])
	o.ringWrite(text)
	o.text += int64(len(text))
}

func (o *Output) ringWrite(p []byte) {
	if end := o.head + o.used + len(p); end > len(o.ring) && len(o.ring) < o.max {
		o.grow(end)
	}
	tail := (o.head + o.used) % o.max
	n := copy(o.ring[tail:], p)
	copy(o.ring, p[n:])
	o.used += len(p)
}

// grow enlarges the ring to hold end bytes from its start, doubling, and to
// its whole size max once records must wrap around. Before it reaches max
// the records lie in order from head, so they keep their offsets.
func (o *Output) grow(end int) {
	n := max(2*len(o.ring), end, 4<<10)
	if n > o.max || end > o.max {
		n = o.max
	}
	r := make([]byte, n)
	copy(r, o.ring)
	o.ring = r
}

func (o *Output) dropOldest() {
	var h [recHeader]byte
	for i := range h {
		h[i] = o.ring[(o.head+i)%o.max]
	}
	n := int(binary.BigEndian.Uint32(h[1:]))
	o.head = (o.head + recHeader + n) % o.max
	o.used -= recHeader + n
	o.text -= int64(n)
	o.dropped += int64(n)
}

// Take returns the records written since the last Take (the buffer it
// returns is reused by the next call), the number of text bytes they hold,
// and how many bytes were dropped in all so far because they went over the
// limit before anyone took them. With final, unfinished lines are included.
func (o *Output) Take(final bool) (data []byte, text int64, dropped int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if final {
		for s := range o.partial {
			if len(o.partial[s]) > 0 {
				o.putPartial(Stream(s), false)
			}
		}
	}
	o.out = o.out[:0]
	if o.used > 0 {
		end := o.head + o.used
		if end <= o.max {
			o.out = append(o.out, o.ring[o.head:end]...)
		} else {
			o.out = append(o.out, o.ring[o.head:]...)
			o.out = append(o.out, o.ring[:end-o.max]...)
		}
	}
	text = o.text
	o.head, o.used, o.text = 0, 0, 0
	return o.out, text, o.dropped
}

// Written returns the bytes written in all, kept or not.
func (o *Output) Written() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.written
}

// Line is one decoded line of output.
type Line struct {
	Stream Stream
	Text   []byte // without its newline
	// Cont is set when the line goes on in the next record of its stream
	// (a line longer than a record, or unfinished when it was taken).
	Cont bool
}

// ErrBadLog is returned by DecodeLines for data that is not a log encoding.
var ErrBadLog = errors.New("runner: malformed log records")

// DecodeLines decodes records as Take returns them. The lines' Text points
// into data.
func DecodeLines(data []byte) ([]Line, error) {
	var out []Line
	for len(data) > 0 {
		if len(data) < recHeader {
			return out, fmt.Errorf("%w: %d trailing bytes", ErrBadLog, len(data))
		}
		n := int(binary.BigEndian.Uint32(data[1:recHeader]))
		if n > len(data)-recHeader {
			return out, fmt.Errorf("%w: a record of %d bytes with %d left", ErrBadLog, n, len(data)-recHeader)
		}
		out = append(out, Line{Stream: Stream(data[0] &^ 0x80), Cont: data[0]&0x80 != 0, Text: data[recHeader : recHeader+n]})
		data = data[recHeader+n:]
	}
	return out, nil
}

// Plain returns the text of records, each finished line with its newline,
// whatever its stream (records that do not decode are left out).
func Plain(data []byte) []byte {
	lines, _ := DecodeLines(data)
	var out []byte
	for _, l := range lines {
		out = append(out, l.Text...)
		if !l.Cont {
			out = append(out, '\n')
		}
	}
	return out
}

// EncodeLines is the inverse of DecodeLines, for output that arrives whole
// (an HTTP executor's plain output).
func EncodeLines(dst []byte, s Stream, text []byte) []byte {
	for len(text) > 0 {
		i := indexByte(text, '\n')
		line := text
		if i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		var h [recHeader]byte
		h[0] = byte(s)
		binary.BigEndian.PutUint32(h[1:], uint32(len(line)))
		dst = append(append(dst, h[:]...), line...)
	}
	return dst
}

// Escape renders output bytes as safe text: valid UTF-8 is kept, tabs too;
// other control characters and bytes that are not UTF-8 are written as \xNN,
// and a backslash as \\ so that the escaping is unambiguous. Binary output
// can then never break a terminal, JSON or a web page.
func Escape(b []byte) string { return escape(b, true) }

// SafeError renders the error text of a result (an excerpt of a task's
// output, an executor's message) safe in the same way, keeping backslashes
// as they are so that quoted Go errors read as written: an error is shown
// in tables, history, alerts and the console, never re-parsed.
func SafeError(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c >= 0x7f {
			return escape([]byte(s), false)
		}
	}
	return s // plain ASCII: nothing to do (the common case)
}

func escape(b []byte, backslash bool) string {
	var sb strings.Builder
	sb.Grow(len(b))
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&sb, `\x%02x`, b[0])
		case r == '\\' && backslash:
			sb.WriteString(`\\`)
		case r == '\t':
			sb.WriteByte('\t')
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			for _, c := range b[:n] {
				fmt.Fprintf(&sb, `\x%02x`, c)
			}
		default:
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	return sb.String()
}

type outputKey struct{}

// WithOutput returns ctx carrying out: executors write the attempt's output
// there, and Logger(ctx) writes into it.
func WithOutput(ctx context.Context, out *Output) context.Context {
	return context.WithValue(ctx, outputKey{}, out)
}

// OutputFrom returns the Output on ctx, or nil.
func OutputFrom(ctx context.Context) *Output {
	o, _ := ctx.Value(outputKey{}).(*Output)
	return o
}

// Logger returns the logger a task function writes its output to: its lines
// are kept as the attempt's log (stream log), in the scheduler's store, and
// shown by `ax logs`. Without an Output on ctx it discards.
func Logger(ctx context.Context) *slog.Logger {
	o := OutputFrom(ctx)
	if o == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(o.Writer(StreamLog), &slog.HandlerOptions{Level: slog.LevelDebug}))
}
