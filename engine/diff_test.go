package engine

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/defs"
)

// TestTaskChanges: each field that differs is named by its path in the
// JSON form, durations read as durations, maps opened key by key, and a
// field one side lacks is "(none)"; equal definitions change nothing.
func TestTaskChanges(t *testing.T) {
	t.Parallel()
	base := func() *defs.Task {
		return &defs.Task{Name: "clean", Pipeline: "shop", Group: "etl", Timeout: time.Minute, Priority: 5,
			Retry:    defs.Retry{Count: 2, Interval: 30 * time.Second},
			Executor: defs.Executor{Kind: defs.ExecutorKind("command"), Command: []string{"echo", "a"}},
			Params:   map[string]any{"day": "mon"}}
	}
	for _, tc := range []struct {
		name string
		edit func(*defs.Task)
		want []Change
	}{
		{"same", func(*defs.Task) {}, nil},
		{"timeout and retry", func(x *defs.Task) { x.Timeout, x.Retry.Interval = 2*time.Minute, time.Minute }, []Change{
			{ID: "shop.clean", Field: "retry.interval", Old: "30s", New: "1m0s"},
			{ID: "shop.clean", Field: "timeout", Old: "1m0s", New: "2m0s"}}},
		{"command", func(x *defs.Task) { x.Executor.Command = []string{"echo", "b"} }, []Change{
			{ID: "shop.clean", Field: "executor.command", Old: `["echo","a"]`, New: `["echo","b"]`}}},
		{"params", func(x *defs.Task) { x.Params = map[string]any{"day": "tue", "region": "cn"} }, []Change{
			{ID: "shop.clean", Field: "params.day", Old: `"mon"`, New: `"tue"`},
			{ID: "shop.clean", Field: "params.region", Old: "(none)", New: `"cn"`}}},
		{"depends_on", func(x *defs.Task) { x.DependsOn = []defs.Dep{{Task: "sync"}, {Pipeline: "up", Task: "x"}} }, []Change{
			{ID: "shop.clean", Field: "depends_on", Old: "(none)", New: "[sync, up.x]"}}},
		{"priority to zero", func(x *defs.Task) { x.Priority = 0 }, []Change{
			{ID: "shop.clean", Field: "priority", Old: "5", New: "0"}}},
	} {
		cur := base()
		tc.edit(cur)
		got := TaskChanges("shop.clean", base(), cur)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: change %d = %+v, want %+v", tc.name, i, got[i], tc.want[i])
			}
		}
	}
	got := ScheduleChanges("shop", ScheduleDef{Schedule: "0 0 * * *", Timezone: "UTC", Misfire: "fire_once"}, ScheduleDef{Schedule: "0 0 * * *", Timezone: "Asia/Shanghai", Misfire: "fire_once"})
	if len(got) != 1 || got[0] != (Change{ID: "shop", Field: "timezone", Old: `"UTC"`, New: `"Asia/Shanghai"`, Schedule: true}) {
		t.Errorf("ScheduleChanges = %+v", got)
	}
}
