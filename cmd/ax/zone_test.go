package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/store"
)

// TestCLITimesInPipelineZone: ax status, explain, history, logs and
// backfill list print a pipeline's times in its zone with the offset, as
// the console does, and in UTC with --utc; through the API and with
// --store alike (the zone read from the synced definition).
func TestCLITimesInPipelineZone(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Pipeline: apitest.GridPipeline}) // Asia/Shanghai
	if code, out := e.Call("POST", "/api/v1/pipelines/shop/trigger", `{"at": "2026-03-01T02:00:00", "params": {"ok": "yes"}}`); code != 200 {
		t.Fatalf("trigger: %d %s", code, out)
	}
	e.WaitState("shop.clean", axtype.Success)
	if code, out := e.Call("POST", "/api/v1/backfills", `{"pipeline": "shop", "from": "2025-01-01", "to": "2025-01-01"}`); code != 201 {
		t.Fatalf("backfill: %d %s", code, out)
	}
	ax := func(args ...string) string {
		t.Helper()
		if !slices.Contains(args, "--store") {
			args = append(args, "--server", e.Srv.URL)
		}
		code, out, errOut := runAx(t, args...)
		if code != cli.ExitOK {
			t.Fatalf("ax %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	for _, c := range []struct {
		args      []string
		want, not []string
	}{
		{[]string{"status"}, []string{"2026-03-01T02:00:00+08:00"}, []string{"2026-02-28T18:00:00Z"}},
		{[]string{"status", "--utc"}, []string{"2026-02-28T18:00:00Z"}, []string{"+08:00"}},
		{[]string{"explain", "shop.clean"}, []string{"logical time 2026-03-01T02:00:00+08:00", "2027-01-01T00:00:00+08:00", " +08:00 → "}, []string{"2026-02-28T18:00:00Z"}},
		{[]string{"explain", "shop.clean", "--utc"}, []string{"logical time 2026-02-28T18:00:00Z", "2026-12-31T16:00:00Z"}, []string{"+08:00"}},
		{[]string{"history", "shop.clean"}, []string{" +08:00"}, []string{" +00:00"}},
		{[]string{"history", "shop.clean", "--utc"}, []string{" +00:00"}, []string{" +08:00"}},
		{[]string{"status", "--store", e.Path}, []string{"2026-03-01T02:00:00+08:00"}, []string{"2026-02-28T18:00:00Z"}},
		{[]string{"status", "--store", e.Path, "--utc"}, []string{"2026-02-28T18:00:00Z"}, []string{"+08:00"}},
		{[]string{"history", "shop.clean", "--store", e.Path}, []string{" +08:00"}, []string{" +00:00"}},
		{[]string{"history", "shop.clean", "--store", e.Path, "--utc"}, []string{" +00:00"}, []string{" +08:00"}},
		{[]string{"logs", "shop.clean", "--run", runOf(t, e.St, "shop.clean", "2026-02-28T18:00:00Z")}, []string{"== started 20", "+08:00, "}, []string{"Z, "}},
		{[]string{"logs", "shop.clean", "--run", runOf(t, e.St, "shop.clean", "2026-02-28T18:00:00Z"), "--utc"}, []string{"== started 20", "Z, "}, []string{"+08:00"}},
		{[]string{"backfill", "list"}, []string{"+08:00\n"}, []string{"Z\n"}},
		{[]string{"backfill", "list", "--utc"}, []string{"Z\n"}, []string{"+08:00"}},
		{[]string{"backfill", "list", "--store", e.Path}, []string{"+08:00\n"}, []string{"Z\n"}},
	} {
		out := ax(c.args...)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("ax %s: no %q in\n%s", strings.Join(c.args, " "), w, out)
			}
		}
		for _, n := range c.not {
			if strings.Contains(out, n) {
				t.Errorf("ax %s: %q in\n%s", strings.Join(c.args, " "), n, out)
			}
		}
	}
}

// runOf returns the id of the run of task at the logical time at (RFC 3339).
func runOf(t *testing.T, st *store.Store, task, at string) string {
	t.Helper()
	want, err := time.Parse(time.RFC3339, at)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := st.Instances(context.Background(), store.InstanceFilter{TaskID: task, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if in.LogicalTime.Equal(want) {
			return strconv.FormatInt(in.RunID, 10)
		}
	}
	t.Fatalf("no instance of %s at %s", task, at)
	return ""
}
