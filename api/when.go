package api

import (
	"fmt"
	"strings"
	"time"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
)

// The two ways ax reads a time an operator typed, shared by the API and
// the CLI (which checks what it can before it calls the API).

// Logical times ax takes are from earliestAt up to latestAt: the JSON of
// every read carries years 0 to 9999 only (a run at 9999-12-31T23:59:59 in
// New York, year 10000 in UTC, made every read of its runs answer an empty
// body), and the zero time means "none".
var (
	earliestAt = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	latestAt   = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
)

// inRange refuses t, read from s, outside the logical times ax keeps.
func inRange(s string, t time.Time) (time.Time, error) {
	if t.Before(earliestAt) || !t.Before(latestAt) {
		return time.Time{}, fmt.Errorf("%q is outside the logical times ax keeps: give one from %s up to %s", s,
			earliestAt.Format(time.RFC3339), latestAt.Format(time.RFC3339))
	}
	return t, nil
}

// onWall reads s with layout on loc's wall clock; ok is false when s does
// not have that layout. A wall time the zone skips (a spring-forward gap)
// or repeats (fall-back) is refused, not guessed: the one rule for "a wall
// time in the pipeline's zone" of triggers, marks and backfills.
func onWall(s, layout string, loc *time.Location) (t time.Time, ok bool, err error) {
	t, err = time.ParseInLocation(layout, s, loc)
	if err != nil {
		return time.Time{}, false, nil
	}
	if t.Format(layout) != s {
		return time.Time{}, true, fmt.Errorf("%q does not occur in %s (a daylight-saving gap): give another time, or an offset", s, loc)
	}
	// Repeated: another instant an hour away shows the same wall clock
	// (to the second: a date alone is midnight, not the whole day).
	const wall = "2006-01-02T15:04:05"
	for _, d := range []time.Duration{-time.Hour, time.Hour} {
		if o := t.Add(d); o.Format(wall) == t.Format(wall) {
			a, b := t, o
			if b.Before(a) {
				a, b = b, a
			}
			return time.Time{}, true, fmt.Errorf("%q occurs twice in %s (daylight saving ends): add the offset, %s or %s", s, loc, a.Format(time.RFC3339), b.Format(time.RFC3339))
		}
	}
	return t, true, nil
}

// ParseAt reads a logical time in the pipeline's zone: RFC 3339 with an
// offset, or a date or date-time on the zone's wall clock (onWall: a time
// the zone skips or repeats is refused), from 1970 up to 9999 (inRange).
func ParseAt(s string, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return inRange(s, t)
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", time.DateOnly} {
		t, ok, err := onWall(s, layout, loc)
		if !ok {
			continue
		}
		if err != nil {
			return time.Time{}, err
		}
		return inRange(s, t)
	}
	return time.Time{}, fmt.Errorf("%q is not a logical time: give a date (2026-03-01), a date-time in the pipeline's zone (2026-03-01T02:00:00), or RFC 3339 with an offset", s)
}

// ParseWhen reads a date (2026-03-01) or a date-time (2026-03-07T23:59:59,
// or RFC 3339 with an offset) in loc. A date given as an end is the end of
// that day. A date-time the zone skips or repeats is refused as ParseAt
// refuses it (onWall), and so is a time outside inRange.
func ParseWhen(s string, loc *time.Location, end bool) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return inRange(s, t)
	}
	if t, ok, err := onWall(s, "2006-01-02T15:04:05", loc); ok {
		if err != nil {
			return time.Time{}, err
		}
		return inRange(s, t)
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, loc); err == nil {
		if end {
			t = t.AddDate(0, 0, 1).Add(-time.Millisecond)
		}
		return inRange(s, t)
	}
	return time.Time{}, fmt.Errorf("%q is not a date (2026-03-01) or a date-time (2026-03-07T23:59:59)", s)
}

// FireAt reads the logical time of a run an operator names (ax trigger
// --at, ax run --at, a mark's at): what ParseAt reads, except that a date
// alone means the schedule's fire on that date in its zone, so that the
// run is the scheduled run's twin. A date with no fire, or with several, is
// refused, listing them. sched is the schedule whose runs hold the target;
// with none (a pipeline only ever triggered) a date is its midnight in loc.
func FireAt(s string, sched *defs.Schedule, loc *time.Location) (time.Time, error) {
	day, err := ParseAt(s, loc)
	if err != nil || sched == nil {
		return day, err
	}
	if _, err := time.Parse(time.DateOnly, s); err != nil {
		return day, nil // a date-time: taken as given
	}
	next := time.Date(day.Year(), day.Month(), day.Day()+1, 0, 0, 0, 0, loc)
	const most = 1000
	var fires []time.Time
	for at := sched.Next(day.Add(-time.Second)); !at.IsZero() && at.Before(next) && len(fires) <= most; at = sched.Next(at) {
		fires = append(fires, at)
	}
	switch {
	case len(fires) == 1:
		return inRange(s, fires[0])
	case len(fires) == 0:
		hint := "give a date-time, or a date it fires on"
		if n := sched.Next(next); !n.IsZero() {
			hint += " (next: " + n.In(sched.Location()).Format(time.DateOnly) + ")"
		}
		return time.Time{}, fmt.Errorf("%q: the schedule %q does not fire on that date in %s: %s", s, sched.Spec(), sched.Location(), hint)
	}
	shown := make([]string, 0, 4)
	for _, f := range fires[:min(len(fires), 4)] {
		shown = append(shown, f.In(sched.Location()).Format("15:04:05"))
	}
	count := fmt.Sprint(len(fires))
	if len(fires) > most {
		count = fmt.Sprintf("more than %d", most)
	} else if len(fires) > len(shown) {
		shown = append(shown, "…")
	}
	return time.Time{}, fmt.Errorf("%q: the schedule %q fires %s times that date in %s (%s): give the time, e.g. %s", s, sched.Spec(), count,
		sched.Location(), strings.Join(shown, ", "), fires[0].In(sched.Location()).Format("2006-01-02T15:04:05"))
}

// ScheduleOf returns the schedule whose runs hold task id, or nil.
func ScheduleOf(g *dag.Graph, id string) *defs.Schedule {
	if tr := g.TriggerOf(id); tr != nil {
		return tr.Schedule
	}
	return nil
}
