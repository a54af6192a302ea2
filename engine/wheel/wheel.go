// Package wheel is the scheduler's hashed time wheel: one-second ticks
// over a window of slots, holding the instances due in the next few minutes.
//
// The wheel is a cache of the store, never the source of truth: it holds
// only an instance's id, version and fire time, and the engine checks each
// entry against the store (state and version, by compare-and-set) before it
// dispatches, so a paused or changed instance never fires from a stale entry.
//
// A Wheel is not safe for concurrent use: the scheduler loop owns it.
package wheel

import (
	"time"
)

// Entry is one instance waiting in the wheel: 24 bytes.
type Entry struct {
	ID      int64 // instance id
	Version int64 // the version it was loaded at
	At      int64 // fire time, Unix milliseconds
}

// Time returns the entry's fire time.
func (e Entry) Time() time.Time { return time.UnixMilli(e.At) }

// Wheel holds entries in slots of one second each. An entry due within the
// window (slots seconds from the last tick) goes into the slot of its second;
// entries further out are refused and stay in the store until a top-up.
type Wheel struct {
	slots [][]Entry
	mask  int64
	tick  int64   // the last second processed; entries at or before it are due
	late  []Entry // added at or before tick: due on the next Advance
	n     int
}

// New returns a wheel whose window covers at least window, starting at now.
func New(now time.Time, window time.Duration) *Wheel {
	size := int64(1)
	for size < int64(window/time.Second)+2 {
		size <<= 1
	}
	return &Wheel{slots: make([][]Entry, size), mask: size - 1, tick: now.Unix() - 1}
}

// Window returns how far ahead of the last tick the wheel accepts entries.
func (w *Wheel) Window() time.Duration { return time.Duration(w.mask) * time.Second }

// Len returns the number of entries held.
func (w *Wheel) Len() int { return w.n }

// Add puts e into the wheel and reports whether it fits the window. An entry
// is due at the first tick at or after its time, never before it; one whose
// time has passed already is due at the next Advance.
func (w *Wheel) Add(e Entry) bool {
	sec := ceilSec(e.At)
	switch {
	case sec <= w.tick:
		w.late = append(w.late, e)
	case sec-w.tick > w.mask:
		return false
	default:
		i := sec & w.mask
		w.slots[i] = append(w.slots[i], e)
	}
	w.n++
	return true
}

// Advance moves the wheel to now and calls due for every entry whose second
// has come, in second order (entries of one second in the order they were
// added). Ticks missed by a stalled process or a clock jump are caught up,
// not lost; a clock that moves backwards advances nothing.
func (w *Wheel) Advance(now time.Time, due func(Entry)) {
	if len(w.late) > 0 {
		late := w.late
		w.late = nil
		w.n -= len(late)
		for _, e := range late {
			due(e)
		}
	}
	target := now.Unix()
	if target <= w.tick {
		return
	}
	// Past a full turn every slot is due: visit each once.
	from := max(w.tick+1, target-w.mask)
	for sec := from; sec <= target; sec++ {
		i := sec & w.mask
		slot := w.slots[i]
		if len(slot) == 0 {
			continue
		}
		w.slots[i] = slot[:0]
		w.n -= len(slot)
		for _, e := range slot {
			due(e)
		}
		if cap(slot) > 1024 { // do not keep a burst's memory forever
			w.slots[i] = nil
		}
	}
	w.tick = target
}

// ceilSec returns the first whole second at or after ms.
func ceilSec(ms int64) int64 {
	if ms > 0 {
		return (ms + 999) / 1000
	}
	return ms / 1000
}
