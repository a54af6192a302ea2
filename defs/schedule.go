package defs

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultTimezone is the zone of a pipeline that names none, as in the design article.
const DefaultTimezone = "Asia/Shanghai"

// Schedule is a parsed cron expression bound to a time zone.
//
// # Syntax
//
// Five fields (minute hour day-of-month month day-of-week), six with a
// leading seconds field, or a descriptor: @yearly (@annually), @monthly,
// @weekly, @daily (@midnight), @hourly, or @every D (a Go duration, at least
// 1s). Fields take *, ?, values, ranges a-b, lists a,b and steps */n, a/n,
// a-b/n; months and days of week take names (JAN, MON), case-insensitive.
// Operators pasted from Quartz keep their Quartz meaning:
//   - day of week: 7 is Sunday as 0 is (1-7 and MON-SUN are every day);
//     ranges wrap around in day of week and month (FRI-MON, NOV-FEB);
//   - day of month: L (the last day), L-n (n days before it), nW (the weekday,
//     Monday to Friday, nearest the nth, never leaving the month: 1W on a
//     Saturday is Monday the 3rd), LW (the last weekday);
//   - day of week: nL or FRIL (the last Friday), d#k or MON#2 (the kth such
//     day; a month without one has no fire).
//
// Refused, each with the field and the fix: ? together with a day of week
// written as a number (Quartz counts Sunday 1, cron 0: "0 0 12 ? * 2-6"
// means MON-FRI in Quartz and TUE-SAT here; write names), a seventh (year)
// field, H, hour 24, backward ranges outside day of week and month, and
// expressions that never fire (Feb 30).
//
// # Day of month and day of week
//
// When both are restricted a day matches if either matches (the Vixie/cronie
// rule); a field whose text starts with * (such as */2) counts as
// unrestricted, and then both must match.
//
// # Daylight saving time (the Debian/Vixie rule)
//
// A schedule is wildcard when its minute or hour field (or, in the 6-field
// form, its seconds field) starts with *, such as "* * * * *",
// "*/15 * * * *", "0 * * * *" or @hourly; it is fixed otherwise, such as
// "30 2 * * *" or @daily, @weekly, @monthly, @yearly.
//   - Wildcard schedules follow real time: on a fall-back day they fire in
//     both passes of the repeated hour; on a spring-forward day the wall
//     times inside the gap do not occur and do not fire.
//   - Fixed schedules fire each matching wall time once: a time that occurs
//     twice (01:30 in New York on a fall-back day) at its first occurrence; a
//     time that does not exist (02:30 on a spring-forward day) at the first
//     instant after the gap (03:00), several times inside one gap collapsing
//     into that one fire.
//   - @every D ignores the wall clock and fires every D of real time.
//
// Next searches as far as an expression needs (the calendar repeats every
// 400 years): "0 0 29 2 MON" or "0 0 * 2 MON#5" may be decades away, and
// only an expression that matches no day in 400 years never fires.
// A Schedule is immutable and safe for concurrent use.
type Schedule struct {
	spec  string
	loc   *time.Location
	cron  *cronSpec
	every cron.Schedule // @every D, else nil
}

// ParseSchedule parses spec in loc. It rejects zone prefixes (the zone
// comes from the pipeline), `@every` below one second, what the syntax above
// does not cover, and expressions that never fire (Feb 30). A refused
// expression's error wraps ErrCron and names the field and the fix; now is
// unused (kept for callers) since the search for a first fire no longer
// depends on it.
func ParseSchedule(spec string, loc *time.Location, now time.Time) (*Schedule, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, cronErr("", spec, "is empty: write 5 fields (\"0 2 * * *\"), 6 with seconds, or a descriptor such as @daily or @every 30s")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, cronErr("", spec, "carries its own time zone prefix: remove it and set `timezone:` on the pipeline")
	}
	if rest, ok := strings.CutPrefix(spec, "@every"); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, cronErr("", spec, "@every needs a Go duration such as \"@every 30s\" or \"@every 5m\": %v", err)
		}
		if d < time.Second {
			return nil, cronErr("", spec, "@every %s is below the one-second tick: use at least @every 1s", d)
		}
		return &Schedule{spec: spec, loc: loc, every: cron.Every(d)}, nil
	}
	c, err := parseCronSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("cannot parse %q: %w", spec, err)
	}
	if _, ok := c.nextWall(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()); !ok {
		if c.empty != nil {
			return nil, fmt.Errorf("cannot parse %q: %w", spec, c.empty)
		}
		return nil, cronErr("", spec, "%q can never fire (no such date, e.g. Feb 30): fix the day or month", spec)
	}
	return &Schedule{spec: spec, loc: loc, cron: c}, nil
}

// Spec returns the expression as written.
func (s *Schedule) Spec() string { return s.spec }

// Location returns the zone the schedule is evaluated in.
func (s *Schedule) Location() *time.Location { return s.loc }

// Wildcard reports whether the schedule follows real time across DST
// changes (a wildcard schedule, or @every); false for a fixed one.
func (s *Schedule) Wildcard() bool { return s.cron == nil || s.cron.wildcard }

// Next returns the first fire time strictly after t, in the schedule's zone,
// or the zero time when the schedule never fires again.
func (s *Schedule) Next(t time.Time) time.Time {
	if s.every != nil {
		return s.every.Next(t.In(s.loc))
	}
	at, _, ok := s.next(t)
	if !ok {
		return time.Time{}
	}
	return time.Unix(at, 0).In(s.loc)
}

// next returns the first fire strictly after t (Unix seconds) and the
// matching wall reading it fires for.
func (s *Schedule) next(t time.Time) (at, w int64, ok bool) {
	from := t.Unix() + 1 // fires fall on whole seconds
	if s.cron.wildcard {
		return s.nextReal(from)
	}
	return s.nextFixed(from)
}

// offsetAt returns the zone offset at Unix second u and the bounds of its
// zone period (0 for none).
func (s *Schedule) offsetAt(u int64) (off, start, end int64) {
	x := time.Unix(u, 0).In(s.loc)
	_, o := x.Zone()
	st, en := x.ZoneBounds()
	if !st.IsZero() {
		start = st.Unix()
	}
	if !en.IsZero() {
		end = en.Unix()
	}
	if start > u {
		start = 0
	}
	if end != 0 && end <= u {
		// Past the end of its table, Go's ZoneBounds can name a period that
		// does not hold u (on the last day of a leap year, such as 2040-12-31
		// in New York): take the start of the period after u instead.
		end = 0
		for probe := u + 86400; probe <= u+4*86400; probe += 86400 {
			if st, _ := time.Unix(probe, 0).In(s.loc).ZoneBounds(); !st.IsZero() && st.Unix() > u {
				end = st.Unix()
				break
			}
		}
	}
	return int64(o), start, end
}

// horizon bounds every walk: past it, no valid expression has a first fire.
const horizon = int64(searchYears+1) * 366 * 24 * 3600

// nextReal walks zone periods: inside one the wall clock moves with real
// time, so the first matching wall reading maps to the first instant.
func (s *Schedule) nextReal(from int64) (int64, int64, bool) {
	limit := from + horizon
	for from < limit {
		off, _, end := s.offsetAt(from)
		w, ok := s.cron.nextWall(from + off)
		if !ok {
			return 0, 0, false
		}
		if at := w - off; end == 0 || at < end {
			return at, w, true
		}
		from = max(end, from+1) // periods always move on; the max guards against bad zone data
	}
	return 0, 0, false
}

// nextFixed walks matching wall readings in order, each mapped to the
// instant it fires at (resolve), until one lies at or after from.
func (s *Schedule) nextFixed(from int64) (int64, int64, bool) {
	off, start, _ := s.offsetAt(from)
	w := from + off
	if start != 0 {
		switch prev, _, _ := s.offsetAt(start - 1); {
		case prev > off && w < start+prev:
			// In the second pass of a repeated span: its wall readings fired
			// in the first pass; go on from the end of the span.
			w = start + prev
		case prev < off && from == start:
			// from is the first instant after a spring-forward gap, which
			// is where the gap's wall readings fire: walk them too.
			w = start + prev
		}
	}
	limit := w + horizon
	for w < limit {
		m, ok := s.cron.nextWall(w)
		if !ok {
			return 0, 0, false
		}
		if at := s.resolve(m); at >= from {
			return at, m, true
		}
		w = m + 1
	}
	return 0, 0, false
}

// resolve maps a wall reading to the instant a fixed schedule fires it at:
// the first of its occurrences, or for a reading inside a gap, the first
// instant after the gap.
func (s *Schedule) resolve(w int64) int64 {
	off, start, end := s.offsetAt(w) // the offset at the instant w, close to the answer
	if start == 0 && end == 0 {
		return w - off
	}
	best, found := int64(0), false
	try := func(o int64) {
		u := w - o
		if uo, _, _ := s.offsetAt(u); u+uo == w && (!found || u < best) {
			best, found = u, true
		}
	}
	try(off)
	if start != 0 {
		p, _, _ := s.offsetAt(start - 1)
		try(p)
	}
	if end != 0 {
		n, _, _ := s.offsetAt(end)
		try(n)
	}
	if found {
		return best
	}
	// In a gap: the transition whose wall clock jumps over w.
	for _, b := range []int64{start, end} {
		if b == 0 {
			continue
		}
		before, _, _ := s.offsetAt(b - 1)
		after, _, _ := s.offsetAt(b)
		if b-1+before < w && w < b+after {
			return b
		}
	}
	return w - off // not reached with real zone data: periods last longer than a day
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

// Note explains the DST rule behind a fire, at, that Next returned for
// prev: "02:30 does not exist on 2026-03-08; fires at 03:00 (fixed
// schedule)". It is empty for a fire that no DST change touched.
func (s *Schedule) Note(prev, at time.Time) string {
	if s.cron == nil || at.IsZero() {
		return ""
	}
	a, w, ok := s.next(prev)
	if !ok || a != at.Unix() {
		return ""
	}
	day := time.Unix(w, 0).UTC().Format(time.DateOnly)
	local := at.In(s.loc)
	if !s.cron.wildcard {
		switch {
		case a+s.offset(a) != w:
			return fmt.Sprintf("%s does not exist on %s; fires at %s (fixed schedule)", clock(w), day, clock(a+s.offset(a)))
		case s.occurrences(w) > 1:
			return fmt.Sprintf("%s occurs twice on %s; fires once, at the first (%s, fixed schedule)", clock(w), day, local.Format("-07:00"))
		}
		return ""
	}
	if s.occurrences(w) > 1 {
		pass := "first"
		if _, start, _ := s.offsetAt(a); start != 0 {
			if prevOff, _, _ := s.offsetAt(start - 1); prevOff > s.offset(a) {
				pass = "second"
			}
		}
		return fmt.Sprintf("%s occurs twice on %s; this is the %s (%s), a wildcard schedule fires at both", clock(w), day, pass, local.Format("-07:00"))
	}
	// A spring-forward gap between prev and at whose readings would have matched.
	if _, start, _ := s.offsetAt(a); start != 0 && start > prev.Unix() {
		before, _, _ := s.offsetAt(start - 1)
		after := s.offset(start)
		if gapFrom, gapTo := start+before, start+after; gapTo > gapFrom {
			if m, ok := s.cron.nextWall(gapFrom); ok && m < gapTo {
				return fmt.Sprintf("clocks jump from %s to %s on %s; a wildcard schedule skips the times between", clock(gapFrom), clock(gapTo),
					time.Unix(gapFrom, 0).UTC().Format(time.DateOnly))
			}
		}
	}
	return ""
}

func (s *Schedule) offset(u int64) int64 {
	o, _, _ := s.offsetAt(u)
	return o
}

// occurrences counts the instants whose wall reading in the zone is w.
func (s *Schedule) occurrences(w int64) int {
	off, start, end := s.offsetAt(w)
	seen := map[int64]bool{}
	for _, o := range []int64{off, s.offset(max(start-1, 0)), s.offset(end)} {
		if u := w - o; u+s.offset(u) == w {
			seen[u] = true
		}
	}
	return len(seen)
}

// clock prints the time of day of a wall reading: 02:30, or 02:30:15.
func clock(w int64) string {
	t := time.Unix(w, 0).UTC()
	if t.Second() != 0 {
		return t.Format("15:04:05")
	}
	return t.Format("15:04")
}
