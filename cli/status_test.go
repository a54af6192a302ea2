package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
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
