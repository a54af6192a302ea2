package api

import (
	"fmt"
	"time"
)

// The two ways ax reads a time an operator typed, shared by the API and
// the CLI (which checks what it can before it calls the API).

// ParseAt reads a logical time in the pipeline's zone: RFC 3339 with an
// offset, or a date or date-time on the zone's wall clock. A wall time the
// zone skips (a spring-forward gap) or repeats (fall-back) without an
// offset is refused, not guessed.
func ParseAt(s string, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", time.DateOnly} {
		t, err := time.ParseInLocation(layout, s, loc)
		if err != nil {
			continue
		}
		if t.Format(layout) != s {
			return time.Time{}, fmt.Errorf("%q does not occur in %s (a daylight-saving gap): give another time, or an offset", s, loc)
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
				return time.Time{}, fmt.Errorf("%q occurs twice in %s (daylight saving ends): add the offset, %s or %s", s, loc, a.Format(time.RFC3339), b.Format(time.RFC3339))
			}
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is not a logical time: give a date (2026-03-01), a date-time in the pipeline's zone (2026-03-01T02:00:00), or RFC 3339 with an offset", s)
}

// ParseWhen reads a date (2026-03-01) or a date-time (2026-03-07T23:59:59,
// or RFC 3339 with an offset) in loc. A date given as an end is the end of
// that day.
func ParseWhen(s string, loc *time.Location, end bool) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02T15:04:05", s, loc); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, loc); err == nil {
		if end {
			return t.AddDate(0, 0, 1).Add(-time.Millisecond), nil
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is not a date (2026-03-01) or a date-time (2026-03-07T23:59:59)", s)
}
