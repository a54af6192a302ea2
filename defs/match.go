package defs

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// This file is the one home of the cross-pipeline matching rule: which runs
// of another pipeline meet a dependency on it. The engine releases by it,
// `ax explain` and a backfill's dry run name what it chose, and the
// simulator checks every release against it.

// Match says which run of another pipeline meets a dependency on it.
type Match string

// The match rules of a cross-pipeline dependency.
const (
	// MatchInterval (the default) is met by the upstream run whose logical
	// time lies in the downstream's schedule interval: after the fire before
	// this one, up to this one. Never an older interval.
	MatchInterval Match = "interval"
	// MatchExact is met only by the upstream run of the same logical time.
	MatchExact Match = "exact"
	// MatchLatest is met by the latest upstream run at or before the logical
	// time, however old.
	MatchLatest Match = "latest"
)

// Matches lists the match rules as they are written.
var Matches = []string{string(MatchExact), string(MatchInterval), string(MatchLatest)}

// Offset shifts the logical time a dependency matches against: a calendar
// step of days (-1d: the same wall time the day before, in the downstream's
// zone) or a duration (-2h, 30m).
type Offset struct {
	Days int
	D    time.Duration
}

var daysRe = regexp.MustCompile(`^[+-]?[0-9]{1,4}d$`)

// ParseOffset reads an offset: a whole number of days (-1d, +2d) or a Go
// duration (-2h, -1h30m, 45m).
func ParseOffset(s string) (Offset, error) {
	if daysRe.MatchString(s) {
		n, err := strconv.Atoi(strings.TrimSuffix(s, "d"))
		if err == nil {
			return Offset{Days: n}, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || strings.ContainsAny(s, "d") {
		return Offset{}, fmt.Errorf("offset %q is not a calendar step or a duration: write days as -1d, or a duration such as -2h or -30m", s)
	}
	return Offset{D: d}, nil
}

// IsZero reports whether o shifts nothing.
func (o Offset) IsZero() bool { return o.Days == 0 && o.D == 0 }

// String writes o as ParseOffset reads it.
func (o Offset) String() string {
	switch {
	case o.Days != 0:
		return fmt.Sprintf("%+dd", o.Days)
	case o.D > 0:
		return "+" + o.D.String()
	}
	return o.D.String()
}

// MarshalText writes o as it is written in a file.
func (o Offset) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// Apply shifts t by o: days on the wall clock of loc, a duration in real time.
func (o Offset) Apply(t time.Time, loc *time.Location) time.Time {
	if o.Days != 0 {
		if loc == nil {
			loc = time.UTC
		}
		t = t.In(loc).AddDate(0, 0, o.Days)
	}
	return t.Add(o.D)
}

// Window is the logical times of the upstream runs that meet one
// cross-pipeline dependency of one downstream run.
type Window struct {
	Match Match
	// From and To bound it: (From, To] for interval (From zero: unbounded),
	// To alone for exact, at or before To for latest.
	From, To time.Time
}

// Contains reports whether an upstream run at logical time t meets the
// dependency.
func (w Window) Contains(t time.Time) bool {
	switch w.Match {
	case MatchExact:
		return t.Equal(w.To)
	case MatchLatest:
		return !t.After(w.To)
	}
	return !t.After(w.To) && (w.From.IsZero() || t.After(w.From))
}

// String says which upstream runs meet it, in loc: "the run of
// 2026-12-06T02:00:00Z", "a run in (2026-12-05T02:00:00Z, 2026-12-06T02:00:00Z]",
// "a run at or before 2026-12-06T02:00:00Z".
func (w Window) String() string {
	f := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	switch {
	case w.Match == MatchExact:
		return "the run of " + f(w.To)
	case w.Match == MatchLatest || w.From.IsZero():
		return "a run at or before " + f(w.To)
	}
	return "a run in (" + f(w.From) + ", " + f(w.To) + "]"
}

// CrossWindow returns the window of dependency d for a downstream run at
// logical time logical. own is the downstream task's schedule (nil when it
// has none: then it is read as one fire a day at midnight in loc, its
// pipeline's zone). The interval is the schedule interval that contains the
// logical time: up to the first fire at or after it, from the fire before
// that one; for a scheduled run, from its previous fire up to its own. A
// manual run (a trigger, a backfill) at a time between two fires gets the
// interval that ends at the next fire. The offset shifts the window.
func CrossWindow(d Dep, own *Schedule, loc *time.Location, logical time.Time) Window {
	if loc == nil {
		loc = time.UTC
	}
	w := Window{Match: d.Match, To: logical}
	if w.Match == "" {
		w.Match = MatchInterval
	}
	if w.Match == MatchInterval {
		w.From, w.To = IntervalOf(own, loc, logical)
		if !w.From.IsZero() {
			w.From = d.Offset.Apply(w.From, loc)
		}
	}
	w.To = d.Offset.Apply(w.To, loc)
	return w
}

// IntervalOf returns the schedule interval (from, to] of own that contains
// t: to is the first fire at or after t, from the fire before it (zero when
// there is none within ten years, Schedule.Prev). A nil schedule is read as daily at
// midnight in loc.
func IntervalOf(own *Schedule, loc *time.Location, t time.Time) (from, to time.Time) {
	if t.Truncate(time.Second) != t {
		t = t.Truncate(time.Second).Add(time.Second) // fires fall on whole seconds
	}
	if own == nil {
		day := time.Date(t.In(loc).Year(), t.In(loc).Month(), t.In(loc).Day(), 0, 0, 0, 0, loc)
		if day.Before(t) {
			day = day.AddDate(0, 0, 1)
		}
		return day.AddDate(0, 0, -1), day
	}
	to = own.Next(t.Add(-time.Second))
	if to.IsZero() {
		return time.Time{}, t
	}
	return own.Prev(to), to
}
