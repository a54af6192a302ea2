package main

import (
	"strings"
	"testing"

	"github.com/ax-sched/ax/store"
)

// TestCLITimesInPipelineZone: ax status, explain and history print a
// pipeline's times in its zone with the offset, as the console does, and
// in UTC with --utc.
func TestCLITimesInPipelineZone(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apiOpts{pipeline: gridPipeline}) // Asia/Shanghai
	if code, out := e.call("POST", "/api/v1/pipelines/shop/trigger", `{"at": "2026-03-01T02:00:00", "params": {"ok": "yes"}}`); code != 200 {
		t.Fatalf("trigger: %d %s", code, out)
	}
	e.waitState("shop.clean", store.Success)
	ax := func(args ...string) string {
		t.Helper()
		code, out, errOut := runAx(t, append(args, "--server", e.srv.URL)...)
		if code != exitOK {
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
