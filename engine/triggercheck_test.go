package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

const (
	offPipeline = "pipeline: off\ntimezone: UTC\ndisabled: true\nschedule: \"@every 1s\"\ntasks:\n  - {name: a, function: record}\n"
	onPipeline  = "pipeline: off\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: a, function: record}\n"
	// tick fires beside it, so that a second passes with fires to see.
	tickPipeline = "pipeline: tick\ntimezone: UTC\ntasks:\n  - name: a\n    function: record\n    cron: \"@every 1s\"\n    disabled: true\n  - {name: b, function: record, cron: \"@every 1s\"}\n"
)

// A disabled pipeline, or task cron, never fires; a trigger of it is
// refused with the reason, creating nothing; a reload without
// `disabled` makes it fire.
func TestDisabledNeverFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, offPipeline, tickPipeline)
		sleep(3 * time.Second)
		if got := e.instances(store.InstanceFilter{TaskID: "tick.b"}); len(got) < 2 {
			t.Fatalf("tick.b ran %d times in 3s", len(got))
		}
		for _, task := range []string{"off.a", "tick.a"} {
			if got := e.instances(store.InstanceFilter{TaskID: task}); len(got) != 0 {
				t.Errorf("%s is disabled and has %d instances", task, len(got))
			}
		}
		for target, want := range map[string]string{
			"off":    "pipeline off is disabled (disabled: true in p0.yaml): set it to false, or remove it, and reload",
			"off.a":  "pipeline off is disabled",
			"tick.a": "task tick.a is disabled (disabled: true in p1.yaml, line 4)",
		} {
			if _, err := e.do(Trigger{Target: target}); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("trigger %s: %v, want %q", target, err, want)
			}
		}
		if got := e.instances(store.InstanceFilter{TaskID: "off.a"}); len(got) != 0 {
			t.Errorf("refused triggers created %d instances", len(got))
		}
		if _, err := e.eng.Reload(compile(t, onPipeline, tickPipeline)); err != nil {
			t.Fatal(err)
		}
		sleep(3 * time.Second)
		if got := e.instances(store.InstanceFilter{TaskID: "off.a"}); len(got) < 2 {
			t.Errorf("off.a after the reload without disabled: %d instances", len(got))
		}
		e.stop()
	})
}

// A trigger's params are checked against the pipeline's typed params and
// the names the run's tasks declare; a typed value reaches the task typed.
func TestTriggerParamsTyped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []string
		fns := map[string]func(context.Context, runner.Attempt) error{
			"p.a": func(_ context.Context, a runner.Attempt) error {
				seen = append(seen, fmt.Sprintf("%T %v %T %v", a.Params["full"], a.Params["full"], a.Params["n"], a.Params["n"]))
				return nil
			},
		}
		src := "pipeline: p\ntimezone: UTC\nparams:\n  full: {type: bool, default: false}\n  n: {type: int, default: 1}\n  region: {type: enum, values: [cn, us], default: cn}\ntasks:\n  - {name: a, function: record, params: {own: x}}\n  - {name: b, depends_on: [a], function: record}\n"
		e := setup(t, Config{}, fns, src)
		for params, want := range map[string]string{
			"full=maybe": `param "full" is a bool: give true or false, not "maybe"`,
			"region=jp":  `param "region" is one of cn, us: "jp" is not`,
			"n=1.5":      `param "n" is an int: "1.5" is not a whole number`,
			"regio=cn":   `param "regio": no task run declares it (did you mean "region"?)`,
		} {
			k, v, _ := strings.Cut(params, "=")
			_, err := e.do(Trigger{Target: "p", Params: map[string]string{k: v}})
			if err == nil || !errors.Is(err, ErrBadOp) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want %q", params, err, want)
			}
		}
		if runs, _ := e.st.Runs(context.Background(), "p", 10); len(runs) != 0 {
			t.Fatalf("refused triggers stored %d runs", len(runs))
		}
		if _, err := e.do(Trigger{Target: "p.b", Params: map[string]string{"own": "y"}}); err == nil || !strings.Contains(err.Error(), `param "own": no task run declares it`) {
			t.Errorf("a param of a task outside the run: %v", err)
		}
		if _, err := e.do(Trigger{Target: "p.a", Params: map[string]string{"full": "true", "n": "7", "own": "y"}}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Second)
		e.stop()
		if fmt.Sprint(seen) != "[bool true int64 7]" {
			t.Errorf("the task saw %v", seen)
		}
	})
}

// A backfill's params reach every run it starts, typed; a param the
// selection does not declare, or of the wrong type, is refused when the
// backfill is planned.
func TestBackfillParams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []string
		fns := map[string]func(context.Context, runner.Attempt) error{
			"p.a": func(_ context.Context, a runner.Attempt) error {
				seen = append(seen, fmt.Sprintf("%v %v", a.Params["n"], a.Params["region"]))
				return nil
			},
		}
		src := "pipeline: p\ntimezone: UTC\nschedule: \"@daily\"\nparams:\n  n: {type: int, default: 1}\ntasks:\n  - {name: a, function: record, params: {region: cn}}\n"
		e := setup(t, Config{}, fns, src)
		from, to := days(time.Now(), 2)
		for params, want := range map[string]string{
			"n=x":      `param "n" is an int: "x" is not a whole number`,
			"reigon=x": `param "reigon": no task run declares it (did you mean "region"?)`,
		} {
			k, v, _ := strings.Cut(params, "=")
			if _, err := PlanBackfill(e.eng.sched.g, BackfillParams{Pipeline: "p", From: from, To: to, Params: map[string]string{k: v}}); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want %q", params, err, want)
			}
		}
		e.startBackfill(BackfillParams{Pipeline: "p", From: from, To: to, MaxActiveRuns: 2, Params: map[string]string{"n": "7", "region": "us"}})
		sleep(5 * time.Second)
		e.stop()
		if fmt.Sprint(seen) != "[7 us 7 us]" {
			t.Errorf("the backfill's runs saw %v", seen)
		}
	})
}

// A reload that only flips `disabled:` of a pipeline without a schedule
// is a change: triggers are refused, then accepted, by the new value.
func TestReloadFlipsDisabledWithoutSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const manual = "pipeline: man\ntimezone: UTC\ntasks:\n  - {name: a, function: record}\n"
		off := strings.Replace(manual, "timezone: UTC\n", "timezone: UTC\ndisabled: true\n", 1)
		e := setup(t, Config{}, nil, manual)
		d, err := e.eng.Reload(compile(t, off))
		if err != nil || d.String() != "pipeline settings changed man" {
			t.Fatalf("diff %q %v, want the pipeline's settings changed", d.String(), err)
		}
		sleep(time.Second)
		if _, err := e.do(Trigger{Target: "man"}); err == nil || !strings.Contains(err.Error(), "pipeline man is disabled") {
			t.Errorf("trigger after disabling: %v, want refused", err)
		}
		if got := e.instances(store.InstanceFilter{TaskID: "man.a"}); len(got) != 0 {
			t.Errorf("a refused trigger created %d instances", len(got))
		}
		if d, err = e.eng.Reload(compile(t, manual)); err != nil || len(d.Settings) != 1 {
			t.Fatalf("diff %+v %v", d, err)
		}
		sleep(time.Second)
		if _, err := e.do(Trigger{Target: "man"}); err != nil {
			t.Errorf("trigger after enabling again: %v", err)
		}
		e.stop()
	})
}

// An operator's run deferred (--in) before its pipeline was disabled is
// not started when it comes due: it ends FAILED with the reason, and an
// action records it.
func TestDeferredRunOfADisabledPipelineIsNotStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const manual = "pipeline: man\ntimezone: UTC\ntasks:\n  - {name: a, function: record}\n"
		off := strings.Replace(manual, "timezone: UTC\n", "timezone: UTC\ndisabled: true\n", 1)
		e := setup(t, Config{}, nil, manual)
		if _, err := e.do(Trigger{Target: "man", In: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.eng.Reload(compile(t, off)); err != nil {
			t.Fatal(err)
		}
		sleep(2 * time.Minute)
		e.stop()
		if got := fires(e.rec.snapshot(), "man.a", time.Time{}); len(got) != 0 {
			t.Errorf("man.a ran %d times after its pipeline was disabled", len(got))
		}
		insts := e.instances(store.InstanceFilter{TaskID: "man.a"})
		const want = "not run: pipeline man is disabled (disabled: true in p0.yaml)"
		if len(insts) != 1 || insts[0].State != axtype.Failed || !strings.HasPrefix(insts[0].Error, want) {
			t.Fatalf("instances %+v, want one FAILED with %q", insts, want)
		}
		if acts := e.actions("disabled_skip"); len(acts) != 1 || !strings.HasPrefix(acts[0].Reason, want) {
			t.Errorf("actions %+v", acts)
		}
	})
}
