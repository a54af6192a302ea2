package engine

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// Requests queued by an older build (its single Op struct: every field of
// every verb, with kind, actor and reason) decode into the typed request,
// and the queued form written now is the same format.
func TestQueuedRequestsDecode(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.FixedZone("", 8*3600))
	two, five := 2, 5.0
	for _, tc := range []struct {
		name, verb, args string // args as an older build wrote them
		want             Request
	}{
		{"pause", "pause", `{"kind":"pause","scope":"task","target":"p.a","actor":"operator:ann","reason":"db"}`, Pause{Scope: store.ScopeTask, Target: "p.a"}},
		{"resume", "resume", `{"kind":"resume","scope":"group","target":"etl"}`, Resume{Scope: store.ScopeGroup, Target: "etl"}},
		{"trigger", "trigger", `{"kind":"trigger","target":"p.a","downstream":true,"at":"2026-03-01T02:00:00+08:00","params":{"day":"1"}}`,
			Trigger{Target: "p.a", Downstream: true, At: at, Params: map[string]string{"day": "1"}}},
		{"kill", "kill", `{"kind":"kill","instance":7}`, Kill{Instance: 7}},
		{"rerun of a run, downstream ignored", "rerun", `{"kind":"rerun","run":3,"downstream":true}`, Rerun{Run: 3}},
		{"mark", "mark", `{"kind":"mark","target":"p.a","at":"2026-03-01T02:00:00+08:00","state":"SUCCESS"}`, Mark{Target: "p.a", At: at, State: axtype.Success}},
		{"cancel", "cancel", `{"kind":"cancel","run":9}`, Cancel{Run: 9}},
		{"limits", "limits", `{"kind":"limits","global":5,"max_running":2,"groups":{"etl":1}}`, SetLimits{Global: &five, MaxRunning: &two, Groups: map[string]float64{"etl": 1}}},
		{"cancel_backfill", "cancel_backfill", `{"kind":"cancel_backfill","backfill":4}`, CancelBackfill{Backfill: 4}},
		{"no args", "cancel", ``, Cancel{}},
	} {
		got, err := DecodeRequest(tc.verb, []byte(tc.args))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: DecodeRequest = %#v, %v; want %#v", tc.name, got, err, tc.want)
			continue
		}
		verb, args, err := EncodeRequest(got, By{Actor: "operator:ann"})
		if err != nil || verb != tc.verb || !strings.Contains(string(args), `"kind":"`+tc.verb+`"`) || !strings.Contains(string(args), `"actor":"operator:ann"`) {
			t.Errorf("%s: EncodeRequest = %s %s %v", tc.name, verb, args, err)
		}
		again, err := DecodeRequest(verb, args)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("%s: round trip = %#v, %v; want %#v", tc.name, again, err, got)
		}
	}
	for _, bad := range []struct{ verb, args, want string }{
		{"explode", `{}`, `unknown operation "explode": use pause, resume, trigger`},
		{"", `{}`, `unknown operation ""`},
		{"kill", `{"instance":"seven"}`, "malformed kill request"},
		{"pause", `[1]`, "malformed pause request"},
	} {
		if r, err := DecodeRequest(bad.verb, []byte(bad.args)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("DecodeRequest(%q, %s) = %#v, %v; want %q", bad.verb, bad.args, r, err, bad.want)
		}
	}
}
