package runner

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/template"
	"time"

	"github.com/ax-sched/ax/defs"
	"golang.org/x/sys/unix"
)

// CommandSpec is the argv of a command task, with the parsed template of each
// argument that has one (nil for literal arguments), as defs parses them.
type CommandSpec struct {
	Argv      []string
	Templates []*template.Template
	// Schedule fires the task (for .LogicalTime.Prev and .Next); nil when
	// none does.
	Schedule *defs.Schedule
	// Dir is the task's working_dir as written ("": BaseDir), DirTemplate
	// its parsed template when it has one; a relative one is taken from
	// BaseDir, the directory of the pipeline's file. "" everywhere runs the
	// command in the scheduler's own directory.
	Dir         string
	DirTemplate *template.Template
	BaseDir     string
}

// Commands runs command tasks, each in a process group of its own so that a
// kill or a deadline stops the whole tree: SIGTERM to the group, then
// SIGKILL after Grace. When the command ends, whatever it left running in
// its group is killed too: a task leaves no process behind.
type Commands struct {
	spec func(Attempt) (CommandSpec, error)
	// Grace is how long a command may take to exit after SIGTERM. Zero means 5 s.
	Grace time.Duration
	// MaxOutput bounds the output kept when the attempt's context carries no
	// Output (see WithOutput); the tail is kept. Zero means 64 KiB.
	MaxOutput int
	// Nice raises the nice value of every command by this much (at most
	// to 19): under contention the commands yield the CPU to the scheduler
	// and to every other process (see spawner). Zero starts them at the
	// scheduler's own.
	Nice int
}

var _ Executor = (*Commands)(nil)

// NewCommands returns an executor for commands; spec gives an attempt's argv.
func NewCommands(spec func(Attempt) (CommandSpec, error)) *Commands {
	return &Commands{spec: spec}
}

// start starts cmd, from a thread of lowered priority when c.Nice asks,
// through the fork gate (see forkGate).
func (c *Commands) start(cmd *exec.Cmd) error {
	forks.enter()
	defer forks.leave()
	if c.Nice <= 0 {
		return cmd.Start()
	}
	return spawnStart(cmd, c.Nice)
}

// Execute renders the argv, runs it under the attempt's deadline and ctx, and
// returns its outcome with the tail of its combined output, and the outputs
// it wrote to the file named by $AX_OUTPUT when it succeeded.
func (c *Commands) Execute(ctx context.Context, a Attempt) (Result, error) {
	spec, err := c.spec(a)
	if err != nil {
		return Result{}, err
	}
	argv, err := render(spec, a)
	if err != nil {
		return Result{Ticket: a.Ticket, Status: StatusFailed, Error: err.Error(), Permanent: true}, nil
	}
	dir, err := workingDir(spec, a)
	if err != nil {
		return Result{Ticket: a.Ticket, Status: StatusFailed, Error: err.Error(), Executor: Local()}, nil
	}
	if err := envTooLong(a); err != nil {
		return Result{Ticket: a.Ticket, Status: StatusFailed, Error: err.Error(), Permanent: true, Executor: Local()}, nil
	}
	outFile, err := newOutputFile()
	if err != nil {
		return Result{Ticket: a.Ticket, Status: StatusFailed, Error: err.Error(), Executor: Local()}, nil
	}
	r := c.run(ctx, a, argv, dir, outFile)
	outs, err := readOutputFile(outFile)
	return withOutputs(r, outs, err), nil
}

// run runs argv in dir for a, with $AX_OUTPUT naming outFile.
func (c *Commands) run(ctx context.Context, a Attempt, argv []string, dir, outFile string) Result {
	if !a.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, a.Deadline)
		defer cancel()
	}
	grace := c.Grace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	out := OutputFrom(ctx)
	own := out == nil
	if own {
		out = NewOutput(cmp.Or(c.MaxOutput, 64<<10))
	}
	// The last line of stderr (or of stdout when stderr is empty) goes into the error.
	errTail, outTail := &tail{max: 4 << 10}, &tail{max: 4 << 10}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(inherited(os.Environ()), taskEnv(a)...), append(env(a), "AX_OUTPUT="+outFile)...)
	cmd.Dir = dir
	// Two writers into one Output: lines keep their stream and the order in
	// which they arrived.
	cmd.Stdout, cmd.Stderr = io.MultiWriter(out.Writer(StreamStdout), outTail), io.MultiWriter(out.Writer(StreamStderr), errTail)
	// Own process group, so a kill reaches the whole tree; and killed with the
	// scheduler if it dies (kill -9), so that no orphan keeps working unseen.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = grace
	start := time.Now()
	if err := c.start(cmd); err != nil {
		return Result{Ticket: a.Ticket, Status: StatusFailed, Error: fmt.Sprintf("start %s: %v", argv[0], err), Permanent: true, Duration: time.Since(start), Argv: argv}
	}
	pgid := cmd.Process.Pid
	started(ctx, pgid) // where its group runs, for a scheduler that may inherit it
	exitSeen, endedBeforeExit := watchExit(ctx, pgid)
	done := make(chan struct{})
	go stopOnEnd(ctx, pgid, grace, done)
	err := cmd.Wait()
	close(done)
	<-exitSeen
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // whatever the task left behind in its group
	err = exitStatus(cmd, err)
	judge := ctx
	if !endedBeforeExit.Load() {
		judge = context.WithoutCancel(ctx) // it exited by itself before its deadline or a kill
	}
	var code *int
	if err == nil {
		code = new(int)
	} else {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Exited() {
			code = ptrInt(ee.ExitCode())
			err = fmt.Errorf("exit status %d%s", ee.ExitCode(), cmp.Or(lastLine(errTail.Bytes()), lastLine(outTail.Bytes())))
		}
	}
	r := finish(judge, a, start, err)
	r.ExitCode, r.Executor, r.Argv = code, Local(), argv
	if own {
		data, _, dropped := out.Take(true)
		r.Log, r.LogDropped, r.Output = bytes.Clone(data), dropped, Plain(data)
	}
	return r
}

// watchExit ends, once the command of group pgid exits, what it left
// behind in its group at once, so that a child holding the output pipe
// cannot keep the attempt waiting for the copier (WaitDelay) past the
// exit, or into its deadline; and notes whether the attempt's context had
// ended by then: exited before it did, the exit status is the outcome.
// The channel closes when the exit was seen.
func watchExit(ctx context.Context, pgid int) (<-chan struct{}, *atomic.Bool) {
	var endedBeforeExit atomic.Bool
	exitSeen := make(chan struct{})
	go func() {
		defer close(exitSeen)
		if !awaitExit(pgid) {
			endedBeforeExit.Store(true) // exit not seen: judged by ctx after the wait, as before
			return
		}
		endedBeforeExit.Store(ctx.Err() != nil)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}()
	return exitSeen, &endedBeforeExit
}

// stopOnEnd stops group pgid when ctx ends before done closes: SIGTERM,
// then SIGKILL after grace.
func stopOnEnd(ctx context.Context, pgid int, grace time.Duration, done <-chan struct{}) {
	select {
	case <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}

// outputFilePrefix starts the name of every $AX_OUTPUT file, followed by
// the pid of the process that made it and a dash.
const outputFilePrefix = "ax-output-"

// sweepOnce removes, the first time a process makes a $AX_OUTPUT file,
// those left behind by processes that ended without removing theirs.
var sweepOnce sync.Once

// newOutputFile creates the empty file a command's $AX_OUTPUT names, for
// it alone to read and write. Its name holds this process's pid, so that
// a later process can tell it was abandoned (see sweepOutputFiles).
func newOutputFile() (string, error) {
	sweepOnce.Do(func() { sweepOutputFiles(os.TempDir(), pidAlive) })
	f, err := os.CreateTemp("", fmt.Sprintf("%s%d-*", outputFilePrefix, os.Getpid()))
	if err != nil {
		return "", fmt.Errorf("outputs: cannot create the file of $AX_OUTPUT in %s: %v", os.TempDir(), pathless(err))
	}
	name := f.Name()
	if err := f.Close(); err != nil {
		os.Remove(name)
		return "", fmt.Errorf("outputs: cannot create the file of $AX_OUTPUT: %v", pathless(err))
	}
	return name, nil
}

// sweepOutputFiles removes the $AX_OUTPUT files of dir whose process is
// no longer alive: those of attempts abandoned when their scheduler was
// killed. A file of a live process, or not named by newOutputFile, is left.
func sweepOutputFiles(dir string, alive func(pid int) bool) {
	names, _ := filepath.Glob(filepath.Join(dir, outputFilePrefix+"*-*"))
	for _, name := range names {
		pid, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(name), outputFilePrefix), "-")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil || n <= 0 || n == os.Getpid() || alive(n) {
			continue
		}
		_ = os.Remove(name)
	}
}

// pidAlive reports whether process pid may still exist.
func pidAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func ptrInt(v int) *int { return &v }

// awaitExit reports, once process pid has exited, that it saw the exit
// (without reaping it: cmd.Wait still collects its status, and when Wait
// reaped it first, ECHILD says the same); false when pid cannot be waited
// for here, so that nothing is ended on a guess.
func awaitExit(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err == nil || err == unix.ECHILD
		}
	}
}

// exitStatus makes the command's exit status its outcome: when the process
// exited 0 but its output copier gave up waiting (exec.ErrWaitDelay: a
// child it left behind held the pipe, or the copier was starved under
// load), the attempt succeeded; only the tail of its output may be short.
func exitStatus(cmd *exec.Cmd, err error) error {
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success() {
		return nil
	}
	return err
}

// render expands the templates of spec for a.
func render(spec CommandSpec, a Attempt) ([]string, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("runner: empty command")
	}
	data := templateData(a, spec.Schedule)
	argv := make([]string, len(spec.Argv))
	for i, arg := range spec.Argv {
		if i >= len(spec.Templates) || spec.Templates[i] == nil {
			argv[i] = arg
			continue
		}
		var b strings.Builder
		if err := spec.Templates[i].Execute(&b, data); err != nil {
			return nil, fmt.Errorf("runner: command argument %d %q: %v", i, arg, upstreamMissing(err))
		}
		argv[i] = b.String()
	}
	return argv, nil
}

// workingDir renders the working directory of spec for a and checks that
// it is a directory: an error names its path.
func workingDir(spec CommandSpec, a Attempt) (string, error) {
	dir := spec.Dir
	if spec.DirTemplate != nil {
		var b strings.Builder
		if err := spec.DirTemplate.Execute(&b, templateData(a, spec.Schedule)); err != nil {
			return "", fmt.Errorf("working_dir %q: %v", spec.Dir, upstreamMissing(err))
		}
		dir = b.String()
	}
	switch {
	case dir == "":
		dir = spec.BaseDir
	case !filepath.IsAbs(dir) && spec.BaseDir != "":
		dir = filepath.Join(spec.BaseDir, dir)
	}
	if dir == "" {
		return "", nil
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("working directory %s does not exist: create it, or fix the task's working_dir", dir)
	case err != nil:
		return "", fmt.Errorf("working directory %s cannot be used: %v", dir, pathless(err))
	case !fi.IsDir():
		return "", fmt.Errorf("working directory %s is not a directory: fix the task's working_dir", dir)
	}
	return dir, nil
}

// taskEnv is the attempt's own env (Attempt.Env) as variables, sorted.
// maxEnvString is the most bytes one NAME=value of a command's
// environment may hold, its NUL included (Linux's MAX_ARG_STRLEN).
const maxEnvString = 32 * 4096

// envTooLong refuses an env variable of a too long for a command's
// environment, naming it (the system's own error names none).
func envTooLong(a Attempt) error {
	for _, k := range slices.Sorted(maps.Keys(a.Env)) {
		if n := len(k) + 1 + len(a.Env[k]); n >= maxEnvString {
			return fmt.Errorf("env %s: %d bytes with its name, over the %d bytes a variable of a command's environment may hold: give the task the path of a file instead", k, n, maxEnvString-1)
		}
	}
	return nil
}

func taskEnv(a Attempt) []string {
	out := make([]string, 0, len(a.Env))
	for k, v := range a.Env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// inheritedNames are the variables of the server's environment a command
// starts with, besides every LC_* (see inherited).
var inheritedNames = []string{"PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL"}

// inherited keeps of environ (the server's environment) only what a command
// needs to find programs, files and its locale: inheritedNames and LC_*. The
// server's credentials (AX_ADMIN_TOKEN, AX_EXECUTOR_TOKEN, a database
// password, a cloud key) and every other AX_* variable stay with the server;
// the attempt's own AX_* variables come from env.
func inherited(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "LC_") || slices.Contains(inheritedNames, k) {
			out = append(out, kv)
		}
	}
	return out
}

// env returns the attempt as environment variables: AX_TASK, AX_PIPELINE,
// AX_TICKET, AX_INSTANCE, AX_LOGICAL_TIME, AX_DEADLINE, defs.ParamEnvName of each
// scalar param, and TRACEPARENT when traced.
func env(a Attempt) []string {
	out := []string{
		"AX_TASK=" + a.Task, "AX_PIPELINE=" + a.Pipeline, "AX_TICKET=" + a.Ticket,
		fmt.Sprintf("AX_INSTANCE=%d", a.InstanceID), "AX_LOGICAL_TIME=" + a.LogicalTime.Format(time.RFC3339),
	}
	if !a.Deadline.IsZero() {
		out = append(out, "AX_DEADLINE="+a.Deadline.UTC().Format(time.RFC3339))
	}
	if a.TraceParent != "" {
		out = append(out, "TRACEPARENT="+a.TraceParent) // the W3C name OpenTelemetry SDKs read
	}
	keys := make([]string, 0, len(a.Params))
	for k := range a.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch v := a.Params[k].(type) {
		case string, int, int64, float64, bool:
			out = append(out, fmt.Sprintf("%s=%v", defs.ParamEnvName(k), v))
		}
	}
	return out
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.buf)
}

// lastLine returns ": <last non-empty line of out>", or "".
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return ": " + l
	}
	return ""
}
