package queue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestOrder(t *testing.T) {
	t.Parallel()
	var q Queue[string]
	q.Push(3, 100, "p3-early")
	q.Push(1, 300, "p1-late")
	q.Push(3, 50, "p3-earliest")
	q.Push(1, 200, "p1-early")
	q.Push(3, 100, "p3-early-second") // same priority and time: insertion order
	q.Push(5, 0, "p5")
	var got []string
	for {
		it, ok := q.Pop()
		if !ok {
			break
		}
		got = append(got, it.Value)
	}
	want := "[p1-early p1-late p3-earliest p3-early p3-early-second p5]"
	if fmt.Sprint(got) != want {
		t.Errorf("order = %v, want %s", got, want)
	}
	if _, ok := q.Peek(); ok {
		t.Error("peek on an empty queue")
	}
}

// TestOrderUnderContention: 10,000 random items come out sorted by
// (priority, time, insertion), whatever order they went in.
func TestOrderUnderContention(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 7))
	type key struct {
		p   int
		at  int64
		seq int
	}
	var q Queue[key]
	var keys []key
	for i := range 10000 {
		k := key{1 + r.IntN(5), int64(r.IntN(20)), i}
		keys = append(keys, k)
		q.Push(k.p, k.at, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.p != b.p {
			return a.p - b.p
		}
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.seq - b.seq
	})
	for i, want := range keys {
		it, ok := q.Pop()
		if !ok || it.Value != want {
			t.Fatalf("item %d = %+v, want %+v", i, it.Value, want)
		}
	}
}
