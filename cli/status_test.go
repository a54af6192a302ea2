package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
)

// An operator's run deferred to a time to come is listed (the schedule's
// runs created ahead are not): a pipeline with one is not "no runs yet".
func TestWriteRunsListsDeferredRuns(t *testing.T) {
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	runs := []api.RunView{
		{Run: axtype.Run{ID: 7, Kind: axtype.RunManual, LogicalTime: at, CreatedAt: at.Add(-2 * time.Hour)}, State: "waiting"},
		{Run: axtype.Run{ID: 6, Kind: axtype.RunSchedule, LogicalTime: at, CreatedAt: at.Add(-2 * time.Hour)}, State: "waiting"},
	}
	var b strings.Builder
	WriteRuns(&b, runs, nil, 10, time.UTC)
	got := b.String()
	want := "  run 7      manual   " + api.Stamp(at, time.UTC) + "  deferred: fires then\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// ax run refuses a pipeline with disabled: true, with the reason and the
// flag that runs it anyway.
func TestRunSpecRefusesADisabledPipeline(t *testing.T) {
	p, errs := defs.Parse("off.yaml", []byte("pipeline: off\ndisabled: true\ntasks:\n  - {name: a, command: [\"true\"]}\n"), defs.Options{})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	g, errs := dag.Compile([]*defs.Pipeline{p}, dag.Options{External: true, DispatchRate: -1})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	_, _, err := runSpec(g, "off", "", "", false, false)
	const want = "pipeline off is disabled (disabled: true in off.yaml): set it to false, or remove it, and reload; or give --ignore-disabled to run it once anyway"
	if err == nil || err.Error() != want {
		t.Errorf("ax run of a disabled pipeline: %v, want %q", err, want)
	}
	if spec, _, err := runSpec(g, "off", "", "", false, true); err != nil || len(spec.Tasks) != 1 {
		t.Errorf("with --ignore-disabled: %+v %v, want the run", spec, err)
	}
}
