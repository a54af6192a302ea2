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

// TestPeekLeavesTheItem: Peek shows the item Pop would return, and takes
// nothing away.
func TestPeekLeavesTheItem(t *testing.T) {
	t.Parallel()
	var q Queue[string]
	q.Push(2, 10, "later")
	q.Push(1, 20, "first")
	for range 2 {
		it, ok := q.Peek()
		if !ok || it.Value != "first" || it.Priority != 1 || it.At != 20 {
			t.Fatalf("peek = %+v, %v; want first (priority 1 at 20)", it, ok)
		}
	}
	if q.Len() != 2 {
		t.Fatalf("len after peeks = %d, want 2", q.Len())
	}
	if it, ok := q.Pop(); !ok || it.Value != "first" {
		t.Errorf("pop = %+v, %v; want first", it, ok)
	}
	if it, ok := q.Pop(); !ok || it.Value != "later" || q.Len() != 0 {
		t.Errorf("pop = %+v, %v, len %d; want later and an empty queue", it, ok, q.Len())
	}
	if _, ok := q.Pop(); ok {
		t.Error("pop on an empty queue returned an item")
	}
}
