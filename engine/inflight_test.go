package engine

import (
	"maps"
	"slices"
	"testing"
)

// TestInflightCountsLiveAttemptsPerTask: the per-task count the overlap
// rule reads follows the live attempts added and removed, and only those;
// removing what is not in flight changes nothing.
func TestInflightCountsLiveAttemptsPerTask(t *testing.T) {
	t.Parallel()
	a, b := &taskInfo{id: "p.a"}, &taskInfo{id: "p.b"}
	type op struct {
		add    bool
		id     int64
		task   *taskInfo
		live   bool
		ticket string
	}
	for _, tc := range []struct {
		name     string
		ops      []op
		wantLive map[string]int
		wantIDs  []int64
	}{
		{"empty", nil, map[string]int{}, []int64{}},
		{"live and not live", []op{{add: true, id: 3, task: a, live: true}, {add: true, id: 1, task: a}, {add: true, id: 2, task: b, live: true}},
			map[string]int{"p.a": 1, "p.b": 1}, []int64{1, 2, 3}},
		{"two live of one task, one removed", []op{{add: true, id: 1, task: a, live: true}, {add: true, id: 2, task: a, live: true}, {id: 1}},
			map[string]int{"p.a": 1}, []int64{2}},
		{"the last live removed leaves no count", []op{{add: true, id: 1, task: a, live: true}, {id: 1}},
			map[string]int{}, []int64{}},
		{"a backfill attempt removed does not lower the count", []op{{add: true, id: 1, task: a, live: true}, {add: true, id: 2, task: a}, {id: 2}},
			map[string]int{"p.a": 1}, []int64{1}},
		{"removing what is not in flight changes nothing", []op{{add: true, id: 1, task: a, live: true}, {id: 9}, {id: 9}},
			map[string]int{"p.a": 1}, []int64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newInflight()
			for _, o := range tc.ops {
				if o.add {
					f.add(o.id, &attempt{task: o.task, live: o.live, ticket: o.ticket})
					continue
				}
				before := f.get(o.id)
				if got := f.remove(o.id); got != before {
					t.Fatalf("remove(%d) = %p, want the attempt in flight %p", o.id, got, before)
				}
				if f.get(o.id) != nil {
					t.Fatalf("instance %d still in flight after remove", o.id)
				}
			}
			live := map[string]int{}
			for _, task := range []string{"p.a", "p.b"} {
				if n := f.live(task); n > 0 {
					live[task] = n
				}
			}
			if !maps.Equal(live, tc.wantLive) || f.tasks() != len(tc.wantLive) {
				t.Errorf("live = %v (%d tasks), want %v", live, f.tasks(), tc.wantLive)
			}
			if ids := f.ids(); !slices.Equal(ids, tc.wantIDs) || f.len() != len(tc.wantIDs) {
				t.Errorf("ids = %v (len %d), want %v", ids, f.len(), tc.wantIDs)
			}
		})
	}
}

// TestInflightByTicket finds an attempt by its ticket, and nothing for a
// ticket no attempt in flight has.
func TestInflightByTicket(t *testing.T) {
	t.Parallel()
	f := newInflight()
	f.add(4, &attempt{task: &taskInfo{id: "p.a"}, ticket: "t4"})
	f.add(7, &attempt{task: &taskInfo{id: "p.a"}, ticket: "t7"})
	if id, ok := f.byTicket("t7"); !ok || id != 7 {
		t.Errorf("byTicket(t7) = %d, %v; want 7, true", id, ok)
	}
	if id, ok := f.byTicket("gone"); ok || id != 0 {
		t.Errorf("byTicket(gone) = %d, %v; want 0, false", id, ok)
	}
}
