package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"golang.org/x/sys/unix"
)

var logical = time.Date(2026, 3, 1, 2, 0, 0, 0, time.FixedZone("CST", 8*3600))

func attempt(ticket string) Attempt {
	return Attempt{Pipeline: "orders", Task: "clean", InstanceID: 7, Ticket: ticket, LogicalTime: logical, Params: map[string]any{"region": "cn", "n": 3}}
}

func TestFunctions(t *testing.T) {
	t.Parallel()
	f := NewFunctions(func(a Attempt) string { return a.Task })
	var gotTicket string
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.Register("clean", func(_ context.Context, a Attempt) error { gotTicket = a.Ticket; return nil }))
	must(f.Register("bad", func(context.Context, Attempt) error { return errors.New("disk full") }))
	must(f.Register("perm", func(context.Context, Attempt) error { return fmt.Errorf("no such customer: %w", ErrPermanent) }))
	must(f.Register("boom", func(context.Context, Attempt) error { panic("nil map") }))
	must(f.Register("wait", func(ctx context.Context, _ Attempt) error { <-ctx.Done(); return ctx.Err() }))
	if err := f.Register("clean", nil); err == nil || !strings.Contains(err.Error(), `"clean" is registered already`) {
		t.Errorf("duplicate register: %v", err)
	}
	run := func(task string, ctx context.Context, deadline time.Time) Result {
		t.Helper()
		a := attempt("tk-" + task)
		a.Task, a.Deadline = task, deadline
		r, err := f.Execute(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if r.Ticket != a.Ticket {
			t.Errorf("result ticket %q, want %q", r.Ticket, a.Ticket)
		}
		return r
	}
	if r := run("clean", context.Background(), time.Time{}); r.Status != StatusSuccess || gotTicket != "tk-clean" {
		t.Errorf("clean: %+v, ticket seen %q", r, gotTicket)
	}
	if r := run("bad", context.Background(), time.Time{}); r.Status != StatusFailed || r.Error != "disk full" || r.Permanent {
		t.Errorf("bad: %+v", r)
	}
	if r := run("perm", context.Background(), time.Time{}); r.Status != StatusFailed || !r.Permanent {
		t.Errorf("perm: %+v", r)
	}
	if r := run("boom", context.Background(), time.Time{}); r.Status != StatusFailed || !strings.HasPrefix(r.Error, "panic: nil map") {
		t.Errorf("boom: %+v", r)
	}
	if r := run("wait", context.Background(), time.Now().Add(20*time.Millisecond)); r.Status != StatusTimeout {
		t.Errorf("deadline: %+v", r)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrKilled)
	if r := run("wait", ctx, time.Time{}); r.Status != StatusKilled {
		t.Errorf("kill: %+v", r)
	}
	a := attempt("x")
	a.Task = "nope"
	if _, err := f.Execute(context.Background(), a); err == nil || !strings.Contains(err.Error(), `no function "nope" is registered (registered: [bad boom clean perm wait])`) {
		t.Errorf("unknown function: %v", err)
	}
}

func commands(argv ...string) *Commands {
	spec := CommandSpec{Argv: argv}
	for _, arg := range argv {
		var tm *template.Template
		if strings.Contains(arg, "{{") {
			tm = template.Must(template.New("").Option("missingkey=error").Parse(arg))
		}
		spec.Templates = append(spec.Templates, tm)
	}
	return NewCommands(func(Attempt) (CommandSpec, error) { return spec, nil })
}

func TestCommandTemplatesAndEnv(t *testing.T) {
	t.Parallel()
	c := commands("sh", "-c", `echo "{{ .Task }} {{ .LogicalTime }} {{ .Params.region }} $AX_TICKET $AX_PARAM_REGION $AX_PARAM_N $AX_INSTANCE"`)
	r, err := c.Execute(context.Background(), attempt("tk-1"))
	if err != nil {
		t.Fatal(err)
	}
	want := "clean 2026-03-01T02:00:00+08:00 cn tk-1 cn 3 7\n"
	if r.Status != StatusSuccess || string(r.Output) != want {
		t.Errorf("result %+v, output %q, want %q", r, r.Output, want)
	}
}

func TestCommandFailures(t *testing.T) {
	t.Parallel()
	r, _ := commands("sh", "-c", "echo working; echo 'no rows for date' >&2; exit 3").Execute(context.Background(), attempt("t"))
	if r.Status != StatusFailed || r.Error != "exit status 3: no rows for date" || r.Permanent {
		t.Errorf("exit 3: %+v", r)
	}
	r, _ = commands("/no/such/program").Execute(context.Background(), attempt("t"))
	if r.Status != StatusFailed || !r.Permanent || !strings.Contains(r.Error, "start /no/such/program") {
		t.Errorf("missing program: %+v", r)
	}
	r, _ = commands("echo", "{{ .Params.missing }}").Execute(context.Background(), attempt("t"))
	if r.Status != StatusFailed || !r.Permanent || !strings.Contains(r.Error, `command argument 1 "{{ .Params.missing }}"`) {
		t.Errorf("bad template data: %+v", r)
	}
	big, _ := commands("sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x; echo END").Execute(context.Background(), attempt("t"))
	// 200,000 x and END on one line: its last records are kept, up to 64 KiB
	// with their headers, and the rest is counted as dropped.
	if len(big.Output) > 64<<10 || len(big.Output) < 32<<10 || !strings.HasSuffix(string(big.Output), "xEND\n") {
		t.Errorf("output kept %d bytes ending %q, want at most the last 64 KiB", len(big.Output), big.Output[max(0, len(big.Output)-8):])
	}
	if kept := int64(len(big.Output) - 1); kept+big.LogDropped != 200003 {
		t.Errorf("kept %d + dropped %d bytes, want 200003 in all", kept, big.LogDropped)
	}
}

// startTree runs a command that starts a background child, writes the
// child's pid to a FIFO and waits; it returns the pid once the tree runs,
// and a channel with the result.
func startTree(t *testing.T, c *Commands, fifo string, ctx context.Context, a Attempt) (int, <-chan Result) {
	t.Helper()
	res := make(chan Result, 1)
	go func() {
		r, err := c.Execute(ctx, a)
		if err != nil {
			t.Error(err)
		}
		res <- r
	}()
	f, err := os.Open(fifo) // blocks until the command opens it for writing
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	return pid, res
}

// gone waits for the kernel to finish a killed process: it is gone when
// /proc has no entry for it or shows it as a zombie. Bounded to 5 s.
func gone(pid int) bool {
	for range 500 {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		if f := strings.Fields(string(stat)); len(f) > 2 && f[2] == "Z" {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func TestKillLeavesNoChildBehind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script string
		kill   bool // kill, or let the deadline pass
	}{
		{"kill", "sleep 300 & echo $! > %s; wait", true},
		{"deadline", "sleep 300 & echo $! > %s; wait", false},
		{"ignores SIGTERM", "trap '' TERM; sleep 300 & echo $! > %s; wait", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fifo := filepath.Join(t.TempDir(), "pid")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			c := commands("sh", "-c", fmt.Sprintf(tc.script, fifo))
			c.Grace = 200 * time.Millisecond
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			a := attempt("tk")
			if !tc.kill {
				a.Deadline = time.Now().Add(300 * time.Millisecond)
			}
			child, res := startTree(t, c, fifo, ctx, a)
			if tc.kill {
				cancel(ErrKilled)
			}
			r := <-res
			want := StatusKilled
			if !tc.kill {
				want = StatusTimeout
			}
			if r.Status != want {
				t.Errorf("status %s (%s), want %s", r.Status, r.Error, want)
			}
			if !gone(child) {
				t.Errorf("child %d of the command is still running", child)
				_ = syscall.Kill(child, syscall.SIGKILL)
			}
		})
	}
}

// TestCommandNice: with Nice n a command runs n above the process's nice
// value (at most 19), started from threads of its own: the process's own
// nice value does not change, and the threads live on, so that a command
// (killed by Pdeathsig when the thread that forked it ends) outlives its
// start. Without Nice it runs at the process's own.
func TestCommandNice(t *testing.T) {
	t.Parallel()
	own, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := 20 - own
	niceOf := func(nice int) string {
		t.Helper()
		c := commands("sh", "-c", "sleep 0.2; cut -d' ' -f19 /proc/$$/stat")
		c.Nice = nice
		r, err := c.Execute(context.Background(), attempt("t"))
		if err != nil || r.Status != StatusSuccess {
			t.Fatalf("nice %d: %+v %v", nice, r, err)
		}
		return strings.TrimSpace(string(r.Output))
	}
	for _, c := range []struct{ nice, want int }{{0, base}, {5, min(19, base+5)}, {19, 19}, {5, min(19, base+5)}} {
		if got := niceOf(c.nice); got != strconv.Itoa(c.want) {
			t.Errorf("Nice %d: the command ran at nice %s, want %d", c.nice, got, c.want)
		}
	}
	if now, _ := unix.Getpriority(unix.PRIO_PROCESS, 0); now != own {
		t.Errorf("the process's nice value changed: %d, was %d", 20-now, base)
	}
}
