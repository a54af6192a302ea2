package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// lines renders decoded records as "stream: text" for comparisons.
func lines(t *testing.T, data []byte) []string {
	t.Helper()
	ls, err := DecodeLines(data)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	var out []string
	for _, l := range ls {
		s := l.Stream.String() + ": " + string(l.Text)
		if l.Cont {
			s += " (cont)"
		}
		out = append(out, s)
	}
	return out
}

func TestOutputBothStreamsInOrder(t *testing.T) {
	t.Parallel()
	out := NewOutput(0)
	ctx := WithOutput(context.Background(), out)
	r, err := commands("sh", "-c", "echo one; echo two >&2; echo three; printf 'no newline' >&2; exit 4").Execute(ctx, attempt("t"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusFailed || r.ExitCode == nil || *r.ExitCode != 4 || r.Executor != Local() {
		t.Fatalf("result %+v, want failed with exit status 4 on %s", r, Local())
	}
	if r.Log != nil {
		t.Errorf("the output went to the context's Output, but the result carries %d bytes of log too", len(r.Log))
	}
	data, text, dropped := out.Take(true)
	// The two pipes are read apart: the order within a stream is kept, and
	// the streams interleave as their lines arrive.
	got := lines(t, data)
	var stdout, stderr []string
	for _, l := range got {
		if strings.HasPrefix(l, "stdout: ") {
			stdout = append(stdout, l)
		} else {
			stderr = append(stderr, l)
		}
	}
	if strings.Join(stdout, "|") != "stdout: one|stdout: three" || strings.Join(stderr, "|") != "stderr: two|stderr: no newline" {
		t.Errorf("lines %q, want one and three on stdout, two and 'no newline' on stderr", got)
	}
	if text != int64(len("onetwothreeno newline")) || dropped != 0 {
		t.Errorf("text %d dropped %d, want 21 and 0", text, dropped)
	}
	// A second take has nothing new.
	if data, _, _ := out.Take(true); len(data) != 0 {
		t.Errorf("second take returned %q", data)
	}
}

func TestOutputPartialLinesAcrossTakes(t *testing.T) {
	t.Parallel()
	out := NewOutput(0)
	w := out.Writer(StreamStdout)
	w.Write([]byte("first line\nhalf "))
	data, _, _ := out.Take(false)
	if got := lines(t, data); len(got) != 1 || got[0] != "stdout: first line" {
		t.Fatalf("first take %q, want only the finished line", got)
	}
	w.Write([]byte("and rest\n"))
	data, _, _ = out.Take(false)
	if got := lines(t, data); len(got) != 1 || got[0] != "stdout: half and rest" {
		t.Fatalf("second take %q, want the line joined", got)
	}
}

func TestOutputKeepsTheTailAndCountsDropped(t *testing.T) {
	t.Parallel()
	out := NewOutput(8 << 10)
	w := out.Writer(StreamStderr)
	line := bytes.Repeat([]byte("y"), 95) // 95 + 5 bytes of header per record
	for i := 0; i < 1000; i++ {
		w.Write(append(line, '\n'))
	}
	w.Write([]byte("last\n"))
	data, text, dropped := out.Take(true)
	if len(data) > 8<<10 {
		t.Errorf("kept %d encoded bytes over the 8 KiB limit", len(data))
	}
	// 8192 bytes hold 81 records of 100 bytes and "last" (9 bytes): 81 lines kept.
	if text != 81*95+4 || dropped != 95*1000-81*95 {
		t.Errorf("kept %d, dropped %d; want %d and %d", text, dropped, 81*95+4, 95*1000-81*95)
	}
	got := lines(t, data)
	if got[len(got)-1] != "stderr: last" {
		t.Errorf("last line %q", got[len(got)-1])
	}
}

// A 50 MiB printer is kept to the limit without the process allocating
// anything like its output: the Output's memory is its limit, allocated once.
func TestOutputFiftyMiBPrinterStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("prints 50 MiB")
	}
	const total = 50 << 20
	out := NewOutput(1 << 20)
	ctx := WithOutput(context.Background(), out)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// 50 MiB in lines of 99 x and a newline.
	r, err := commands("sh", "-c", "head -c 52428800 /dev/zero | tr '\\0' x | fold -w 99").Execute(ctx, attempt("t"))
	runtime.ReadMemStats(&after)
	if err != nil || r.Status != StatusSuccess {
		t.Fatalf("printer: %+v %v", r, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("allocated %d MiB while capturing 50 MiB, want under 8 MiB (the 1 MiB limit and pipe buffers)", alloc>>20)
	}
	if w := out.Written(); w != total+total/99 {
		t.Errorf("written %d, want %d", w, total+total/99)
	}
	data, text, dropped := out.Take(true)
	if len(data) > 1<<20 || len(data) < 1<<20-200 {
		t.Errorf("kept %d encoded bytes, want just under the 1 MiB limit", len(data))
	}
	if text+dropped != total {
		t.Errorf("kept %d + dropped %d = %d text bytes, want %d", text, dropped, text+dropped, total)
	}
}

func TestLoggerWritesTheLogStream(t *testing.T) {
	t.Parallel()
	f := NewFunctions(func(Attempt) string { return "job" })
	if err := f.Register("job", func(ctx context.Context, a Attempt) error {
		Logger(ctx).Info("loaded rows", "rows", 42)
		return errors.New("boom")
	}); err != nil {
		t.Fatal(err)
	}
	out := NewOutput(0)
	r, err := f.Execute(WithOutput(context.Background(), out), attempt("t"))
	if err != nil || r.Status != StatusFailed || r.Executor != Local() {
		t.Fatalf("result %+v %v", r, err)
	}
	data, _, _ := out.Take(true)
	got := lines(t, data)
	if len(got) != 1 || !strings.HasPrefix(got[0], "log: time=") || !strings.Contains(got[0], `msg="loaded rows" rows=42`) {
		t.Errorf("log lines %q", got)
	}
	// Without an Output, Logger discards and never fails.
	Logger(context.Background()).Info("nowhere")
}

func TestEscapeMakesBinarySafe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "héllo\tworld", "héllo\tworld"},
		{"invalid utf8", "ok\xff\xfe", `ok\xff\xfe`},
		{"controls", "a\x1b[31mred\x00", `a\x1b[31mred\x00`},
		{"backslash", `C:\x41`, `C:\\x41`},
		{"c1 control", "\u0085x", `\xc2\x85x`},
	} {
		if got := Escape([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: Escape(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
		if b, _ := json.Marshal(Escape([]byte(tc.in))); !json.Valid(b) {
			t.Errorf("%s: not valid JSON", tc.name)
		}
	}
}

func TestDecodeLinesRejectsGarbage(t *testing.T) {
	t.Parallel()
	good := EncodeLines(nil, StreamStdout, []byte("a\nb\n"))
	if got := lines(t, good); strings.Join(got, "|") != "stdout: a|stdout: b" {
		t.Fatalf("round trip %q", got)
	}
	for _, bad := range [][]byte{{1, 0, 0}, {1, 0, 0, 0, 9, 'x'}} {
		if _, err := DecodeLines(bad); !errors.Is(err, ErrBadLog) {
			t.Errorf("DecodeLines(%v) = %v, want ErrBadLog", bad, err)
		}
	}
}
