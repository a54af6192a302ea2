package sim

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// fire is one expected fire of a schedule.
type fire struct {
	at       time.Time
	repeated bool // the wall time occurred before, in the first pass of a fall-back hour
}

// cronOf returns the generated form of a trigger's schedule.
func (w *world) cronOf(trigger string) *cronForm {
	for _, p := range w.spec.pipelines {
		if trigger == p.name {
			return p.schedule
		}
		for _, t := range p.tasks {
			if trigger == p.name+"."+t.name {
				return t.cron
			}
		}
	}
	return nil
}

// misfireOf returns a trigger's misfire policy as generated.
func (w *world) misfireOf(trigger string) string {
	for _, p := range w.spec.pipelines {
		if trigger == p.name {
			return p.misfire
		}
		for _, t := range p.tasks {
			if trigger == p.name+"."+t.name {
				return t.misfire
			}
		}
	}
	return ""
}

// rootWaitsAcross reports whether a task of the run set waits only on
// other pipelines' tasks: such a run starts WAITING, not SCHEDULED.
func (w *world) rootWaitsAcross(pipeline string, tasks []string) bool {
	for _, name := range tasks {
		same, cross := false, false
		for _, u := range w.g.Upstream(pipeline + "." + name) {
			if u.Pipeline == pipeline {
				same = true
			} else {
				cross = true
			}
		}
		if cross && !same {
			return true
		}
	}
	return false
}

// locOf returns the time zone of a trigger's schedule.
func (w *world) locOf(trigger string) *time.Location {
	for _, tr := range w.g.Triggers() {
		if tr.Name() == trigger {
			return tr.Schedule.Location()
		}
	}
	return time.UTC
}

// expectedFires lists the fires of c in (from, until], computed second by
// second from the standard library's zone data, independently of
// defs.Schedule (the code under test), by the rules of the README as
// amended by issue 13:
//   - @every D fires every D of real time from the first start (anchor);
//   - a wildcard form follows real time: every instant whose wall clock
//     matches, both passes of a fall-back hour, nothing inside a gap;
//   - a fixed form fires each matching wall time once, at its first
//     occurrence, and a wall time inside a spring-forward gap at the first
//     instant after the gap.
//
// The walk is in whole seconds of Unix time with the zone's offset looked
// up only where it changes (zoneAt): an outage of two days is 170,000
// seconds per trigger. TestExpectedFiresAsWallClocks checks it against the
// same rules read off time.Time's wall clock second by second.
func expectedFires(c cronForm, loc *time.Location, anchor, from, until time.Time) []fire {
	var out []fire
	if c.every > 0 {
		k := from.Sub(anchor)/c.every + 1
		for at := anchor.Add(k * c.every); !at.After(until); at = at.Add(c.every) {
			out = append(out, fire{at: at})
		}
		return out
	}
	m, wild := c.matcher(), c.wildcard()
	here, hourAgo, halfAgo := zoneAt{loc: loc}, zoneAt{loc: loc}, zoneAt{loc: loc}
	u, end := from.Truncate(time.Second).Unix()+1, until.Unix()
	prev := u - 1 + here.offset(u-1) // the wall clock a second before, as seconds
	for ; u <= end; u++ {
		off := here.offset(u)
		w := u + off
		// the same wall clock an hour (or, at Lord Howe, half an hour) before
		repeated := hourAgo.offset(u-3600)-off == 3600 || halfAgo.offset(u-1800)-off == 1800
		switch {
		case wild:
			if m.matches(w) {
				out = append(out, fire{at: time.Unix(u, 0).In(from.Location()), repeated: repeated})
			}
		case m.matches(w) && !repeated:
			out = append(out, fire{at: time.Unix(u, 0).In(from.Location())})
		case w-prev > 1:
			// a gap: wall times in (prev, w) do not exist; a matching one
			// fires now, unless w itself matches (then it fired above)
			target := w - w%86400 + int64(num(c.hour)*3600+num(c.min)*60+num(c.sec))
			if target > prev && target < w {
				out = append(out, fire{at: time.Unix(u, 0).In(from.Location())})
			}
		}
		prev = w
	}
	return out
}

// zoneAt is a zone's UTC offset at instants given in Unix seconds, looked
// up again only outside the zone period of the last lookup.
type zoneAt struct {
	loc        *time.Location
	start, end int64 // the period [start, end) of off; end 0: none
	off        int64
	ok         bool
}

func (z *zoneAt) offset(u int64) int64 {
	if z.ok && u >= z.start && (z.end == 0 || u < z.end) {
		return z.off
	}
	t := time.Unix(u, 0).In(z.loc)
	_, off := t.Zone()
	s, e := t.ZoneBounds()
	z.off, z.ok, z.start, z.end = int64(off), true, math.MinInt64, 0
	if !s.IsZero() {
		z.start = s.Unix()
	}
	if !e.IsZero() {
		z.end = e.Unix()
	}
	return z.off
}

// cronMatcher is a form's seconds, minute and hour fields, parsed.
type cronMatcher struct{ sec, min, hour fieldMatcher }

// fieldMatcher matches "*" (every 1), "*/N" (every N) or a number (at).
type fieldMatcher struct{ every, at int }

func parseField(f string) fieldMatcher {
	switch {
	case f == "*":
		return fieldMatcher{every: 1}
	case strings.HasPrefix(f, "*/"):
		n, _ := strconv.Atoi(f[2:])
		return fieldMatcher{every: n}
	default:
		return fieldMatcher{at: num(f)}
	}
}

func (f fieldMatcher) matches(v int) bool {
	if f.every > 0 {
		return v%f.every == 0
	}
	return v == f.at
}

func (c cronForm) matcher() cronMatcher {
	sec := c.sec
	if sec == "" {
		sec = "0"
	}
	return cronMatcher{sec: parseField(sec), min: parseField(c.min), hour: parseField(c.hour)}
}

// matches reports whether a wall clock, in seconds since 1970-01-01 00:00
// of the wall, matches.
func (m cronMatcher) matches(w int64) bool {
	return m.sec.matches(int(w%60)) && m.min.matches(int(w/60%60)) && m.hour.matches(int(w/3600%24))
}

func num(f string) int {
	n, _ := strconv.Atoi(f)
	return n
}
