package sim

import (
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
func expectedFires(c cronForm, loc *time.Location, anchor, from, until time.Time) []fire {
	var out []fire
	if c.every > 0 {
		k := from.Sub(anchor)/c.every + 1
		for at := anchor.Add(k * c.every); !at.After(until); at = at.Add(c.every) {
			out = append(out, fire{at: at})
		}
		return out
	}
	t := from.Truncate(time.Second).Add(time.Second)
	prev := wallOf(t.Add(-time.Second), loc)
	for ; !t.After(until); t = t.Add(time.Second) {
		w := wallOf(t, loc)
		repeated := wallOf(t.Add(-time.Hour), loc).Equal(w) || wallOf(t.Add(-30*time.Minute), loc).Equal(w)
		switch {
		case c.wildcard():
			if c.matches(w) {
				out = append(out, fire{at: t, repeated: repeated})
			}
		case c.matches(w) && !repeated:
			out = append(out, fire{at: t})
		case w.Sub(prev) > time.Second:
			// a gap: wall times in (prev, w) do not exist; a matching one
			// fires now, unless w itself matches (then it fired above)
			target := time.Date(w.Year(), w.Month(), w.Day(), num(c.hour), num(c.min), num(c.sec), 0, time.UTC)
			if target.After(prev) && target.Before(w) {
				out = append(out, fire{at: t})
			}
		}
		prev = w
	}
	return out
}

// wallOf returns the wall clock of t in loc, as a UTC time with its fields.
func wallOf(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
}

// matches reports whether a wall clock matches the form's fields.
func (c cronForm) matches(w time.Time) bool {
	sec := c.sec
	if sec == "" {
		sec = "0"
	}
	return field(sec, w.Second()) && field(c.min, w.Minute()) && field(c.hour, w.Hour())
}

// field matches "*", "*/N" or a number.
func field(f string, v int) bool {
	switch {
	case f == "*":
		return true
	case strings.HasPrefix(f, "*/"):
		n, _ := strconv.Atoi(f[2:])
		return v%n == 0
	default:
		return num(f) == v
	}
}

func num(f string) int {
	n, _ := strconv.Atoi(f)
	return n
}
