package engine

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

const every10 = `pipeline: c
timezone: UTC
schedule: "@every 10s"
tasks:
  - {name: a, function: record}
`

// TestClaimedAheadStartsOnTime: an instance is recorded RUNNING (claimed,
// with its ticket) up to ClaimAhead before its fire time, and its executor
// is called at the fire time, not before.
func TestClaimedAheadStartsOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, every10)
		sleep(9*time.Second + 500*time.Millisecond)
		ins := e.instances(store.InstanceFilter{TaskID: "c.a", LogicalTo: start.Add(10 * time.Second)})
		if len(ins) != 1 || ins[0].State != axtype.Running || ins[0].Ticket == "" || !ins[0].StartedAt.Equal(start.Add(10*time.Second)) {
			t.Fatalf("half a second before its fire time: %+v, want RUNNING with a ticket, starting at +10s", ins)
		}
		if n := len(e.rec.snapshot()); n != 0 {
			t.Fatalf("%d executions before the fire time", n)
		}
		sleep(time.Second)
		e.stop()
		calls := e.rec.snapshot()
		if len(calls) != 1 || calls[0].at.Sub(start) != 10*time.Second || calls[0].ticket != ins[0].Ticket {
			t.Errorf("executions: %+v, want one at +10s with the claimed ticket", calls)
		}
		var claimedAt time.Time
		for _, h := range e.history("c.a") {
			if h.InstanceID == ins[0].ID && h.To == axtype.Running {
				claimedAt = h.At
			}
		}
		if d := start.Add(10 * time.Second).Sub(claimedAt); d <= 0 || d > time.Second {
			t.Errorf("claimed %s before its fire time, want within (0, 1s]", d)
		}
	})
}

// TestKillBeforeFireTime: killing an attempt claimed ahead means it never
// runs, and the instance ends KILLED.
func TestKillBeforeFireTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, every10)
		sleep(9*time.Second + 500*time.Millisecond)
		msg, err := e.do(Kill{Target: "c.a"}, By{Actor: "operator:kim"})
		if err != nil || !strings.Contains(msg, "kill sent to 1 instance(s)") {
			t.Fatalf("kill: %q %v", msg, err)
		}
		sleep(2 * time.Second)
		e.stop()
		for _, c := range e.rec.snapshot() {
			if c.logical.Equal(start.Add(10 * time.Second)) {
				t.Errorf("the killed attempt ran at +%s", c.at.Sub(start))
			}
		}
		ins := e.instances(store.InstanceFilter{TaskID: "c.a", LogicalTo: start.Add(10 * time.Second)})
		if len(ins) != 1 || ins[0].State != axtype.Killed || !strings.Contains(ins[0].Error, "before its fire time: it never started") {
			t.Errorf("killed instance: %+v", ins)
		}
	})
}

// TestShutdownGivesBackClaimedAttempts: a scheduler that stops between a
// claim and its fire time gives the attempt back (RUNNING → RETRYING at the
// fire time, the attempt not counted); the next scheduler runs it once.
func TestShutdownGivesBackClaimedAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, every10)
		sleep(9*time.Second + 500*time.Millisecond)
		e.stop()
		ins := e.instances(store.InstanceFilter{TaskID: "c.a", LogicalTo: start.Add(10 * time.Second)})
		if len(ins) != 1 || ins[0].State != axtype.Retrying || ins[0].Attempt != 1 || ins[0].Counted != 0 || !ins[0].NextFireAt.Equal(start.Add(10*time.Second)) {
			t.Fatalf("after stopping before the fire time: %+v, want RETRYING at +10s, attempt 1 not counted", ins)
		}
		if n := len(e.rec.snapshot()); n != 0 {
			t.Fatalf("%d executions by the stopped scheduler", n)
		}
		e.restart(Config{}, 5*time.Second)
		got := 0
		for _, c := range e.rec.snapshot() {
			if c.logical.Equal(start.Add(10 * time.Second)) {
				got++
			}
		}
		if got != 1 {
			t.Errorf("the given-back attempt ran %d times after the restart, want once", got)
		}
		if in, _ := e.st.Instance(t.Context(), ins[0].ID); in.State != axtype.Success || in.Attempt != 2 || in.Counted != 1 {
			t.Errorf("after the restart: %s attempt %d counted %d, want SUCCESS at attempt 2, 1 counted", in.State, in.Attempt, in.Counted)
		}
	})
}
