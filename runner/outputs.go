package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/ax-sched/ax/defs"
)

// MaxOutputs caps an attempt's outputs to its downstream: the bytes of
// every key and value together.
const MaxOutputs = 64 << 10

// CheckOutputs checks an attempt's outputs: each key a name (letters,
// digits, _; not starting with a digit), each value UTF-8 text without a
// NUL byte, all of them within MaxOutputs. The error names the first key
// at fault and says what to do.
func CheckOutputs(outs map[string]string) error {
	size := 0
	keys := make([]string, 0, len(outs))
	for k := range outs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := checkOutput(k, outs[k]); err != nil {
			return err
		}
		size += len(k) + len(outs[k])
	}
	if size > MaxOutputs {
		return outputsTooLarge(size)
	}
	return nil
}

func checkOutput(k, v string) error {
	if !defs.ValidOutputKey(k) {
		return fmt.Errorf("outputs: key %q is not a name: use letters, digits and _ (not starting with a digit), as {{ .Upstream.TASK.KEY }} reads it", k)
	}
	if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("outputs: the value of %s is not text (it holds a NUL byte or bytes that are not UTF-8): give text, e.g. base64 of binary data", k)
	}
	return nil
}

func outputsTooLarge(size int) error {
	return fmt.Errorf("outputs: %d bytes, over the cap of %d bytes (64 KiB): give the downstream a path or a key to the data, not the data", size, MaxOutputs)
}

// ParseOutputFile reads what a command wrote to $AX_OUTPUT: one JSON object
// of strings (numbers and booleans are taken as written), or key=value
// lines (the value is the rest of the line; blank lines and lines starting
// with # are skipped). Nothing is taken from a file with an error.
func ParseOutputFile(data []byte) (map[string]string, error) {
	if len(data) > MaxOutputs {
		return nil, outputsTooLarge(len(data))
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return nil, errors.New("outputs: the file $AX_OUTPUT is not text (it holds a NUL byte or bytes that are not UTF-8): write key=value lines or one JSON object")
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		return parseOutputJSON(t)
	}
	outs := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("outputs: line %d of $AX_OUTPUT has no '=': write key=value", i+1)
		}
		if err := checkOutput(k, v); err != nil {
			return nil, fmt.Errorf("line %d of $AX_OUTPUT: %w", i+1, err)
		}
		outs[k] = v
	}
	return outs, CheckOutputs(outs)
}

func parseOutputJSON(data []byte) (map[string]string, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil || dec.More() {
		return nil, fmt.Errorf("outputs: $AX_OUTPUT starts with '{' but is not one JSON object (%v): write one object of strings, or key=value lines", err)
	}
	outs := make(map[string]string, len(raw))
	for k, v := range raw {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			outs[k] = s
			continue
		}
		var f any
		if err := json.Unmarshal(v, &f); err != nil {
			return nil, fmt.Errorf("outputs: key %q of $AX_OUTPUT: %v", k, err)
		}
		switch f.(type) {
		case float64, bool:
			outs[k] = string(v)
		default:
			return nil, fmt.Errorf("outputs: the value of %q in $AX_OUTPUT is a %s: give a string, a number or a boolean (a list or an object as a JSON string)", k, jsonKind(f))
		}
	}
	return outs, CheckOutputs(outs)
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "list"
	default:
		return "object"
	}
}

// readOutputFile reads and removes the file of $AX_OUTPUT; a missing or
// empty one gives no outputs. Only a regular file is read: the task may
// have replaced it with a symbolic link, a named pipe or a device, which
// are refused without being followed or waited on (opened non-blocking,
// never through a link), and the read stops at the cap.
func readOutputFile(path string) (map[string]string, error) {
	defer os.Remove(path)
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outputs: read $AX_OUTPUT: %v", pathless(err))
	}
	if err := regularOutputFile(fi.Mode()); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if errors.Is(err, syscall.ELOOP) {
		return nil, regularOutputFile(os.ModeSymlink)
	}
	if err != nil {
		return nil, fmt.Errorf("outputs: read $AX_OUTPUT: %v", pathless(err))
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("outputs: read $AX_OUTPUT: %v", pathless(err))
	}
	if err := regularOutputFile(fi.Mode()); err != nil {
		return nil, err
	}
	if fi.Size() > MaxOutputs {
		return nil, outputsTooLarge(int(fi.Size()))
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxOutputs+1))
	if err != nil {
		return nil, fmt.Errorf("outputs: read $AX_OUTPUT: %v", pathless(err))
	}
	outs, err := ParseOutputFile(data)
	if len(outs) == 0 {
		outs = nil
	}
	return outs, err
}

// regularOutputFile refuses a $AX_OUTPUT of mode m that is not a regular file.
func regularOutputFile(m os.FileMode) error {
	if m.IsRegular() {
		return nil
	}
	return fmt.Errorf("outputs: $AX_OUTPUT was replaced by %s: write key=value lines into the file it names, never remove or replace it", fileKind(m))
}

// fileKind says what a file of mode m that is not a regular file is.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m.IsDir():
		return "a directory"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	default:
		return "a file that is not a regular file (" + m.Type().String() + ")"
	}
}

// outputSet collects the outputs a function gives through Attempt.Output.
type outputSet struct {
	mu   sync.Mutex
	m    map[string]string
	size int
	err  error // the first refusal: the attempt fails with it
}

// Output gives the attempt's downstream an output: {{ .Upstream.TASK.KEY }}
// in its templates reads value. A key given twice keeps the last value.
// A key that is not a name, a value that is not text, or outputs over
// MaxOutputs are refused: the attempt then fails with that error, even
// when the function ignores it and returns nil.
func (a Attempt) Output(key, value string) error {
	s := a.outputs
	if s == nil {
		return errors.New("runner: this attempt takes no outputs (it was not started by an executor of ax)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := checkOutput(key, value)
	if err == nil {
		size := s.size + len(key) + len(value)
		if old, ok := s.m[key]; ok {
			size -= len(key) + len(old)
		}
		if size > MaxOutputs {
			err = outputsTooLarge(size)
		} else {
			s.m[key], s.size = value, size
		}
	}
	if err != nil && s.err == nil {
		s.err = err
	}
	return err
}

// WithOutputs returns a with a fresh set of outputs for Output to fill, and
// a function that returns them when the attempt is over (nil when none),
// or the first refusal.
func (a Attempt) WithOutputs() (Attempt, func() (map[string]string, error)) {
	s := &outputSet{m: map[string]string{}}
	a.outputs = s
	return a, func() (map[string]string, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.err != nil {
			return nil, s.err
		}
		if len(s.m) == 0 {
			return nil, nil
		}
		return maps.Clone(s.m), nil
	}
}

// withOutputs sets r's outputs from take, once the attempt succeeded: a
// refusal fails it (with nothing kept), and outputs of a failed attempt
// are dropped.
func withOutputs(r Result, outs map[string]string, err error) Result {
	switch {
	case r.Status != StatusSuccess:
	case err != nil:
		r.Status, r.Error, r.Permanent = StatusFailed, err.Error(), false
	default:
		r.Outputs = outs
	}
	return r
}
