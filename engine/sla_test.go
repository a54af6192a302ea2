package engine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
)

// alertSink collects the alerts an engine hands to Config.OnAlert.
type alertSink struct {
	mu     sync.Mutex
	alerts []Alert
}

func (s *alertSink) add(a Alert) { s.mu.Lock(); s.alerts = append(s.alerts, a); s.mu.Unlock() }

func (s *alertSink) of(kind string) []Alert {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Alert
	for _, a := range s.alerts {
		if a.Kind == kind {
			out = append(out, a)
		}
	}
	return out
}

// TestSLAMissed: an instance that has not succeeded `sla` after its logical
// time raises sla_missed once, naming it, its logical time in the pipeline's
// zone and its state; instances that succeed in time raise nothing.
func TestSLAMissed(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var sink alertSink
		slow := map[string]func(context.Context, runner.Attempt) error{
			"s.b": func(ctx context.Context, a runner.Attempt) error {
				if a.LogicalTime.Sub(start) == 10*time.Second { // the first run's b is slow
					time.Sleep(50 * time.Second)
				}
				return nil
			},
		}
		e := setup(t, Config{OnAlert: sink.add, SLACheck: time.Second}, slow, `pipeline: s
timezone: Asia/Tokyo
schedule: "@every 10s"
group: etl
overlap: allow
defaults: {function: record, sla: 30s, timeout: 2m}
tasks:
  - {name: a}
  - {name: b, depends_on: [a]}
`)
		sleep(45 * time.Second) // b@10s is still running at +40s, its deadline
		got := sink.of(AlertSLAMissed)
		if len(got) != 1 {
			t.Fatalf("sla_missed alerts at +45s: %+v, want one (s.b@10s)", got)
		}
		a := got[0]
		want := "s.b has not succeeded 30s after its logical time " + start.Add(10*time.Second).In(mustZone(t, "Asia/Tokyo")).Format(time.RFC3339) + ": it is RUNNING"
		if a.Task != "s.b" || a.Pipeline != "s" || a.Group != "etl" || a.Message != want || a.Instance == 0 {
			t.Errorf("alert = %+v\nwant message %q, group etl", a, want)
		}
		if !strings.Contains(a.Message, "+09:00") {
			t.Errorf("the logical time is not in the pipeline's zone with its offset: %q", a.Message)
		}
		sleep(60 * time.Second) // b@10s succeeds at +60s; later runs succeed in time
		e.stop()
		if n := len(sink.of(AlertSLAMissed)); n != 1 {
			t.Errorf("sla_missed alerts at the end: %d, want still 1 (once per instance)", n)
		}
		if acts := e.actions(AlertSLAMissed); len(acts) != 1 || acts[0].InstanceID != a.Instance {
			t.Errorf("sla_missed actions: %+v", acts)
		}
		// A restart does not raise it again for the same instance.
		var again alertSink
		e.restart(Config{OnAlert: again.add, SLACheck: time.Second}, 5*time.Second)
		if n := len(again.of(AlertSLAMissed)); n != 0 {
			t.Errorf("after a restart: %d sla_missed alert(s) again", n)
		}
	})
}

// TestLeaderChangeOnlyOnChange: the first scheduler on a store raises no
// leader_change; another process taking the lease does, naming the one
// before; the same holder taking it back does not.
func TestLeaderChangeOnlyOnChange(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var first alertSink
		e := setup(t, Config{OnAlert: first.add}, nil, reloadP)
		sleep(2 * time.Second)
		e.stop()
		if n := len(first.of(AlertLeaderChange)); n != 0 {
			t.Errorf("first start: %d leader_change alert(s)", n)
		}
		var second alertSink
		e.restart(Config{OnAlert: second.add}, 2*time.Second) // holder test-2
		got := second.of(AlertLeaderChange)
		if len(got) != 1 || !strings.Contains(got[0].Message, "test-2 became the primary scheduler at epoch 2, taking over from test") {
			t.Errorf("another holder: %+v", got)
		}
		var third alertSink
		e.restart(Config{OnAlert: third.add}, 2*time.Second) // test-2 again
		if n := len(third.of(AlertLeaderChange)); n != 0 {
			t.Errorf("the same holder again: %d leader_change alert(s)", n)
		}
		if acts := e.actions(AlertLeaderChange); len(acts) != 1 {
			t.Errorf("leader_change actions: %d, want 1", len(acts))
		}
	})
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var _ = axtype.Success

// An instance that succeeds after its SLA deadline but before the next
// check still missed its SLA: it raises sla_missed, saying how late it
// succeeded. Each instance was judged by its state at the check, so one
// that succeeded between its deadline and the check (up to SLACheck, 5 s
// by default) raised nothing.
func TestSLAMissedBySuccessBetweenChecks(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var sink alertSink
		fns := map[string]func(context.Context, runner.Attempt) error{
			"l.a": func(ctx context.Context, a runner.Attempt) error {
				time.Sleep(3 * time.Second) // succeeds 3 s after its logical time: 1 s late
				return nil
			},
		}
		e := setup(t, Config{OnAlert: sink.add, SLACheck: 5 * time.Second}, fns, `pipeline: l
timezone: UTC
schedule: "0 0 1 6 *"
defaults: {function: record, sla: 2s}
tasks:
  - {name: a}
`)
		sleep(6 * time.Second) // the checks at +5s: nothing due yet
		if _, err := e.do(Trigger{Target: "l.a"}); err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		sleep(12 * time.Second) // from +6s: deadline at +8s, success at +9s, checks at +10s and +15s
		e.stop()
		got := sink.of(AlertSLAMissed)
		want := "l.a succeeded 3s after its logical time " + at.UTC().Format(time.RFC3339) + ", later than its sla of 2s"
		if len(got) != 1 || got[0].Message != want {
			t.Errorf("sla_missed alerts: %+v\nwant one saying %q", got, want)
		}
	})
}
