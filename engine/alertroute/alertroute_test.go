package alertroute

import (
	"strings"
	"testing"

	"github.com/ax-sched/ax/engine"
)

func TestParseAlertRoute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, spec string
		want       Route // without hook
		err        string
	}{
		{"bare URL", "http://h/x", Route{url: "http://h/x"}, ""},
		{"routed", "kind=task_failed|sla_missed,group=etl|bi,url=https://h/x,format=slack",
			Route{filter: filter{kinds: []string{"task_failed", "sla_missed"}, groups: []string{"etl", "bi"}}, url: "https://h/x", slack: true}, ""},
		{"comma in URL", "url=https://h/x?a=1,2,kind=leader_change", Route{url: "https://h/x?a=1,2", filter: filter{kinds: []string{"leader_change"}}}, ""},
		{"unknown kind", "kind=task_fail,url=http://h/x", Route{}, `kind "task_fail" is not an alert kind: use one of breaker_open`},
		{"suggestion", "kind=sla_mised,url=http://h/x", Route{}, `(did you mean "sla_missed"?)`},
		{"no url", "kind=task_failed", Route{}, "no url=: say where to send the alerts"},
		{"bad url", "url=ftp://h/x", Route{}, `url "ftp://h/x": give an http:// or https:// URL`},
		{"bad format", "url=http://h/x,format=xml", Route{}, `format "xml": use json or slack`},
		{"unknown key", "kinds=task_failed,url=http://h/x", Route{}, `"kinds=task_failed" is not a setting`},
		{"kind twice", "kind=task_failed,kind=sla_missed,url=http://h/x", Route{}, `kind= is given twice: write one kind=a|b`},
		{"url twice", "url=http://h/x,url=http://h/y", Route{}, `url= is given twice: one route has one url (repeat --alert-webhook for another)`},
		{"group twice", "group=a,url=http://h/x,group=b", Route{}, `group= is given twice`},
		{"bare word", "hooks.example", Route{}, `url "hooks.example": give an http:// or https:// URL`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse(%q) = %v, want an error containing %q", tc.spec, err, tc.err)
				}
				return
			}
			if err != nil || strings.Join(got.kinds, "|") != strings.Join(tc.want.kinds, "|") || strings.Join(got.groups, "|") != strings.Join(tc.want.groups, "|") ||
				got.url != tc.want.url || got.slack != tc.want.slack {
				t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
			}
		})
	}
}

func TestAlertRouteTakes(t *testing.T) {
	t.Parallel()
	r := Route{filter: filter{kinds: []string{"task_failed"}, groups: []string{"etl"}}}
	for _, tc := range []struct {
		a    engine.Alert
		want bool
	}{
		{engine.Alert{Kind: "task_failed", Group: "etl"}, true},
		{engine.Alert{Kind: "task_failed", Group: "bi"}, false},
		{engine.Alert{Kind: "sla_missed", Group: "etl"}, false},
		{engine.Alert{Kind: "task_failed"}, false}, // no task, no group: a group route does not take it
	} {
		if got := r.takes(tc.a); got != tc.want {
			t.Errorf("takes(%s, group %q) = %v, want %v", tc.a.Kind, tc.a.Group, got, tc.want)
		}
	}
	if !(Route{}).takes(engine.Alert{Kind: "leader_change"}) {
		t.Error("a route without kind or group does not take every alert")
	}
}
