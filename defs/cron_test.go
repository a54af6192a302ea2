package defs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// nextCase is one table row: the fires of spec in zone strictly after from.
// Every expected time was worked out by hand from the zone's published
// transitions (zdump -v: New York 2026-03-08 02:00→03:00 and 2026-11-01
// 02:00→01:00; Berlin 2026-03-29 02:00→03:00 and 2026-10-25 03:00→02:00;
// Sydney 2026-04-05 03:00→02:00 and 2026-10-04 02:00→03:00; Lord Howe
// 2026-04-05 02:00→01:30 and 2026-10-04 02:00→02:30; Santiago 2026-04-05
// 00:00→04-04 23:00 and 2026-09-06 00:00→01:00) and from the calendar
// (weekdays checked against Python's datetime), never by running Next.
type nextCase struct {
	name, zone, spec, from string
	want                   []string
}

// monthDays lists midnight UTC of the given day of each month of year y.
func monthDays(y int, days ...int) []string {
	var out []string
	for i, d := range days {
		out = append(out, time.Date(y, time.Month(i+1), d, 0, 0, 0, 0, time.UTC).Format(time.RFC3339))
	}
	return out
}

func runNextCases(t *testing.T, cases []nextCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			loc := mustLoc(t, tc.zone)
			from, err := time.Parse(time.RFC3339, tc.from)
			if err != nil {
				t.Fatal(err)
			}
			s, err := ParseSchedule(tc.spec, loc, from)
			if err != nil {
				t.Fatal(err)
			}
			got := s.NextN(from, len(tc.want))
			var gs []string
			for _, g := range got {
				gs = append(gs, g.Format(time.RFC3339))
				if g.Location() != loc {
					t.Errorf("fire %s is in %s, want %s", g, g.Location(), loc)
				}
			}
			if strings.Join(gs, " ") != strings.Join(tc.want, " ") {
				t.Errorf("%q in %s after %s:\n got  %v\n want %v", tc.spec, tc.zone, tc.from, gs, tc.want)
			}
		})
	}
}

// TestCronDSTWildcardAndFixed: the Debian/Vixie rule in five zones, both
// directions, wildcard and fixed, 5 and 6 fields.
func TestCronDSTWildcardAndFixed(t *testing.T) {
	t.Parallel()
	runNextCases(t, []nextCase{
		// New York, fall back: 01:00-01:59 occurs twice.
		{"NY wildcard fall-back fires in both passes", "America/New_York", "*/30 * * * *", "2026-11-01T00:50:00-04:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:30:00-05:00", "2026-11-01T02:00:00-05:00"}},
		{"NY every 5 minutes is not silent on fall-back day", "America/New_York", "*/5 * * * *", "2026-11-01T01:50:00-04:00",
			[]string{"2026-11-01T01:55:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:05:00-05:00"}},
		{"NY @hourly fall-back", "America/New_York", "@hourly", "2026-11-01T00:30:00-04:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}},
		{"NY fixed fall-back fires the first pass only", "America/New_York", "0,30 1 * * *", "2026-11-01T00:00:00-04:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-02T01:00:00-05:00"}},
		{"NY fixed from inside the second pass", "America/New_York", "45 1 * * *", "2026-11-01T01:10:00-05:00",
			[]string{"2026-11-02T01:45:00-05:00"}},
		{"NY fixed 02:00 after the repeated hour", "America/New_York", "0 2 * * *", "2026-11-01T01:50:00-04:00",
			[]string{"2026-11-01T02:00:00-05:00", "2026-11-02T02:00:00-05:00"}},
		{"NY 6-field wildcard seconds fire in both passes", "America/New_York", "*/20 30 1 * * *", "2026-11-01T01:30:30-04:00",
			[]string{"2026-11-01T01:30:40-04:00", "2026-11-01T01:30:00-05:00", "2026-11-01T01:30:20-05:00", "2026-11-01T01:30:40-05:00", "2026-11-02T01:30:00-05:00"}},
		{"NY every second inside the second pass (2012)", "America/New_York", "* * * * * *", "2012-11-04T01:00:00-05:00",
			[]string{"2012-11-04T01:00:01-05:00", "2012-11-04T01:00:02-05:00"}},
		{"NY every second at the end of the first pass", "America/New_York", "* * * * * *", "2026-11-01T01:59:59-04:00",
			[]string{"2026-11-01T01:00:00-05:00", "2026-11-01T01:00:01-05:00"}},
		// New York, spring forward: 02:00-02:59 does not exist.
		{"NY wildcard spring-forward skips the gap", "America/New_York", "*/30 * * * *", "2026-03-08T01:10:00-05:00",
			[]string{"2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"}},
		{"NY wildcard hour 2 has no fire on spring day", "America/New_York", "*/15 2 * * *", "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-09T02:00:00-04:00", "2026-03-09T02:15:00-04:00"}},
		{"NY fixed gap times collapse into one fire", "America/New_York", "0,15,30,45 2 * * *", "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00", "2026-03-09T02:15:00-04:00"}},
		{"NY fixed gap and 03:00 are one fire", "America/New_York", "30 2,3 * * *", "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"NY 6-field fixed in the gap", "America/New_York", "15 30 2 * * *", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:15-04:00"}},
		// Berlin.
		{"Berlin wildcard fall-back", "Europe/Berlin", "0 * * * *", "2026-10-25T01:30:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"}},
		{"Berlin fixed fall-back", "Europe/Berlin", "30 2 * * *", "2026-10-24T12:00:00+02:00",
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"Berlin wildcard spring-forward", "Europe/Berlin", "*/20 2 * * *", "2026-03-29T01:00:00+01:00",
			[]string{"2026-03-30T02:00:00+02:00"}},
		{"Berlin fixed spring-forward", "Europe/Berlin", "0 2 * * *", "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"}},
		// Sydney: fall back in April, spring forward in October.
		{"Sydney wildcard fall-back", "Australia/Sydney", "0,30 * * * *", "2026-04-05T01:50:00+11:00",
			[]string{"2026-04-05T02:00:00+11:00", "2026-04-05T02:30:00+11:00", "2026-04-05T02:00:00+10:00", "2026-04-05T02:30:00+10:00", "2026-04-05T03:00:00+10:00"}},
		{"Sydney fixed fall-back", "Australia/Sydney", "30 2 * * *", "2026-04-04T12:00:00+11:00",
			[]string{"2026-04-05T02:30:00+11:00", "2026-04-06T02:30:00+10:00"}},
		{"Sydney fixed spring-forward", "Australia/Sydney", "30 2 * * *", "2026-10-03T12:00:00+10:00",
			[]string{"2026-10-04T03:00:00+11:00", "2026-10-05T02:30:00+11:00"}},
		{"Sydney wildcard spring-forward", "Australia/Sydney", "*/30 2 * * *", "2026-10-03T12:00:00+10:00",
			[]string{"2026-10-05T02:00:00+11:00", "2026-10-05T02:30:00+11:00"}},
		// Lord Howe: a 30-minute shift.
		{"Lord Howe wildcard fall-back", "Australia/Lord_Howe", "*/15 * * * *", "2026-04-05T01:20:00+11:00",
			[]string{"2026-04-05T01:30:00+11:00", "2026-04-05T01:45:00+11:00", "2026-04-05T01:30:00+10:30", "2026-04-05T01:45:00+10:30", "2026-04-05T02:00:00+10:30"}},
		{"Lord Howe fixed fall-back", "Australia/Lord_Howe", "45 1 * * *", "2026-04-04T12:00:00+11:00",
			[]string{"2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"}},
		{"Lord Howe fixed spring-forward", "Australia/Lord_Howe", "15 2 * * *", "2026-10-03T12:00:00+10:30",
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"}},
		{"Lord Howe wildcard spring-forward", "Australia/Lord_Howe", "*/10 2 * * *", "2026-10-04T01:55:00+10:30",
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-04T02:40:00+11:00", "2026-10-04T02:50:00+11:00", "2026-10-05T02:00:00+11:00"}},
		// From the last second before a spring-forward gap: the gap's wall
		// readings fire at the first instant after it, which is from+1s
		// (found from outside with `ax next --from`; expected values by hand
		// from zdump: NY 2026-03-08 07:00:00 UT 01:59:59 EST -> 03:00:00 EDT).
		{"NY fixed from the last second before the gap", "America/New_York", "30 2 * * *", "2026-03-08T01:59:59-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"NY 6-field fixed from the last second before the gap", "America/New_York", "0 30 2 * * *", "2026-03-08T01:59:59-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"NY 6-field fixed fire at 01:59:59 then the gap's", "America/New_York", "59 59 1,2 * * *", "2026-03-08T01:59:58-05:00",
			[]string{"2026-03-08T01:59:59-05:00", "2026-03-08T03:00:00-04:00", "2026-03-09T01:59:59-04:00"}},
		{"Berlin fixed from the last second before the gap", "Europe/Berlin", "0 2 * * *", "2026-03-29T01:59:59+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"}},
		{"Lord Howe fixed from the last second before the gap", "Australia/Lord_Howe", "15 2 * * *", "2026-10-04T01:59:59+10:30",
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"}},
		{"Santiago @daily from the last second before midnight's gap", "America/Santiago", "@daily", "2026-09-05T23:59:59-04:00",
			[]string{"2026-09-06T01:00:00-03:00", "2026-09-07T00:00:00-03:00"}},
		{"Casey fixed from the last second before its 00:01 gap", "Antarctica/Casey", "0 1 * * *", "2021-10-03T00:00:59+08:00",
			[]string{"2021-10-03T03:01:00+11:00", "2021-10-04T01:00:00+11:00"}},
		// Santiago: the changes happen at midnight.
		{"Santiago wildcard fall-back at midnight", "America/Santiago", "0,30 * * * *", "2026-04-04T23:10:00-03:00",
			[]string{"2026-04-04T23:30:00-03:00", "2026-04-04T23:00:00-04:00", "2026-04-04T23:30:00-04:00", "2026-04-05T00:00:00-04:00"}},
		{"Santiago @daily fall-back", "America/Santiago", "@daily", "2026-04-04T12:00:00-03:00",
			[]string{"2026-04-05T00:00:00-04:00", "2026-04-06T00:00:00-04:00"}},
		{"Santiago fixed 23:00 fall-back", "America/Santiago", "0 23 * * *", "2026-04-04T12:00:00-03:00",
			[]string{"2026-04-04T23:00:00-03:00", "2026-04-05T23:00:00-04:00"}},
		{"Santiago @daily spring-forward: midnight does not exist", "America/Santiago", "@daily", "2026-09-05T12:00:00-04:00",
			[]string{"2026-09-06T01:00:00-03:00", "2026-09-07T00:00:00-03:00"}},
		{"Santiago wildcard spring-forward", "America/Santiago", "0 * * * *", "2026-09-05T23:30:00-04:00",
			[]string{"2026-09-06T01:00:00-03:00", "2026-09-06T02:00:00-03:00"}},
	})
}

// TestCronDays: day of month and day of week, the Quartz operators, leap
// years and far-away fires.
func TestCronDays(t *testing.T) {
	t.Parallel()
	runNextCases(t, []nextCase{
		{"Feb 29 from 2096 is in 2104 (2100 is no leap year)", "UTC", "0 0 29 2 *", "2096-03-01T00:00:00Z",
			[]string{"2104-02-29T00:00:00Z"}},
		{"Feb 29 next leap year", "UTC", "0 0 29 2 *", "2026-01-01T00:00:00Z",
			[]string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"fifth Monday of February: 18 years away", "UTC", "0 0 * 2 MON#5", "2026-01-01T00:00:00Z",
			[]string{"2044-02-29T00:00:00Z", "2072-02-29T00:00:00Z"}},
		{"both days restricted: either matches", "UTC", "0 12 29 2 MON", "2026-01-01T00:00:00Z",
			[]string{"2026-02-02T12:00:00Z", "2026-02-09T12:00:00Z", "2026-02-16T12:00:00Z", "2026-02-23T12:00:00Z", "2027-02-01T12:00:00Z"}},
		{"*/2 counts as unrestricted: both must match", "UTC", "0 0 */2 * MON", "2026-01-01T00:00:00Z",
			[]string{"2026-01-05T00:00:00Z", "2026-01-19T00:00:00Z"}},
		{"L is the last day", "UTC", "0 0 L * *", "2026-02-01T00:00:00Z",
			[]string{"2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z"}},
		{"L in a leap February", "UTC", "0 0 L 2 *", "2027-06-01T00:00:00Z",
			[]string{"2028-02-29T00:00:00Z"}},
		{"L-3", "UTC", "0 0 L-3 * *", "2026-01-01T00:00:00Z",
			[]string{"2026-01-28T00:00:00Z", "2026-02-25T00:00:00Z", "2026-03-28T00:00:00Z"}},
		{"15W moves off weekends", "UTC", "0 0 15W * *", "2026-02-01T00:00:00Z",
			[]string{"2026-02-16T00:00:00Z", "2026-03-16T00:00:00Z", "2026-04-15T00:00:00Z"}},
		{"15W on a Saturday is Friday the 14th", "UTC", "0 0 15w * *", "2026-08-01T00:00:00Z",
			[]string{"2026-08-14T00:00:00Z"}},
		{"1W on a Saturday is Monday the 3rd", "UTC", "0 0 1W * *", "2026-07-15T00:00:00Z",
			[]string{"2026-08-03T00:00:00Z"}},
		{"1W on a Sunday is Monday the 2nd", "UTC", "0 0 1W * *", "2026-01-15T00:00:00Z",
			[]string{"2026-02-02T00:00:00Z"}},
		{"LW is the last weekday", "UTC", "0 0 LW * *", "2026-01-01T00:00:00Z",
			[]string{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-31T00:00:00Z"}},
		{"LW when the month ends on a Sunday", "UTC", "0 0 lw * *", "2026-05-01T00:00:00Z",
			[]string{"2026-05-29T00:00:00Z"}},
		{"5L is the last Friday", "UTC", "0 0 * * 5L", "2026-01-01T00:00:00Z",
			[]string{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-27T00:00:00Z"}},
		{"FRIL, lower case", "UTC", "0 0 * * fril", "2026-01-01T00:00:00Z",
			[]string{"2026-01-30T00:00:00Z"}},
		{"MON#2", "UTC", "0 0 * * MON#2", "2026-01-01T00:00:00Z",
			[]string{"2026-01-12T00:00:00Z", "2026-02-09T00:00:00Z", "2026-03-09T00:00:00Z"}},
		{"7 is Sunday", "UTC", "0 0 * * 7", "2026-01-01T00:00:00Z",
			[]string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"1-7 is every day", "UTC", "0 0 * * 1-7", "2026-01-03T00:00:00Z",
			[]string{"2026-01-04T00:00:00Z", "2026-01-05T00:00:00Z"}},
		{"MON-SUN is every day", "UTC", "0 0 * * MON-SUN", "2026-01-03T00:00:00Z",
			[]string{"2026-01-04T00:00:00Z", "2026-01-05T00:00:00Z"}},
		{"FRI-MON wraps", "UTC", "0 0 * * FRI-MON", "2026-01-07T00:00:00Z",
			[]string{"2026-01-09T00:00:00Z", "2026-01-10T00:00:00Z", "2026-01-11T00:00:00Z", "2026-01-12T00:00:00Z", "2026-01-16T00:00:00Z"}},
		{"NOV-FEB wraps", "UTC", "0 0 1 NOV-FEB *", "2026-03-01T00:00:00Z",
			[]string{"2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z", "2027-11-01T00:00:00Z"}},
		{"31W names no day in April", "UTC", "0 0 31W * *", "2026-04-01T00:00:00Z",
			[]string{"2026-05-29T00:00:00Z"}},
		{"? in day of month with a named day of week", "UTC", "0 0 12 ? * MON-FRI", "2026-01-02T12:00:00Z",
			[]string{"2026-01-05T12:00:00Z"}},
		{"New York past the zone table, last day of a leap year", "America/New_York", "*/5 * * * *", "2040-12-30T18:55:00-05:00",
			[]string{"2040-12-30T19:00:00-05:00", "2040-12-30T19:05:00-05:00"}},
		{"New York past the zone table, into the new year", "America/New_York", "0 */6 * * *", "2040-12-31T12:00:00-05:00",
			[]string{"2040-12-31T18:00:00-05:00", "2041-01-01T00:00:00-05:00"}},
		{"New York DST in 2090", "America/New_York", "30 2 * * *", "2090-03-11T12:00:00-05:00",
			[]string{"2090-03-12T03:00:00-04:00"}},
		// Published by other implementations: cronsim's README (MON#5 in
		// February from 2020) and cronexp's tests (the last Sundays and
		// Mondays of 2019).
		{"cronsim: MON#5 in February from 2020", "UTC", "0 0 * 2 MON#5", "2020-01-01T00:00:00Z",
			[]string{"2044-02-29T00:00:00Z", "2072-02-29T00:00:00Z", "2112-02-29T00:00:00Z", "2140-02-29T00:00:00Z", "2168-02-29T00:00:00Z"}},
		{"cronexp: the last Sundays of 2019", "UTC", "0 0 * * 7L", "2019-01-01T00:00:00Z", monthDays(2019, 27, 24, 31, 28, 26, 30, 28, 25, 29, 27, 24, 29)},
		{"cronexp: the last Mondays of 2019", "UTC", "0 0 * * monL", "2019-01-01T00:00:00Z", monthDays(2019, 28, 25, 25, 29, 27, 24, 29, 26, 30, 28, 25, 30)},
		{"year 9999 edge: far future", "UTC", "0 0 1 1 *", "9998-06-01T00:00:00Z",
			[]string{"9999-01-01T00:00:00Z"}},
	})
}

func TestCronRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec string
		want []string
	}{
		{"0 0 12 ? * 2-6", []string{"day-of-week", "Quartz", "Sunday is 1", "MON-FRI"}},
		{"0 0 12 ? * 1,7", []string{"day-of-week", "SUN,SAT"}},
		{"0 0 12 ? * 2#1", []string{"day-of-week", "MON#1"}},
		{"0 0 12 ? * 0-4", []string{"day-of-week", "SUN-THU"}},
		{"0 0 12 * * ? 2026", []string{"year field"}},
		{"H 2 * * *", []string{"minute", "H (a hashed value"}},
		{"0 24 * * *", []string{"hour", "hour 24 does not exist", "0 for midnight"}},
		{"0 0 30 2 *", []string{"can never fire"}},
		{"0 0 31W 4 *", []string{"can never fire"}},
		{"0 0 * * MON#6", []string{"day-of-week", "k 1-5"}},
		{"* * */20 * 1L", []string{"can never fire"}}, // cronsim's README: the 1st or 21st that is a last Monday
		{"0 0 L-31 * *", []string{"day-of-month", "L-n"}},
		{"0 0 * * L", []string{"day-of-week", "ambiguous"}},
		{"50-10 * * * *", []string{"minute", "runs backwards", "50-59,0-10"}},
		{"0 0 * * 8", []string{"day-of-week", "out of range", "0-7"}},
		{"0 0 * JANUARY *", []string{"month", "not a value", "JAN"}},
		{"0 0 L 2 W", []string{"day-of-week"}},
		{"0 0 0 * *", []string{"day-of-month", "out of range"}},
		{"*/0 * * * *", []string{"minute", "step"}},
		{", * * * *", []string{"minute", "has no value"}},
		{"0 0 , * ?", []string{"day-of-month", "has no value"}},
	} {
		_, err := ParseSchedule(tc.spec, time.UTC, time.Time{})
		if err == nil {
			t.Errorf("ParseSchedule(%q) accepted", tc.spec)
			continue
		}
		if !errors.Is(err, ErrCron) {
			t.Errorf("ParseSchedule(%q) = %v, does not wrap ErrCron", tc.spec, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("ParseSchedule(%q) = %q, want it to contain %q", tc.spec, err, w)
			}
		}
	}
	// Several bad fields: all named at once.
	_, err := ParseSchedule("0 25 * 13 8", time.UTC, time.Time{})
	for _, w := range []string{"hour", "month", "day-of-week"} {
		if err == nil || !strings.Contains(err.Error(), w+" field") {
			t.Errorf("ParseSchedule(\"0 25 * 13 8\") = %v, want it to name the %s field", err, w)
		}
	}
}

// TestCronStillAccepted: what robfig/cron accepted before stays valid.
func TestCronStillAccepted(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"0 2 * * *", "*/5 * * * *", "0 0 * * MON-FRI", "0 0 1,15 * *", "5/10 * * * *", "0 0 ? * *",
		"0 0 12 ? * MON", "30 0 12 * * *", "@daily", "@hourly", "@weekly", "@monthly", "@yearly", "@annually", "@midnight",
		"@every 1s", "@every 1h30m", "0 0 * jan,jul sun", "0 0 12 1-31/2 * *", "  0  2 * *  * ", "0,,5 1, * * 1,", "0 0 1 * ,"} {
		if _, err := ParseSchedule(spec, time.UTC, time.Time{}); err != nil {
			t.Errorf("ParseSchedule(%q): %v", spec, err)
		}
	}
}

// TestScheduleNote: the rule applied on DST days, in words, as ax next
// prints it.
func TestScheduleNote(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ zone, spec, prev, at, want string }{
		{"America/New_York", "30 2 * * *", "2026-03-07T12:00:00-05:00", "2026-03-08T03:00:00-04:00",
			"02:30 does not exist on 2026-03-08; fires at 03:00 (fixed schedule)"},
		{"America/New_York", "30 1 * * *", "2026-10-31T12:00:00-04:00", "2026-11-01T01:30:00-04:00",
			"01:30 occurs twice on 2026-11-01; fires once, at the first (-04:00, fixed schedule)"},
		{"America/New_York", "*/30 * * * *", "2026-11-01T01:10:00-05:00", "2026-11-01T01:30:00-05:00",
			"01:30 occurs twice on 2026-11-01; this is the second (-05:00), a wildcard schedule fires at both"},
		{"America/New_York", "*/30 * * * *", "2026-11-01T00:40:00-04:00", "2026-11-01T01:00:00-04:00",
			"01:00 occurs twice on 2026-11-01; this is the first (-04:00), a wildcard schedule fires at both"},
		{"America/New_York", "*/30 * * * *", "2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00",
			"clocks jump from 02:00 to 03:00 on 2026-03-08; a wildcard schedule skips the times between"},
		{"Australia/Lord_Howe", "15 2 * * *", "2026-10-03T12:00:00+10:30", "2026-10-04T02:30:00+11:00",
			"02:15 does not exist on 2026-10-04; fires at 02:30 (fixed schedule)"},
		{"America/New_York", "30 2 * * *", "2026-03-09T00:00:00-04:00", "2026-03-09T02:30:00-04:00", ""},
		{"America/New_York", "*/30 * * * *", "2026-11-01T02:10:00-05:00", "2026-11-01T02:30:00-05:00", ""},
	} {
		loc := mustLoc(t, tc.zone)
		prev, _ := time.Parse(time.RFC3339, tc.prev)
		at, _ := time.Parse(time.RFC3339, tc.at)
		s, err := ParseSchedule(tc.spec, loc, prev)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Note(prev, at); got != tc.want {
			t.Errorf("%q in %s, fire %s after %s: note %q, want %q", tc.spec, tc.zone, tc.at, tc.prev, got, tc.want)
		}
	}
}

// TestNextAllocationFree: Next is pure arithmetic on the zone's data; it
// allocates nothing, for wildcard and fixed schedules, in and out of DST.
func TestNextAllocationFree(t *testing.T) {
	for _, tc := range []struct{ zone, spec, from string }{
		{"UTC", "*/5 * * * *", "2026-12-01T00:00:00Z"},
		{"America/New_York", "*/5 * * * *", "2026-11-01T01:50:00-04:00"},
		{"America/New_York", "30 2 * * *", "2026-03-07T12:00:00-05:00"},
		{"America/New_York", "30 1 * * *", "2026-11-01T01:10:00-05:00"},
		{"Europe/Berlin", "0 0 L * FRI-MON", "2026-01-01T00:00:00+01:00"},
	} {
		loc := mustLoc(t, tc.zone)
		from, _ := time.Parse(time.RFC3339, tc.from)
		s, err := ParseSchedule(tc.spec, loc, from)
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { _ = s.Next(from) }); n != 0 {
			t.Errorf("%q in %s: Next allocates %.1f times", tc.spec, tc.zone, n)
		}
	}
}

func BenchmarkNext(b *testing.B) {
	loc, _ := time.LoadLocation("America/New_York")
	s, _ := ParseSchedule("*/5 * * * *", loc, time.Time{})
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, loc)
	for b.Loop() {
		at = s.Next(at)
	}
}

// TestCronDSTAgreesWithCronsim: the DST table that cronsim (a simulator
// of Debian's cron) publishes in its tests, for Europe/Riga in 2021 (clocks
// jump 03:00 → 04:00 on March 28 and fall back 04:00 → 03:00 on October 31).
func TestCronDSTAgreesWithCronsim(t *testing.T) {
	t.Parallel()
	const z = "Europe/Riga"
	hourly := "0 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23 * * *"
	runNextCases(t, []nextCase{
		{"0 * oct", z, "0 * * * *", "2021-10-31T01:30:00+03:00", []string{"2021-10-31T02:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T03:00:00+02:00", "2021-10-31T04:00:00+02:00"}},
		{"*/30 mar", z, "*/30 * * * *", "2021-03-28T02:10:00+02:00", []string{"2021-03-28T02:30:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T04:30:00+03:00"}},
		{"*/30 oct", z, "*/30 * * * *", "2021-10-31T02:10:00+03:00", []string{"2021-10-31T02:30:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T03:30:00+03:00", "2021-10-31T03:00:00+02:00", "2021-10-31T03:30:00+02:00", "2021-10-31T04:00:00+02:00"}},
		{"*/15 mar", z, "*/15 * * * *", "2021-03-28T02:40:00+02:00", []string{"2021-03-28T02:45:00+02:00", "2021-03-28T04:00:00+03:00"}},
		{"*/15 oct", z, "*/15 * * * *", "2021-10-31T02:40:00+03:00", []string{"2021-10-31T02:45:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T03:15:00+03:00", "2021-10-31T03:30:00+03:00", "2021-10-31T03:45:00+03:00",
			"2021-10-31T03:00:00+02:00", "2021-10-31T03:15:00+02:00", "2021-10-31T03:30:00+02:00", "2021-10-31T03:45:00+02:00", "2021-10-31T04:00:00+02:00"}},
		{"0 */2 mar", z, "0 */2 * * *", "2021-03-28T01:30:00+02:00", []string{"2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T06:00:00+03:00"}},
		{"0 */2 oct", z, "0 */2 * * *", "2021-10-31T01:30:00+03:00", []string{"2021-10-31T02:00:00+03:00", "2021-10-31T04:00:00+02:00", "2021-10-31T06:00:00+02:00"}},
		{"30 */2 mar", z, "30 */2 * * *", "2021-03-28T01:30:00+02:00", []string{"2021-03-28T02:30:00+02:00", "2021-03-28T04:30:00+03:00"}},
		{"30 */2 oct", z, "30 */2 * * *", "2021-10-31T01:30:00+03:00", []string{"2021-10-31T02:30:00+03:00", "2021-10-31T04:30:00+02:00"}},
		{"0 */3 oct", z, "0 */3 * * *", "2021-10-31T01:30:00+03:00", []string{"2021-10-31T03:00:00+03:00", "2021-10-31T03:00:00+02:00", "2021-10-31T06:00:00+02:00"}},
		{"0 1,2,3,4,5 mar", z, "0 1,2,3,4,5 * * *", "2021-03-28T01:30:00+02:00", []string{"2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"}},
		{"0 1,2,3,4,5 oct", z, "0 1,2,3,4,5 * * *", "2021-10-31T01:30:00+03:00", []string{"2021-10-31T02:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T04:00:00+02:00"}},
		{"30 1,2,3,4,5 mar", z, "30 1,2,3,4,5 * * *", "2021-03-28T01:30:00+02:00", []string{"2021-03-28T02:30:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T04:30:00+03:00"}},
		{"30 1,2,3,4,5 oct", z, "30 1,2,3,4,5 * * *", "2021-10-31T01:30:00+03:00", []string{"2021-10-31T02:30:00+03:00", "2021-10-31T03:30:00+03:00", "2021-10-31T04:30:00+02:00"}},
		{"0 2 mar", z, "0 2 * * *", "2021-03-28T01:30:00+02:00", []string{"2021-03-28T02:00:00+02:00", "2021-03-29T02:00:00+03:00"}},
		{"0 2 oct", z, "0 2 * * *", "2021-10-31T01:30:00+03:00", []string{"2021-10-31T02:00:00+03:00", "2021-11-01T02:00:00+02:00"}},
		{"0 3 mar", z, "0 3 * * *", "2021-03-27T01:30:00+02:00", []string{"2021-03-27T03:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-29T03:00:00+03:00"}},
		{"0 3 oct", z, "0 3 * * *", "2021-10-31T01:30:00+03:00", []string{"2021-10-31T03:00:00+03:00", "2021-11-01T03:00:00+02:00"}},
		{"0 4 mar", z, "0 4 * * *", "2021-03-27T01:30:00+02:00", []string{"2021-03-27T04:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-29T04:00:00+03:00"}},
		{"0 4 oct", z, "0 4 * * *", "2021-10-30T01:30:00+03:00", []string{"2021-10-30T04:00:00+03:00", "2021-10-31T04:00:00+02:00", "2021-11-01T04:00:00+02:00"}},
		{"every hour listed mar", z, hourly, "2021-03-28T01:30:00+02:00", []string{"2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"}},
		{"every hour listed oct", z, hourly, "2021-10-31T01:30:00+03:00", []string{"2021-10-31T02:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T04:00:00+02:00"}},
		{"odd hours mar", z, "0 1,3,5,7,9,11,13,15,17,19,21,23 * * *", "2021-03-28T00:30:00+02:00", []string{"2021-03-28T01:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"}},
		{"odd hours oct", z, "0 1,3,5,7,9,11,13,15,17,19,21,23 * * *", "2021-10-31T00:30:00+03:00", []string{"2021-10-31T01:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T05:00:00+02:00"}},
		{"0 1-5 mar", z, "0 1-5 * * *", "2021-03-28T01:30:00+02:00", []string{"2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"}},
		{"0 1-5 oct", z, "0 1-5 * * *", "2021-10-31T01:30:00+03:00", []string{"2021-10-31T02:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T04:00:00+02:00"}},
		{"15 3 mar", z, "15 3 * * *", "2021-03-27T00:00:00+02:00", []string{"2021-03-27T03:15:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-29T03:15:00+03:00"}},
		{"15 3 oct", z, "15 3 * * *", "2021-10-30T00:00:00+03:00", []string{"2021-10-30T03:15:00+03:00", "2021-10-31T03:15:00+03:00", "2021-11-01T03:15:00+02:00"}},
		{"every minute mar", z, "* * * * *", "2021-03-28T02:58:00+02:00", []string{"2021-03-28T02:59:00+02:00", "2021-03-28T04:00:00+03:00"}},
		{"every minute oct", z, "* * * * *", "2021-10-31T03:58:00+03:00", []string{"2021-10-31T03:59:00+03:00", "2021-10-31T03:00:00+02:00", "2021-10-31T03:01:00+02:00"}},
		{"every minute 1-6 mar", z, "* 1-6 * * *", "2021-03-28T02:58:00+02:00", []string{"2021-03-28T02:59:00+02:00", "2021-03-28T04:00:00+03:00"}},
		{"every minute 1-6 oct", z, "* 1-6 * * *", "2021-10-31T03:58:00+03:00", []string{"2021-10-31T03:59:00+03:00", "2021-10-31T03:00:00+02:00", "2021-10-31T03:01:00+02:00"}},
	})
}
