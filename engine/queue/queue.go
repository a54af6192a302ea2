// Package queue is the dispatch priority queue: priority 1 first,
// equal priorities by fire time, then by insertion order — so that an
// upstream sync task is never stuck behind a downstream aggregate, and the
// order is explainable.
//
// A Queue is not safe for concurrent use: the scheduler loop owns it.
package queue

import "container/heap"

// Item is one due instance waiting for dispatch.
type Item[T any] struct {
	Priority int   // 1 (highest) .. 5 (lowest)
	At       int64 // fire time, Unix milliseconds
	Value    T
	seq      uint64
}

// Queue is a priority queue of items.
type Queue[T any] struct {
	h   items[T]
	seq uint64
}

// Push adds an item.
func (q *Queue[T]) Push(priority int, at int64, v T) {
	q.seq++
	heap.Push(&q.h, Item[T]{Priority: priority, At: at, Value: v, seq: q.seq})
}

// Pop removes and returns the first item; ok is false when the queue is empty.
func (q *Queue[T]) Pop() (it Item[T], ok bool) {
	if len(q.h) == 0 {
		return it, false
	}
	return heap.Pop(&q.h).(Item[T]), true
}

// Peek returns the first item without removing it.
func (q *Queue[T]) Peek() (it Item[T], ok bool) {
	if len(q.h) == 0 {
		return it, false
	}
	return q.h[0], true
}

// Len returns the number of items waiting.
func (q *Queue[T]) Len() int { return len(q.h) }

type items[T any] []Item[T]

func (h items[T]) Len() int { return len(h) }
func (h items[T]) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	if a.At != b.At {
		return a.At < b.At
	}
	return a.seq < b.seq
}
func (h items[T]) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *items[T]) Push(x any)   { *h = append(*h, x.(Item[T])) }
func (h *items[T]) Pop() any {
	old := *h
	n := len(old) - 1
	it := old[n]
	old[n] = Item[T]{}
	*h = old[:n]
	return it
}
