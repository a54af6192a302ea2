package defs

import (
	"strings"
	"testing"
	"time"
)

// The fuzz target's menus: field items chosen by the fuzzer's bytes.
var (
	fuzzSec   = []string{"0", "*", "*/15", "30", "0-10/5", "59"}
	fuzzMin   = []string{"0", "*", "*/5", "30", "0,30", "15-45/15", "*/20", "59"}
	fuzzHour  = []string{"*", "0", "1", "2", "0-3", "*/2", "1,2,3", "23", "*/6"}
	fuzzDom   = []string{"*", "1", "L", "15W", "1W", "L-2", "LW", "*/2", "31", "1-15", "29", "?"}
	fuzzMonth = []string{"*", "3", "10,11", "NOV-FEB", "*/3", "2", "4,9"}
	fuzzDow   = []string{"*", "0", "7", "MON-FRI", "FRI-MON", "5L", "MON#2", "SUN#1", "*/2", "SAT", "1-7", "?"}
	fuzzZones = []string{"America/New_York", "Europe/Berlin", "Australia/Sydney", "Australia/Lord_Howe", "America/Santiago", "UTC", "Asia/Kathmandu"}
	// fuzzDays are DST days (and ordinary ones) the instants start near.
	fuzzDays = []string{"2026-03-08T00:00:00Z", "2026-11-01T00:00:00Z", "2026-03-29T00:00:00Z", "2026-10-25T00:00:00Z",
		"2026-04-04T00:00:00Z", "2026-10-03T00:00:00Z", "2026-09-05T12:00:00Z", "2012-11-04T00:00:00Z", "2028-02-28T00:00:00Z", "2026-06-15T00:00:00Z", "2040-12-30T00:00:00Z", "2090-11-05T00:00:00Z"}
)

// bruteDay decides a day by the rules' definitions, written apart from
// dayMatch: counting weekdays, scanning for the nearest weekday.
func bruteDay(c *cronSpec, y int, m time.Month, d int) bool {
	last := daysIn(y, m)
	weekday := func(x int) time.Weekday { return time.Date(y, m, x, 12, 0, 0, 0, time.UTC).Weekday() }
	isWorkday := func(x int) bool { w := weekday(x); return w != time.Saturday && w != time.Sunday }
	wd := weekday(d)
	dom := c.dom&(1<<d) != 0
	for n := 0; n <= 30; n++ {
		if c.domLast&(1<<n) != 0 && d == last-n {
			dom = true
		}
	}
	if c.domLastW {
		x := last
		for !isWorkday(x) {
			x--
		}
		dom = dom || d == x
	}
	for n := 1; n <= last; n++ {
		if c.domNearW&(1<<n) == 0 {
			continue
		}
	scan:
		for k := 0; k <= 2; k++ {
			for _, x := range []int{n - k, n + k} {
				if x >= 1 && x <= last && isWorkday(x) {
					dom = dom || d == x
					break scan
				}
			}
		}
	}
	dow := c.dow&(1<<wd) != 0
	if c.dowLast&(1<<wd) != 0 && d+7 > last {
		dow = true
	}
	k := 0
	for x := 1; x <= d; x++ {
		if weekday(x) == wd {
			k++
		}
	}
	if c.dowNth[wd]&(1<<k) != 0 {
		dow = true
	}
	if c.domStar || c.dowStar {
		return dom && dow
	}
	return dom || dow
}

// bruteMatch reports whether a wall reading (seconds, as UTC) matches.
func bruteMatch(c *cronSpec, w int64) bool {
	t := time.Unix(w, 0).UTC()
	return c.sec&(1<<t.Second()) != 0 && c.min&(1<<t.Minute()) != 0 && c.hour&(1<<t.Hour()) != 0 &&
		c.month&(1<<t.Month()) != 0 && bruteDay(c, t.Year(), t.Month(), t.Day())
}

// bruteNext walks second by second from t+1 for at most span. Wildcard:
// an instant fires when its wall reading matches. Fixed: an instant fires
// when a wall reading it reaches for the first time matches (the readings
// beyond the highest seen so far: a repeated hour adds none, a gap adds all
// it skips).
func bruteNext(c *cronSpec, loc *time.Location, t time.Time, span int64) (int64, bool) {
	wallOf := func(u int64) int64 {
		_, off := time.Unix(u, 0).In(loc).Zone()
		return u + int64(off)
	}
	from := t.Unix() + 1
	// The highest reading before from: the walk of the two days before.
	seen := int64(-1 << 62)
	for u := from - 2*86400; u < from; u++ {
		seen = max(seen, wallOf(u))
	}
	for u := from; u < from+span; u++ {
		w := wallOf(u)
		if c.wildcard {
			if bruteMatch(c, w) {
				return u, true
			}
			continue
		}
		for x := seen + 1; x <= w; x++ { // the readings reached for the first time
			if bruteMatch(c, x) {
				return u, true
			}
		}
		seen = max(seen, w)
	}
	return 0, false
}

// FuzzNext compares Schedule.Next with a brute-force walk of the same rules
// over random expressions, zones and instants near DST days.
func FuzzNext(f *testing.F) {
	f.Add(uint8(0), uint8(1), uint8(0), uint8(0), uint8(0), uint8(0), uint8(0), uint8(0), uint32(3600), false)
	f.Add(uint8(1), uint8(1), uint8(0), uint8(0), uint8(0), uint8(0), uint8(0), uint8(7), uint32(5400), true) // * * * * * * NY 2012
	f.Add(uint8(0), uint8(3), uint8(3), uint8(0), uint8(0), uint8(0), uint8(0), uint8(0), uint32(3600), false)
	f.Add(uint8(0), uint8(6), uint8(1), uint8(0), uint8(0), uint8(0), uint8(3), uint8(3), uint32(0), false)
	f.Add(uint8(0), uint8(2), uint8(0), uint8(0), uint8(0), uint8(0), uint8(4), uint8(4), uint32(50000), false)
	f.Add(uint8(0), uint8(0), uint8(0), uint8(2), uint8(0), uint8(0), uint8(0), uint8(0), uint32(0), false)
	f.Add(uint8(0), uint8(4), uint8(2), uint8(0), uint8(0), uint8(0), uint8(1), uint8(1), uint32(7200), false)
	// from the last second before New York's gap (07:00:00 UT): the gap's
	// 02:30 fires one second later, at 03:00 EDT
	f.Add(uint8(0), uint8(3), uint8(3), uint8(0), uint8(0), uint8(0), uint8(0), uint8(0), uint32(7*3600-1), false)
	// fixed schedules across each kind of DST day (hour "2" or "1", minute "30" or "0")
	for z := range uint8(5) {
		for d := range uint8(7) {
			f.Add(uint8(0), uint8(3), uint8(3), uint8(0), uint8(0), uint8(0), z, d, uint32(0), false)
			f.Add(uint8(0), uint8(0), uint8(2), uint8(0), uint8(0), uint8(0), z, d, uint32(43200), false)
		}
	}
	f.Fuzz(func(t *testing.T, sec, mi, hr, dom, mon, dow, zone, day uint8, offset uint32, six bool) {
		fields := []string{fuzzMin[int(mi)%len(fuzzMin)], fuzzHour[int(hr)%len(fuzzHour)], fuzzDom[int(dom)%len(fuzzDom)],
			fuzzMonth[int(mon)%len(fuzzMonth)], fuzzDow[int(dow)%len(fuzzDow)]}
		if six {
			fields = append([]string{fuzzSec[int(sec)%len(fuzzSec)]}, fields...)
		}
		spec := strings.Join(fields, " ")
		loc, err := time.LoadLocation(fuzzZones[int(zone)%len(fuzzZones)])
		if err != nil {
			t.Skip(err)
		}
		base, _ := time.Parse(time.RFC3339, fuzzDays[int(day)%len(fuzzDays)])
		from := base.Add(time.Duration(offset%(2*86400)) * time.Second)
		s, err := ParseSchedule(spec, loc, from)
		if err != nil {
			return // refused (never fires, or ? with a number): TestCronRefused covers those
		}
		const span = 3 * 86400
		want, found := bruteNext(s.cron, loc, from, span)
		got := s.Next(from)
		switch {
		case found && (got.IsZero() || got.Unix() != want):
			t.Fatalf("%q in %s after %s: Next = %s, brute force = %s", spec, loc, from.In(loc).Format(time.RFC3339),
				got.Format(time.RFC3339), time.Unix(want, 0).In(loc).Format(time.RFC3339))
		case !found && !got.IsZero() && got.Unix() < from.Unix()+1+span:
			t.Fatalf("%q in %s after %s: Next = %s, brute force finds nothing within 3 days", spec, loc,
				from.In(loc).Format(time.RFC3339), got.Format(time.RFC3339))
		}
	})
}
