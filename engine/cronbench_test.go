package engine

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/robfig/cron/v3"

	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/wheel"
)

// Row 7 of make bench: scheduling many cron tasks for a simulated hour with
// ax's scheduling core against robfig/cron's runner and go-co-op/gocron v2,
// the same expressions for all, in heap bytes per task and CPU time per
// simulated hour. The peers run on real timers, so each runs inside a
// synctest bubble, where an hour passes as fast as the work allows.
//
// It is a test, not a benchmark, because synctest needs a *testing.T; it
// runs under AX_BENCH=1 (make bench sets it) and prints benchmark lines.

// cronSpecs are the expressions, task i taking cronSpecs[i%4]: 5 fires per
// task in the hour on average.
var cronSpecs = []string{"*/5 * * * *", "*/10 * * * *", "*/15 * * * *", "*/30 * * * *"}

// simulated is the hour, less the last second, so that no fire falls on the
// instant the measurement stops.
const simulated = time.Hour - time.Second

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

type cronResult struct {
	bytesPerTask float64
	cpu          time.Duration
	fires        int64
}

func (r cronResult) line(name string) string {
	return fmt.Sprintf("BenchmarkCronScheduling/%s\t1\t%.1f B/task\t%.1f cpu-ms/h\t%d fires", name, r.bytesPerTask, float64(r.cpu.Microseconds())/1000, r.fires)
}

// axCron is ax's scheduling core for cron tasks, as the engine runs it: each
// task's parsed schedule and its next fire (computed once per fire, see
// trigger.setUntil); every 30 s a top-up puts the fires of the next five
// minutes into the one-second wheel; each second the wheel hands out what
// is due. (The engine also writes a run per fire to its store; that cost is
// rows 2 and 3.)
func axCron(t *testing.T, n int) cronResult {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	before := heapNow()
	scheds := make([]*defs.Schedule, n)
	next := make([]int64, n)
	for i := range n {
		s, err := defs.ParseSchedule(cronSpecs[i%len(cronSpecs)], time.UTC, start)
		if err != nil {
			t.Fatal(err)
		}
		scheds[i], next[i] = s, s.Next(start).UnixMilli()
	}
	w := wheel.New(start, 5*time.Minute)
	topUp := func(now time.Time) {
		horizon := now.Add(5 * time.Minute).UnixMilli()
		for i := range next {
			for next[i] <= horizon {
				w.Add(wheel.Entry{ID: int64(i), At: next[i]})
				next[i] = scheds[i].Next(time.UnixMilli(next[i])).UnixMilli()
			}
		}
	}
	topUp(start)
	after := heapNow()
	var fires int64
	cpu0 := cpuTime()
	for s := time.Second; s <= simulated; s += time.Second {
		now := start.Add(s)
		if s%(30*time.Second) == 0 {
			topUp(now)
		}
		w.Advance(now, func(wheel.Entry) { fires++ })
	}
	res := cronResult{bytesPerTask: float64(after-before) / float64(n), cpu: cpuTime() - cpu0, fires: fires}
	runtime.KeepAlive(scheds)
	return res
}

// peerHour measures a peer scheduler for a simulated hour inside a synctest
// bubble: start adds n jobs that call fire, starts the scheduler, and
// returns how to stop it.
func peerHour(t *testing.T, n int, start func(t *testing.T, fire func()) (stop func())) cronResult {
	var res cronResult
	synctest.Test(t, func(t *testing.T) {
		var fires atomic.Int64
		before := heapNow()
		stop := start(t, func() { fires.Add(1) })
		synctest.Wait()
		res.bytesPerTask = float64(heapNow()-before) / float64(n)
		cpu0 := cpuTime()
		time.Sleep(simulated)
		synctest.Wait()
		res.cpu, res.fires = cpuTime()-cpu0, fires.Load()
		stop()
	})
	return res
}

// robfigCron is robfig/cron v3's own runner with n entries.
func robfigCron(t *testing.T, n int) cronResult {
	return peerHour(t, n, func(t *testing.T, fire func()) func() {
		c := cron.New()
		for i := range n {
			if _, err := c.AddFunc(cronSpecs[i%len(cronSpecs)], fire); err != nil {
				t.Fatal(err)
			}
		}
		c.Start()
		return func() { <-c.Stop().Done() }
	})
}

// goCron is go-co-op/gocron v2 with n cron jobs.
func goCron(t *testing.T, n int) cronResult {
	return peerHour(t, n, func(t *testing.T, fire func()) func() {
		s, err := gocron.NewScheduler()
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if _, err := s.NewJob(gocron.CronJob(cronSpecs[i%len(cronSpecs)], false), gocron.NewTask(fire)); err != nil {
				t.Fatal(err)
			}
		}
		s.Start()
		return func() {
			if err := s.Shutdown(); err != nil {
				t.Error(err)
			}
		}
	})
}

func TestCronSchedulingVersusPeers(t *testing.T) {
	if os.Getenv("AX_BENCH") == "" {
		t.Skip("a measurement for make bench (row 7): set AX_BENCH=1 to run it")
	}
	// The same expressions give the same fires in the hour: 5 per task.
	for _, c := range []struct {
		name string
		n    int
		run  func(*testing.T, int) cronResult
	}{
		{"ax_100k", 100_000, axCron},
		{"robfig_100k", 100_000, robfigCron},
		{"ax_10k", 10_000, axCron},
		{"gocron_10k", 10_000, goCron},
	} {
		r := c.run(t, c.n)
		if want := int64(c.n) * 5; r.fires != want {
			t.Errorf("%s: %d fires in the hour, want %d: the schedulers did not do the same work", c.name, r.fires, want)
		}
		fmt.Println(r.line(c.name))
	}
}
