package sim

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// expectedFiresByWall is expectedFires as it was first written: the same
// rules read off time.Time's wall clock in the zone, second by second
// (three zone conversions and calendar computations a second, too slow for
// outages of days). It is the reference the fast walk is checked against.
func expectedFiresByWall(c cronForm, loc *time.Location, from, until time.Time) []fire {
	var out []fire
	t := from.Truncate(time.Second).Add(time.Second)
	prev := wallOf(t.Add(-time.Second), loc)
	for ; !t.After(until); t = t.Add(time.Second) {
		w := wallOf(t, loc)
		repeated := wallOf(t.Add(-time.Hour), loc).Equal(w) || wallOf(t.Add(-30*time.Minute), loc).Equal(w)
		switch {
		case c.wildcard():
			if wallMatches(c, w) {
				out = append(out, fire{at: t, repeated: repeated})
			}
		case wallMatches(c, w) && !repeated:
			out = append(out, fire{at: t})
		case w.Sub(prev) > time.Second:
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

func wallMatches(c cronForm, w time.Time) bool {
	sec := c.sec
	if sec == "" {
		sec = "0"
	}
	return wallField(sec, w.Second()) && wallField(c.min, w.Minute()) && wallField(c.hour, w.Hour())
}

func wallField(f string, v int) bool {
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

// TestExpectedFiresAsWallClocks: the fast walk of expectedFires lists the
// same fires as the wall-clock reading, for every generated form, in every
// zone, over windows of three hours around DST changes of 2026
// and 2027 (spring-forward gaps, fall-back repeats, Lord Howe's half hour,
// Santiago's midnight).
func TestExpectedFiresAsWallClocks(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 7))
	forms := []cronForm{
		{text: "*/20 * * * * *", sec: "*/20", min: "*", hour: "*"},
		{text: "*/15 * * * *", min: "*/15", hour: "*"},
		{text: "30 * * * *", min: "30", hour: "*"},
		{text: "30 2 * * *", min: "30", hour: "2"},
		{text: "0 0 * * *", min: "0", hour: "0"},
		{text: "30 45 1 * * *", sec: "30", min: "45", hour: "1"},
		{text: "0 15 3 * * *", sec: "0", min: "15", hour: "3"},
	}
	for range 2 {
		forms = append(forms, *genCron(r, true))
	}
	n := 0
	for _, zone := range zones {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			around := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.IntN(600)) * time.Hour)
			if zone != "UTC" {
				around = dstStart(r, zone)
			}
			// around is up to two hours before the change: the window holds it
			from := around.Add(-time.Duration(r.IntN(3600)) * time.Second).Add(time.Duration(r.IntN(1000)) * time.Millisecond)
			until := from.Add(time.Duration(3600*3+r.IntN(600)) * time.Second)
			for _, c := range forms {
				if c.every > 0 {
					continue
				}
				got, want := expectedFires(c, loc, from, from, until), expectedFiresByWall(c, loc, from, until)
				n += len(want)
				if !slices.EqualFunc(got, want, func(a, b fire) bool { return a.at.Equal(b.at) && a.repeated == b.repeated }) {
					t.Errorf("%s in %s, (%s, %s]: %d fires, want %d (first difference %s)", c.text, zone, from.Format(time.RFC3339Nano),
						until.Format(time.RFC3339), len(got), len(want), firstDiff(got, want))
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no fires compared")
	}
}

func firstDiff(a, b []fire) string {
	for i := range min(len(a), len(b)) {
		if !a[i].at.Equal(b[i].at) || a[i].repeated != b[i].repeated {
			return a[i].at.Format(time.RFC3339) + " vs " + b[i].at.Format(time.RFC3339)
		}
	}
	return "in length"
}
