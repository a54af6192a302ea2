package engine

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/store"
)

// The bubble starts at midnight UTC: etl fires at 00:01, report at 00:04,
// and the report's run is created at start, inside the five-minute window.
const (
	crossUp = `pipeline: up
timezone: UTC
schedule: "0 1 0 * * *"
defaults: {function: record}
tasks:
  - {name: etl}
`
	crossDown = `pipeline: down
timezone: UTC
schedule: "0 4 0 * * *"
defaults: {function: record}
tasks:
  - {name: report, depends_on: [up.etl]}
  - {name: publish, depends_on: [report], delay: 30s}
`
)

// TestCrossUpstreamDoneEarlyWaitsForTheFireTime: a task whose only upstream
// is in another pipeline that succeeds before the task's own fire time
// starts at its fire time, not when the upstream succeeds; its downstream
// with a delay starts that delay after it.
func TestCrossUpstreamDoneEarlyWaitsForTheFireTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, crossUp, crossDown)
		sleep(6 * time.Minute)
		e.stop()
		if got := fmt.Sprint(e.callsOf("up.etl", start)); got != "[1m0s]" {
			t.Fatalf("up.etl started at %s, want [1m0s]", got)
		}
		if got := fmt.Sprint(e.callsOf("down.report", start)); got != "[4m0s]" {
			t.Errorf("down.report (fires at 00:04, its upstream up.etl succeeded at 00:01) started at %s, want [4m0s]", got)
		}
		if got := fmt.Sprint(e.callsOf("down.publish", start)); got != "[4m30s]" {
			t.Errorf("down.publish (delay 30s behind report) started at %s, want [4m30s]", got)
		}
	})
}

// TestMarkedUpstreamBeforeTheFireTimeKeepsTheDelay: in one pipeline, an
// operator marks a waiting upstream succeeded before the run's fire time;
// its downstream with a delay starts at the fire time plus the delay, not
// the delay after the mark.
func TestMarkedUpstreamBeforeTheFireTimeKeepsTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, `pipeline: p
timezone: UTC
schedule: "0 4 0 * * *"
defaults: {function: record}
tasks:
  - {name: a}
  - {name: b, depends_on: [a]}
  - {name: c, depends_on: [b], delay: 30s}
`)
		sleep(time.Minute)
		if _, err := e.do(Mark{Target: "p.b", At: start.Add(4 * time.Minute), State: "success"}); err != nil {
			t.Fatal(err)
		}
		sleep(5 * time.Minute)
		e.stop()
		if got := fmt.Sprint(e.callsOf("p.c", start)); got != "[4m30s]" {
			t.Errorf("p.c (run fires at 00:04, delay 30s, upstream marked succeeded at 00:01) started at %s, want [4m30s]", got)
		}
		if got := fmt.Sprint(e.callsOf("p.a", start)); got != "[4m0s]" {
			t.Errorf("p.a started at %s, want [4m0s]", got)
		}
	})
}

// TestRerunBeforeTheFireTimeWaitsForIt: a root whose run an operator
// cancelled while it was still ahead, then reran, starts at the run's fire
// time plus its delay, not at the rerun; so does its downstream, marked
// failed and rerun.
func TestRerunBeforeTheFireTimeWaitsForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, `pipeline: p
timezone: UTC
schedule: "0 4 0 * * *"
defaults: {function: record}
tasks:
  - {name: a, delay: 20s}
  - {name: b, depends_on: [a]}
`)
		sleep(time.Minute)
		ins := e.instances(store.InstanceFilter{TaskID: "p.a"})
		if len(ins) != 1 {
			t.Fatalf("p.a has %d instances, want 1", len(ins))
		}
		if _, err := e.do(Cancel{Run: ins[0].RunID}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.do(Rerun{Run: ins[0].RunID}); err != nil {
			t.Fatal(err)
		}
		sleep(5 * time.Minute)
		e.stop()
		if got := fmt.Sprint(e.callsOf("p.a", start)); got != "[4m20s]" {
			t.Errorf("p.a (run fires at 00:04, delay 20s, cancelled and rerun at 00:01) started at %s, want [4m20s]", got)
		}
		if got := fmt.Sprint(e.callsOf("p.b", start)); got != "[4m20s]" {
			t.Errorf("p.b started at %s, want [4m20s]", got)
		}
	})
}

// TestManualRunFiresWhenTriggered: a manual run fires when it is
// triggered, or at its logical time when that is ahead: a trigger --at a
// time to come runs its roots then (plus their delay), and its downstream
// as soon as they succeed (plus theirs).
func TestManualRunFiresWhenTriggered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, `pipeline: m
timezone: UTC
defaults: {function: record}
tasks:
  - {name: a, delay: 10s}
  - {name: b, depends_on: [a], delay: 5s}
`)
		sleep(time.Minute)
		if _, err := e.do(Trigger{Target: "m", At: start.Add(10 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.do(Trigger{Target: "m", At: start.Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
		sleep(15 * time.Minute)
		e.stop()
		if got := fmt.Sprint(e.callsOf("m.a", start)); got != "[1m10s 10m10s]" {
			t.Errorf("m.a (triggered at 00:01 --at -01:00 and --at 00:10, delay 10s) started at %s, want [1m10s 10m10s]", got)
		}
		if got := fmt.Sprint(e.callsOf("m.b", start)); got != "[1m15s 10m15s]" {
			t.Errorf("m.b (delay 5s behind a) started at %s, want [1m15s 10m15s]", got)
		}
	})
}
