package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Process is where a command attempt runs: the host, its boot and PID
// namespace, and the process group the command leads. A scheduler that
// takes over a command attempt its predecessor started can tell
// from it, on the same host, whether that attempt's processes still run:
// the group id alone could name another group after the old one ended and
// its number was reused, so the leader's start time goes with it.
type Process struct {
	Host  string // os.Hostname
	Boot  string // /proc/sys/kernel/random/boot_id: a reboot ends every group
	PidNS string // readlink /proc/self/ns/pid: pids mean something only in their namespace
	Pgid  int    // the process group, led by the command's process (Server: the scheduler's pid)
	Start uint64 // the leader's start time, in clock ticks since boot (/proc/PID/stat field 22)
	// Server: Pgid names one process, the scheduler that handed the attempt
	// out (Self), not a group. An in-process attempt lives as long as that
	// process, and a command it started is killed with it (Pdeathsig).
	Server bool
}

// GroupState is what a check of a recorded process group found.
type GroupState int

// States of a recorded process group, as seen from this process.
const (
	// GroupElsewhere: recorded on another host, boot or PID namespace (or
	// not recorded at all): nothing here can tell.
	GroupElsewhere GroupState = iota
	// GroupGone: no process of the group runs any more.
	GroupGone
	// GroupAlive: some process of the group still runs.
	GroupAlive
)

func (s GroupState) String() string {
	return [...]string{"elsewhere", "gone", "alive"}[s]
}

// Where returns the host, boot id and PID namespace of this process, read
// once. A field that cannot be read is empty, and a Process with an empty
// field is never judged from here (GroupElsewhere).
var Where = sync.OnceValue(func() Process {
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return Process{Host: host, Boot: string(bytes.TrimSpace(boot)), PidNS: ns}
})

// ProcessOf returns the Process of the group that pid leads (a process
// started with Setpgid).
func ProcessOf(pid int) (Process, error) {
	start, err := startTime(pid)
	if err != nil {
		return Process{}, err
	}
	p := Where()
	p.Pgid, p.Start = pid, start
	return p, nil
}

// Self returns the Process of this scheduler process (Server set), read
// once: recorded with each local attempt it hands out, so that a primary
// taking over on the same host can tell at once that it is gone. Fields
// that cannot be read stay empty, and such a record is never judged.
var Self = sync.OnceValue(func() Process {
	p := Where()
	p.Pgid, p.Server = os.Getpid(), true
	if start, err := startTime(p.Pgid); err == nil {
		p.Start = start
	} else {
		p.Boot = "" // cannot be checked later
	}
	return p
})

// startTime reads a process's start time (field 22 of /proc/PID/stat, clock
// ticks since boot). The command name (field 2) may hold spaces and
// parentheses, so the fields are counted after its last ')'.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStartTime(b)
}

func parseStartTime(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("runner: /proc stat: no ')' after the command name")
	}
	// After ") ": field 3 (state) is the first; field 22 is the 20th.
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("runner: /proc stat: %d fields after the command name, want at least 20", len(f))
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("runner: /proc stat: start time %q: %w", f[19], err)
	}
	return v, nil
}

// Local reports whether p was recorded where this process runs (same host,
// boot and PID namespace), so that its group can be checked from here.
func (p Process) Local() bool {
	w := Where()
	return p.Pgid > 0 && p.Boot != "" && p.PidNS != "" && p.Host == w.Host && p.Boot == w.Boot && p.PidNS == w.PidNS
}

// CheckGroups says, for each of ps, whether its process group still runs,
// reading /proc once for all of them. A group is gone when no process of it
// is left but zombies (an exited leader whose parent died may stay a zombie
// under an init that does not reap), or when a process with the leader's
// pid runs with another start time: Linux does not hand out a pid while a
// group of that number exists, so a new process of that pid means the
// recorded group ended. A group whose leader exited while its children run
// on is alive.
func CheckGroups(ps []Process) []GroupState {
	out := make([]GroupState, len(ps))
	var members map[int]int // pgid → processes of it that are not zombies
	for i, p := range ps {
		if !p.Local() {
			continue // GroupElsewhere
		}
		if p.Server {
			out[i] = serverState(p)
			continue
		}
		if err := syscall.Kill(-p.Pgid, 0); errors.Is(err, syscall.ESRCH) {
			out[i] = GroupGone
			continue
		}
		start, err := startTime(p.Pgid)
		switch {
		case err == nil && start != p.Start:
			out[i] = GroupGone // the number was reused: the group recorded ended
			continue
		case err != nil && !errors.Is(err, os.ErrNotExist):
			continue // cannot read /proc: cannot tell
		}
		if members == nil {
			if members, err = groupMembers(); err != nil {
				return out // cannot read /proc: every one undecided
			}
		}
		out[i] = GroupGone
		if members[p.Pgid] > 0 {
			out[i] = GroupAlive
		}
	}
	return out
}

// serverState says whether the scheduler process p records still runs: gone
// when no process has its pid, or one with another start time (the pid was
// reused), or it is a zombie (it exited).
func serverState(p Process) GroupState {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pgid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return GroupGone
	}
	if err != nil {
		return GroupElsewhere // cannot read /proc: cannot tell
	}
	start, err := parseStartTime(b)
	if err != nil {
		return GroupElsewhere
	}
	if state, _, _, ok := statGroup(b); start != p.Start || ok && (state == "Z" || state == "X") {
		return GroupGone
	}
	return GroupAlive
}

// groupMembers counts the processes of each process group, zombies left
// out unless their parent is not init: a zombie whose parent has not
// collected it was started by a process that is alive but stalled (a
// primary under SIGSTOP holding the result of a command that ended), so its
// outcome is known and the group must not be judged gone; when its parent
// dies, it passes to init.
func groupMembers() (map[int]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int]int{}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		state, ppid, pgid, ok := statGroup(b)
		if ok && (state != "Z" && state != "X" || state == "Z" && ppid != 1) {
			out[pgid]++
		}
	}
	return out, nil
}

// statGroup reads the state (field 3), parent (field 4) and process group
// (field 5) of a /proc/PID/stat line.
func statGroup(stat []byte) (state string, ppid, pgid int, ok bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", 0, 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 {
		return "", 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	return f[0], ppid, pgid, err1 == nil && err2 == nil
}

// Kill sends SIGKILL to p's process group if it is still the group
// recorded (CheckGroups says alive), and reports whether it did. A
// scheduler process (Server) is never killed.
func (p Process) Kill() bool {
	if p.Server || CheckGroups([]Process{p})[0] != GroupAlive {
		return false
	}
	return syscall.Kill(-p.Pgid, syscall.SIGKILL) == nil
}

// String is "pgid N on HOST", or "pid N on HOST" for a scheduler process.
func (p Process) String() string {
	if p.Server {
		return fmt.Sprintf("pid %d on %s", p.Pgid, p.Host)
	}
	return fmt.Sprintf("pgid %d on %s", p.Pgid, p.Host)
}

type startedKey struct{}

// WithStarted returns ctx carrying fn: an executor that starts a process
// group for the attempt (Commands) calls it once, with where the group
// runs, as soon as it started, so that the scheduler can record it.
func WithStarted(ctx context.Context, fn func(Process)) context.Context {
	return context.WithValue(ctx, startedKey{}, fn)
}

// started calls the function WithStarted put on ctx, if any.
func started(ctx context.Context, pid int) {
	fn, _ := ctx.Value(startedKey{}).(func(Process))
	if fn == nil {
		return
	}
	if p, err := ProcessOf(pid); err == nil {
		fn(p)
	}
}
