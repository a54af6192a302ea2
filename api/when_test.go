package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/defs"
)

// parseAt reads the logical time of a trigger or a mark. A date alone is
// midnight in the pipeline's zone; it was refused in every zone, UTC
// included, as "occurs twice (daylight saving ends)", because an hour
// later is still the same date. Wall times the zone skips or repeats are
// still refused, naming the offsets to add.
func TestParseAt(t *testing.T) {
	t.Parallel()
	zone := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	ny, sh := zone("America/New_York"), zone("Asia/Shanghai")
	for _, tc := range []struct {
		in   string
		loc  *time.Location
		want string // RFC 3339, or the error's text
	}{
		{"2026-12-01", time.UTC, "2026-12-01T00:00:00Z"},
		{"2026-12-01", sh, "2026-12-01T00:00:00+08:00"},
		{"2026-06-15", ny, "2026-06-15T00:00:00-04:00"},
		{"2026-11-01", ny, "2026-11-01T00:00:00-04:00"}, // the fall-back day: midnight occurs once
		{"2026-12-01T02:00:00", sh, "2026-12-01T02:00:00+08:00"},
		{"2026-12-01T02:00", sh, "2026-12-01T02:00:00+08:00"},
		{"2026-12-01T02:00:00Z", sh, "2026-12-01T02:00:00Z"},
		{"2026-03-08T02:30:00", ny, `"2026-03-08T02:30:00" does not occur in America/New_York`},
		{"2026-11-01T01:30:00", ny, `"2026-11-01T01:30:00" occurs twice in America/New_York (daylight saving ends): add the offset, 2026-11-01T01:30:00-04:00 or 2026-11-01T01:30:00-05:00`},
		{"2026-11-01T01:30", ny, "occurs twice in America/New_York"},
		{"2026-13-01", time.UTC, "is not a logical time"},
		{"9999-12-31T23:59:59", ny, "is outside the logical times ax keeps"},
		{"1969-12-31T23:59:59Z", ny, "is outside the logical times ax keeps"},
		{"1970-01-01T00:00:00Z", ny, "1970-01-01T00:00:00Z"},
	} {
		got, err := ParseAt(tc.in, tc.loc)
		_, perr := time.Parse(time.RFC3339, tc.want)
		switch wantTime := perr == nil; {
		case wantTime && err != nil:
			t.Errorf("ParseAt(%q, %s): %v, want %s", tc.in, tc.loc, err, tc.want)
		case wantTime && got.Format(time.RFC3339) != tc.want:
			t.Errorf("ParseAt(%q, %s) = %s, want %s", tc.in, tc.loc, got.Format(time.RFC3339), tc.want)
		case !wantTime && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ParseAt(%q, %s) = %s, %v; want an error with %q", tc.in, tc.loc, got, err, tc.want)
		}
	}
}

// writeJSON of what JSON cannot carry (a run of a trigger at year 10000 UTC,
// accepted before inRange) answered 200 with an empty body, which every
// client read as "unexpected end of JSON input". It is a 500 naming why.
func TestWriteJSONUnencodable(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, struct{ At time.Time }{time.Date(10000, 1, 1, 4, 59, 59, 0, time.UTC)})
	var body ErrorBody
	err := json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != http.StatusInternalServerError || err != nil || !strings.Contains(body.Error, "cannot be written as JSON") ||
		!strings.Contains(body.Error, "year outside of range [0,9999]") {
		t.Errorf("unencodable answer: %d %q (%v); want 500 with an error naming why", rec.Code, rec.Body.String(), err)
	}
}

// FireAt: a date alone is the schedule's fire on that date, in its zone
// (it was midnight: a run beside the scheduled one, matching no
// downstream); a date with no fire or several is refused, listing them; a
// date-time is taken as given; with no schedule a date is its midnight.
func TestFireAt(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	sched := func(spec string, loc *time.Location) *defs.Schedule {
		s, err := defs.ParseSchedule(spec, loc, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	daily, parisDaily := sched("0 2 * * *", time.UTC), sched("0 2 * * *", paris)
	for _, tc := range []struct {
		name  string
		in    string
		sched *defs.Schedule
		loc   *time.Location
		want  string // RFC 3339, or the error's text
	}{
		{"the fire of the date", "2026-12-03", daily, time.UTC, "2026-12-03T02:00:00Z"},
		{"in the pipeline's zone", "2026-12-03", parisDaily, paris, "2026-12-03T02:00:00+01:00"},
		{"a date-time as given", "2026-12-03T05:00:00", daily, time.UTC, "2026-12-03T05:00:00Z"},
		{"no schedule: midnight", "2026-12-03", nil, paris, "2026-12-03T00:00:00+01:00"},
		{"no fire that date", "2026-12-03", sched("0 2 * * 1", time.UTC), time.UTC,
			`"2026-12-03": the schedule "0 2 * * 1" does not fire on that date in UTC: give a date-time, or a date it fires on (next: 2026-12-07)`},
		{"several fires", "2026-12-03", sched("0 0,8,16 * * *", time.UTC), time.UTC,
			`"2026-12-03": the schedule "0 0,8,16 * * *" fires 3 times that date in UTC (00:00:00, 08:00:00, 16:00:00): give the time, e.g. 2026-12-03T00:00:00`},
		{"many fires", "2026-12-03", sched("* * * * * *", time.UTC), time.UTC, `fires more than 1000 times that date in UTC (00:00:00, 00:00:01, 00:00:02, 00:00:03)`},
		{"not a time", "someday", daily, time.UTC, `"someday" is not a logical time`},
	} {
		got, err := FireAt(tc.in, tc.sched, tc.loc)
		_, perr := time.Parse(time.RFC3339, tc.want)
		switch wantTime := perr == nil; {
		case wantTime && err != nil:
			t.Errorf("%s: FireAt(%q): %v, want %s", tc.name, tc.in, err, tc.want)
		case wantTime && got.Format(time.RFC3339) != tc.want:
			t.Errorf("%s: FireAt(%q) = %s, want %s", tc.name, tc.in, got.Format(time.RFC3339), tc.want)
		case !wantTime && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: FireAt(%q) = %s, %v; want an error with %q", tc.name, tc.in, got, err, tc.want)
		}
	}
}
