package engine

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// Tasks removed from the files while the server was down end as a live
// reload ends them: their instances that had not started (here b waiting
// for its 10-minute delay, c waiting on b, r retrying) fail with the
// reason, so their runs end. Before, the restarted server left them
// SCHEDULED, WAITING and RETRYING for ever.
func TestRemovedWhileDownEndsAsAReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const full = "pipeline: p\ntimezone: UTC\ndefaults: {function: record}\ntasks:\n  - {name: a}\n  - {name: b, depends_on: [a], delay: 10m}\n  - {name: c, depends_on: [b]}\n  - {name: r, retry: {count: 3, interval: 10m}}\n"
		const without = "pipeline: p\ntimezone: UTC\ndefaults: {function: record}\ntasks:\n  - {name: a}\n"
		fns := map[string]func(context.Context, runner.Attempt) error{
			"p.r": func(context.Context, runner.Attempt) error { return errors.New("r failed") },
		}
		e := setup(t, Config{}, fns, full)
		if _, err := e.do(Trigger{Target: "p"}, By{Actor: "operator:ann"}); err != nil {
			t.Fatal(err)
		}
		sleep(5 * time.Second)
		got := map[string]axtype.State{}
		for _, in := range e.instances(store.InstanceFilter{Pipeline: "p"}) {
			got[in.TaskID] = in.State
		}
		if got["p.a"] != axtype.Success || got["p.b"] != axtype.Scheduled || got["p.c"] != axtype.Waiting || got["p.r"] != axtype.Retrying {
			t.Fatalf("before the restart: %v; want a SUCCESS, b SCHEDULED, c WAITING, r RETRYING", got)
		}
		e.stop()
		_, stop := e.restartWithout(without)
		sleep(30 * time.Second)
		stop()
		const why = "not run: its task was removed from the pipeline files"
		for _, in := range e.instances(store.InstanceFilter{Pipeline: "p"}) {
			if in.TaskID == "p.a" {
				continue
			}
			if in.State != axtype.Failed || len(in.Error) < len(why) || in.Error[:len(why)] != why {
				t.Errorf("%s after a restart without it: %s %q; want FAILED %q…", in.TaskID, in.State, in.Error, why)
			}
		}
	})
}
