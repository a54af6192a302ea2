package runner

import (
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// A spawner starts commands from threads of their own whose nice value is
// raised by a fixed amount (Commands.Nice): a child inherits the nice value
// of the thread that forks it. Niced commands yield the CPU under
// contention to the scheduler and to every other process of the host, and
// run as fast as before on an idle machine. (In the 10,000-command burst it
// did not by itself keep the API under its target; see docs/performance.md.)
//
// The threads live as long as the process, one set per nice value, shared
// by every Commands: a command started with Pdeathsig is killed when the
// thread that forked it ends, not only when the process does.
type spawner struct {
	reqs chan spawnReq // nil: no thread could lower itself; start as is
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// spawnThreads is how many threads fork commands: a fork holds its thread
// only until the child has called exec (vfork), well under a millisecond.
const spawnThreads = 4

var (
	spawnMu  sync.Mutex
	spawners = map[int]*spawner{}
)

// spawnStart starts cmd from a thread whose nice value is the process's
// own plus nice (cmd.Start there). The threads are made on first use.
func spawnStart(cmd *exec.Cmd, nice int) error {
	spawnMu.Lock()
	s := spawners[nice]
	if s == nil {
		s = newSpawner(nice)
		spawners[nice] = s
	}
	spawnMu.Unlock()
	if s.reqs == nil {
		return cmd.Start() // the nice value could not be set here
	}
	r := spawnReq{cmd: cmd, done: make(chan error, 1)}
	s.reqs <- r
	return <-r.done
}

func newSpawner(nice int) *spawner {
	reqs := make(chan spawnReq)
	ok := make(chan bool, spawnThreads)
	for range spawnThreads {
		go func() {
			runtime.LockOSThread() // for good: the thread ends with the process
			if lowerThread(nice) != nil {
				ok <- false
				return
			}
			ok <- true
			for r := range reqs {
				r.done <- r.cmd.Start()
			}
		}()
	}
	up := 0
	for range spawnThreads {
		if <-ok {
			up++
		}
	}
	if up == 0 {
		return &spawner{}
	}
	return &spawner{reqs: reqs}
}

// lowerThread raises the calling thread's nice value by n (at most to 19).
func lowerThread(n int) error {
	tid := unix.Gettid()
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		return err
	}
	// The system call returns 20 - nice (1 … 40), as glibc documents.
	return unix.Setpriority(unix.PRIO_PROCESS, tid, min(19, 20-prio+n))
}

// A forkGate bounds the commands being started at once to one fewer than
// the Go processors (GOMAXPROCS, read at each start; at least one). Go forks
// with vfork, and the forking goroutine keeps its processor until the child
// has called exec: when the host's CPUs are busy (a burst of commands) the
// child may wait many milliseconds for a CPU to get there, and with every
// processor held that way nothing else of the scheduler runs, not its lease
// renewal, not the API. One processor left free keeps them running; the
// starts wait here instead.
type forkGate struct {
	mu      sync.Mutex
	cond    sync.Cond
	running int
	waiting int
	limit   func() int // how many may fork at once
}

// forks is the gate every command start goes through.
var forks = newForkGate(func() int { return max(1, runtime.GOMAXPROCS(0)-1) })

func newForkGate(limit func() int) *forkGate {
	g := &forkGate{limit: limit}
	g.cond.L = &g.mu
	return g
}

// enter waits for a free place and takes it.
func (g *forkGate) enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting++
	for g.running >= g.limit() {
		g.cond.Wait()
	}
	g.waiting--
	g.running++
}

// leave gives a place back.
func (g *forkGate) leave() {
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
	g.cond.Signal()
}

// counts is how many are forking and how many wait, for tests.
func (g *forkGate) counts() (running, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running, g.waiting
}
