package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	T := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	up := func(id string, s axtype.State) upstreamView { return upstreamView{id: id, state: s} }
	cross := func(id string, s axtype.State) upstreamView { return upstreamView{id: id, state: s, cross: true} }
	tests := []struct {
		name string
		g    gateView
		now  time.Time
		want string // verdict: reason
	}{
		{"no upstream", gateView{}, T, "ready: "},
		{"all succeeded", gateView{ups: []upstreamView{up("p.a", axtype.Success), up("p.b", axtype.Success)}}, T, "ready: "},
		{"one running", gateView{ups: []upstreamView{up("p.a", axtype.Success), up("p.b", axtype.Running)}}, T, "wait: waiting for upstream p.b (RUNNING)"},
		{"one waiting", gateView{ups: []upstreamView{up("p.b", axtype.Waiting)}}, T, "wait: waiting for upstream p.b"},
		{"failed", gateView{ups: []upstreamView{up("p.a", axtype.Running), up("p.b", axtype.Failed)}}, T, "fail: upstream p.b failed"},
		{"killed", gateView{ups: []upstreamView{up("p.a", axtype.Killed)}}, T, "fail: upstream p.a was killed"},
		{"skipped", gateView{ups: []upstreamView{{id: "p.a", state: axtype.Failed, err: "skipped by misfire policy skip"}}}, T, "fail: upstream p.a was skipped"},
		{"failed beats approval", gateView{manual: true, ups: []upstreamView{up("p.a", axtype.Failed)}}, T, "fail: upstream p.a failed"},
		{"gate awaiting", gateView{manual: true, ups: []upstreamView{up("p.a", axtype.Success)}}, T, "wait: awaiting approval"},
		{"gate approved, upstream running", gateView{manual: true, approved: true, ups: []upstreamView{up("p.a", axtype.Running)}}, T, "wait: waiting for upstream p.a (RUNNING)"},
		{"gate approved, upstream done", gateView{manual: true, approved: true, ups: []upstreamView{up("p.a", axtype.Success)}}, T, "ready: "},
		{"gate without upstream", gateView{manual: true}, T, "wait: awaiting approval"},
		{"same-pipeline wait has no default limit", gateView{logical: T, crossLimit: 24 * time.Hour, ups: []upstreamView{up("p.a", axtype.Running)}},
			T.Add(1000 * time.Hour), "wait: waiting for upstream p.a (RUNNING)"},
		{"cross wait a second before", gateView{logical: T, crossLimit: 24 * time.Hour, ups: []upstreamView{cross("q.s", "")}},
			T.Add(24*time.Hour - time.Second), "wait: waiting for upstream q.s (no run yet) (fails at 2026-12-02T02:00:00Z)"},
		{"cross wait at its deadline", gateView{logical: T, crossLimit: 24 * time.Hour, ups: []upstreamView{up("p.a", axtype.Success), cross("q.s", "")}},
			T.Add(24 * time.Hour), "fail: upstream q.s not done after 24h"},
		{"cross succeeded: no limit left", gateView{logical: T, crossLimit: 24 * time.Hour, ups: []upstreamView{up("p.a", axtype.Running), cross("q.s", axtype.Success)}},
			T.Add(48 * time.Hour), "wait: waiting for upstream p.a (RUNNING)"},
		{"task limit over same-pipeline", gateView{logical: T, limit: 90 * time.Minute, crossLimit: 24 * time.Hour, ups: []upstreamView{up("p.a", axtype.Running)}},
			T.Add(90 * time.Minute), "fail: upstream p.a not done after 1h30m"},
		{"task limit over cross", gateView{logical: T, limit: 2 * time.Hour, crossLimit: 24 * time.Hour, ups: []upstreamView{cross("q.s", axtype.Scheduled)}},
			T.Add(2 * time.Hour), "fail: upstream q.s not done after 2h"},
		{"cross failed", gateView{logical: T, crossLimit: 24 * time.Hour, ups: []upstreamView{cross("q.s", axtype.Failed)}}, T, "fail: upstream q.s failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := decide(tc.g, tc.now)
			if got := fmt.Sprintf("%s: %s", d.verdict, d.reason); got != tc.want {
				t.Errorf("decide = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSettleFollowsFailuresTransitively(t *testing.T) {
	t.Parallel()
	T := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	// a → b → d, a → c → d, c → e (manual), f outside the run's failure.
	nodes := map[string]settleNode{
		"p.a": {downs: []string{"p.b", "p.c"}},
		"p.b": {ups: []string{"p.a"}, downs: []string{"p.d"}},
		"p.c": {ups: []string{"p.a"}, downs: []string{"p.d", "p.e"}},
		"p.d": {ups: []string{"p.b", "p.c"}},
		"p.e": {ups: []string{"p.c"}, manual: true},
		"p.f": {},
	}
	run := map[string]instView{
		"p.a": {state: axtype.Failed, err: "boom"}, "p.b": {state: axtype.Waiting}, "p.c": {state: axtype.Waiting},
		"p.d": {state: axtype.Waiting}, "p.e": {state: axtype.Waiting}, "p.f": {state: axtype.Waiting},
	}
	out, err := settle(func(id string) (instView, bool) { v, ok := run[id]; return v, ok }, nodes, []string{"p.b", "p.c"}, T, T, 24*time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range out {
		got[s.task] = fmt.Sprintf("%s: %s", s.verdict, s.reason)
	}
	want := map[string]string{"p.b": "fail: upstream p.a failed", "p.c": "fail: upstream p.a failed",
		"p.d": "fail: upstream p.b failed", "p.e": "fail: upstream p.c failed"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("settle = %v\nwant %v", got, want)
	}
	if run["p.b"].state != axtype.Waiting {
		t.Errorf("settle changed its input")
	}
}

// TestSettleRedecidesAWaitWhenItsUpstreamFails: candidates listed downstream
// first (as a restart's sweep of WAITING instances may list them): c is
// judged "wait" while b still waits, then b fails on a's failure, and c must
// be judged again and fail too, not stay WAITING for ever (sim seed 142).
func TestSettleRedecidesAWaitWhenItsUpstreamFails(t *testing.T) {
	t.Parallel()
	T := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	nodes := map[string]settleNode{
		"p.a": {downs: []string{"p.b"}},
		"p.b": {ups: []string{"p.a"}, downs: []string{"p.c"}},
		"p.c": {ups: []string{"p.b"}, downs: []string{"p.d"}},
		"p.d": {ups: []string{"p.c"}},
	}
	run := map[string]instView{"p.a": {state: axtype.Failed, err: "boom"}, "p.b": {state: axtype.Waiting}, "p.c": {state: axtype.Waiting}, "p.d": {state: axtype.Waiting}}
	out, err := settle(func(id string) (instView, bool) { v, ok := run[id]; return v, ok }, nodes, []string{"p.d", "p.c", "p.b"}, T, T, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range out {
		got = append(got, fmt.Sprintf("%s %s: %s", s.task, s.verdict, s.reason))
	}
	want := []string{"p.b fail: upstream p.a failed", "p.c fail: upstream p.b failed", "p.d fail: upstream p.c failed"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("settle = %q\nwant %q", got, want)
	}
}

// TestSettle is the table of the resolver's rule over a run: which WAITING
// candidates become ready, keep waiting (and why) or fail.
func TestSettle(t *testing.T) {
	t.Parallel()
	T := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	// a → b → c; g (manual) after a; x after a and, in another pipeline, q.x.
	nodes := map[string]settleNode{
		"p.a": {downs: []string{"p.b", "p.g", "p.x"}},
		"p.b": {ups: []string{"p.a"}, downs: []string{"p.c"}},
		"p.c": {ups: []string{"p.b"}},
		"p.g": {ups: []string{"p.a"}, manual: true},
		"p.x": {ups: []string{"p.a"}, hasCross: true},
	}
	crossWaiting := func(string) ([]upstreamView, error) {
		return []upstreamView{{id: "q.x", state: axtype.Running, cross: true}}, nil
	}
	crossDone := func(string) ([]upstreamView, error) {
		return []upstreamView{{id: "q.x", state: axtype.Success, cross: true}}, nil
	}
	for _, tc := range []struct {
		name       string
		run        map[string]instView
		candidates []string
		now        time.Time
		cross      func(string) ([]upstreamView, error)
		want       []string
	}{
		{name: "ready when every upstream succeeded",
			run:        map[string]instView{"p.a": {state: axtype.Success}, "p.b": {state: axtype.Waiting}, "p.c": {state: axtype.Waiting}},
			candidates: []string{"p.b"}, want: []string{"p.b ready: "}},
		{name: "an upstream outside the run counts as done",
			run:        map[string]instView{"p.b": {state: axtype.Waiting}},
			candidates: []string{"p.b"}, want: []string{"p.b ready: "}},
		{name: "waits naming the upstream and its state",
			run:        map[string]instView{"p.a": {state: axtype.Running}, "p.b": {state: axtype.Waiting}},
			candidates: []string{"p.b"}, want: []string{"p.b wait: waiting for upstream p.a (RUNNING)"}},
		{name: "a manual gate waits for approval",
			run:        map[string]instView{"p.a": {state: axtype.Success}, "p.g": {state: axtype.Waiting}},
			candidates: []string{"p.g"}, want: []string{"p.g wait: awaiting approval"}},
		{name: "an approved gate is ready",
			run:        map[string]instView{"p.a": {state: axtype.Success}, "p.g": {state: axtype.Waiting, approved: true}},
			candidates: []string{"p.g"}, want: []string{"p.g ready: "}},
		{name: "a skip fails what waits on it, transitively",
			run: map[string]instView{"p.a": {state: axtype.Success}, "p.b": {state: axtype.Failed, err: "skipped: overlap"},
				"p.c": {state: axtype.Waiting}},
			candidates: []string{"p.c"}, want: []string{"p.c fail: upstream p.b was skipped"}},
		{name: "a kill fails the chain below",
			run:        map[string]instView{"p.a": {state: axtype.Killed}, "p.b": {state: axtype.Waiting}, "p.c": {state: axtype.Waiting}},
			candidates: []string{"p.b"}, want: []string{"p.b fail: upstream p.a was killed", "p.c fail: upstream p.b failed"}},
		{name: "waits on another pipeline until the cross limit",
			run:        map[string]instView{"p.a": {state: axtype.Success}, "p.x": {state: axtype.Waiting}},
			candidates: []string{"p.x"}, now: T.Add(time.Hour), cross: crossWaiting,
			want: []string{"p.x wait: waiting for upstream q.x (RUNNING) (fails at 2026-12-02T02:00:00Z)"}},
		{name: "fails once the cross limit passed, naming the cross upstream",
			run:        map[string]instView{"p.a": {state: axtype.Success}, "p.x": {state: axtype.Waiting}},
			candidates: []string{"p.x"}, now: T.Add(24 * time.Hour), cross: crossWaiting,
			want: []string{"p.x fail: upstream q.x not done after 24h"}},
		{name: "ready when the other pipeline succeeded",
			run:        map[string]instView{"p.a": {state: axtype.Success}, "p.x": {state: axtype.Waiting}},
			candidates: []string{"p.x"}, now: T.Add(time.Hour), cross: crossDone, want: []string{"p.x ready: "}},
		{name: "what no longer waits is left alone",
			run:        map[string]instView{"p.a": {state: axtype.Success}, "p.b": {state: axtype.Running}},
			candidates: []string{"p.b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			now := tc.now
			if now.IsZero() {
				now = T
			}
			out, err := settle(func(id string) (instView, bool) { v, ok := tc.run[id]; return v, ok }, nodes, tc.candidates, T, now, 24*time.Hour, tc.cross)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range out {
				got = append(got, fmt.Sprintf("%s %s: %s", s.task, s.verdict, s.reason))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("settle = %q\nwant %q", got, tc.want)
			}
		})
	}
}
