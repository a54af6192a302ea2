package store

import (
	"testing"
	"time"
)

// TestPauseSetCovering: a task is covered by its own pause, else its
// group's, else its pipeline's; nothing else covers it.
func TestPauseSetCovering(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	task := Pause{Scope: ScopeTask, Name: "p.a", Actor: "ann", At: at}
	group := Pause{Scope: ScopeGroup, Name: "etl", Actor: "bob", At: at}
	pipe := Pause{Scope: ScopePipeline, Name: "p", Actor: "cy", At: at}
	other := []Pause{{Scope: ScopeTask, Name: "p.b"}, {Scope: ScopeGroup, Name: "ml"}, {Scope: ScopePipeline, Name: "q"}, {Scope: ScopeTask, Name: "q.a"}}
	for _, tc := range []struct {
		name   string
		pauses []Pause
		want   *Pause
	}{
		{"none", nil, nil},
		{"others' pauses only", other, nil},
		{"its pipeline", append([]Pause{pipe}, other...), &pipe},
		{"its group over its pipeline", []Pause{pipe, group}, &group},
		{"its own over its group and pipeline", []Pause{pipe, group, task}, &task},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewPauseSet(tc.pauses)
			got, ok := s.Covering("p.a", "etl", "p")
			if ok != (tc.want != nil) || (ok && got != *tc.want) {
				t.Errorf("Covering = %+v, %v; want %+v", got, ok, tc.want)
			}
			if s.Len() != len(tc.pauses) {
				t.Errorf("Len = %d, want %d", s.Len(), len(tc.pauses))
			}
		})
	}
}

// TestPauseSetAddRemove: a pause added covers, removed no longer does;
// removing a pause not in force changes nothing; the zero set is usable.
func TestPauseSetAddRemove(t *testing.T) {
	t.Parallel()
	var s PauseSet
	if _, ok := s.Covering("p.a", "etl", "p"); ok {
		t.Fatal("the zero set covers p.a")
	}
	s.Add(Pause{Scope: ScopeGroup, Name: "etl", Actor: "ann"})
	if p, ok := s.Get(ScopeGroup, "etl"); !ok || p.Actor != "ann" {
		t.Fatalf("Get(group etl) = %+v, %v", p, ok)
	}
	s.Remove(ScopePipeline, "etl") // same name, another scope: not this pause
	if _, ok := s.Covering("p.a", "etl", "p"); !ok || s.Len() != 1 {
		t.Fatalf("removing pipeline etl lifted group etl (len %d)", s.Len())
	}
	s.Remove(ScopeGroup, "etl")
	if _, ok := s.Covering("p.a", "etl", "p"); ok || s.Len() != 0 {
		t.Fatalf("group etl still covers p.a after Remove (len %d)", s.Len())
	}
}
