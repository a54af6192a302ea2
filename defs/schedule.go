package defs

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultTimezone is the zone of a pipeline that names none, as in the design article.
const DefaultTimezone = "Asia/Shanghai"

// cronParser accepts 5 fields, an optional leading seconds field, and
// descriptors such as @daily and @every 30s.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule is a parsed cron expression bound to a time zone.
//
// Cron fields are matched against the wall clock of the zone, and each
// matching wall-clock time fires exactly once:
//   - on a fall-back day a time that occurs twice (01:30 in New York) fires at
//     its first occurrence only, so a job never runs twice for one wall time;
//   - on a spring-forward day a time that does not exist (02:30 in New York)
//     fires once, at the first instant after the gap (03:00 EDT); several
//     times inside one gap collapse into that one fire.
//
// `@every D` schedules ignore the wall clock and fire every D of real time.
// A Schedule is immutable and safe for concurrent use.
type Schedule struct {
	spec  string
	loc   *time.Location
	sched cron.Schedule
	every bool
}

// ParseSchedule parses spec in loc. It rejects what robfig/cron accepts but
// cannot honour: zone prefixes (the zone comes from the pipeline), `@every`
// below one second, and expressions that never fire (Feb 30).
func ParseSchedule(spec string, loc *time.Location, now time.Time) (*Schedule, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New("is empty: write 5 fields (\"0 2 * * *\"), 6 with seconds, or a descriptor such as @daily or @every 30s")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, errors.New("carries its own time zone prefix: remove it and set `timezone:` on the pipeline")
	}
	if rest, ok := strings.CutPrefix(spec, "@every"); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("@every needs a Go duration such as \"@every 30s\" or \"@every 5m\": %v", err)
		}
		if d < time.Second {
			return nil, fmt.Errorf("@every %s is below the one-second tick: use at least @every 1s", d)
		}
	}
	sched, err := parseCron(spec)
	if err != nil {
		return nil, err
	}
	s := &Schedule{spec: spec, loc: loc, sched: sched}
	_, s.every = sched.(cron.ConstantDelaySchedule)
	if s.Next(now).IsZero() {
		return nil, fmt.Errorf("%q can never fire (no such date, e.g. Feb 30): fix the day or month", spec)
	}
	return s, nil
}

// parseCron calls the cron parser, turning any panic of the library on odd
// input into an error: user input never panics.
func parseCron(spec string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("cannot parse %q: %v", spec, r)
		}
	}()
	s, err = cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("cannot parse %q: %v; write 5 fields (\"0 2 * * *\"), 6 with seconds, or a descriptor such as @daily", spec, err)
	}
	return s, nil
}

// Spec returns the expression as written.
func (s *Schedule) Spec() string { return s.spec }

// Location returns the zone the schedule is evaluated in.
func (s *Schedule) Location() *time.Location { return s.loc }

// Next returns the first fire time strictly after t, in the schedule's zone,
// or the zero time when the schedule never fires again.
func (s *Schedule) Next(t time.Time) time.Time {
	if s.every {
		return s.sched.Next(t.In(s.loc))
	}
	t = t.In(s.loc)
	w := wall(t)
	// Walking wall times: each step is a strictly later wall time, so the loop
	// ends; the bound only guards against a zone database gone mad.
	for range 1000 {
		w = s.sched.Next(w)
		if w.IsZero() {
			return time.Time{}
		}
		if at, ok := s.resolve(w); ok && at.After(t) {
			return at
		}
	}
	return time.Time{}
}

// wall returns the wall-clock reading of t as a UTC time, where no DST applies.
func wall(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// resolve maps a wall-clock time to the instant it fires at in the zone: the
// first occurrence of an ambiguous time, the end of the gap for a missing one.
func (s *Schedule) resolve(w time.Time) (time.Time, bool) {
	at := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), s.loc)
	if !wall(at).Equal(w) {
		// In a gap: fire at the first instant after it, the zone change.
		start, end := at.ZoneBounds()
		for _, b := range []time.Time{start, end} {
			if !b.IsZero() && wall(b).After(w) && b.Sub(at).Abs() <= 24*time.Hour {
				return b, true
			}
		}
		return time.Time{}, false
	}
	// Ambiguous: the same wall time may also exist in the neighbouring zone
	// period; the earliest occurrence wins.
	first := at
	start, end := at.ZoneBounds()
	_, off := at.Zone()
	if !start.IsZero() {
		_, prevOff := start.Add(-time.Nanosecond).Zone()
		alt := at.Add(time.Duration(off-prevOff) * time.Second)
		if alt.Before(start) && wall(alt.In(s.loc)).Equal(w) && alt.Before(first) {
			first = alt
		}
	}
	if !end.IsZero() {
		_, nextOff := end.Zone()
		alt := at.Add(time.Duration(off-nextOff) * time.Second)
		if !alt.Before(end) && wall(alt.In(s.loc)).Equal(w) && alt.Before(first) {
			first = alt
		}
	}
	return first.In(s.loc), true
}

// NextN returns up to n fire times strictly after t.
func (s *Schedule) NextN(t time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for len(out) < n {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}
