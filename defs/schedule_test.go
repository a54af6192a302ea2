package defs

import (
	"strings"
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestScheduleDST pins the decided behaviour around DST changes: on
// fall-back a wall time that occurs twice fires once, at its first
// occurrence; on spring-forward a wall time inside the gap fires once, at the
// first instant after the gap.
func TestScheduleDST(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		zone string
		spec string
		from string // RFC 3339
		want []string
	}{
		{"NY 02:30 spring-forward fires at gap end", "America/New_York", "30 2 * * *", "2026-03-07T00:00:00-05:00",
			[]string{"2026-03-07T02:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"NY 01:30 spring-forward unaffected", "America/New_York", "30 1 * * *", "2026-03-07T00:00:00-05:00",
			[]string{"2026-03-07T01:30:00-05:00", "2026-03-08T01:30:00-05:00", "2026-03-09T01:30:00-04:00"}},
		{"NY 01:30 fall-back fires once", "America/New_York", "30 1 * * *", "2026-10-31T00:00:00-04:00",
			[]string{"2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"NY 02:30 fall-back unaffected", "America/New_York", "30 2 * * *", "2026-10-31T00:00:00-04:00",
			[]string{"2026-10-31T02:30:00-04:00", "2026-11-01T02:30:00-05:00", "2026-11-02T02:30:00-05:00"}},
		{"NY from inside the repeated hour", "America/New_York", "30 1 * * *", "2026-11-01T01:10:00-05:00",
			[]string{"2026-11-02T01:30:00-05:00"}},
		{"Berlin 02:30 spring-forward fires at gap end", "Europe/Berlin", "30 2 * * *", "2026-03-28T00:00:00+01:00",
			[]string{"2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"Berlin 01:30 spring-forward unaffected", "Europe/Berlin", "30 1 * * *", "2026-03-28T00:00:00+01:00",
			[]string{"2026-03-28T01:30:00+01:00", "2026-03-29T01:30:00+01:00", "2026-03-30T01:30:00+02:00"}},
		{"Berlin 02:30 fall-back fires once", "Europe/Berlin", "30 2 * * *", "2026-10-24T00:00:00+02:00",
			[]string{"2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"Berlin 01:30 fall-back unaffected", "Europe/Berlin", "30 1 * * *", "2026-10-24T00:00:00+02:00",
			[]string{"2026-10-24T01:30:00+02:00", "2026-10-25T01:30:00+02:00", "2026-10-26T01:30:00+01:00"}},
		{"every 15 min collapses the gap into one fire", "America/New_York", "*/15 * * * *", "2026-03-08T01:40:00-05:00",
			[]string{"2026-03-08T01:45:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:15:00-04:00"}},
		{"every 15 min: fires in both passes of the repeated hour (wildcard)", "America/New_York", "*/15 * * * *", "2026-11-01T01:40:00-04:00",
			[]string{"2026-11-01T01:45:00-04:00", "2026-11-01T01:00:00-05:00"}},
		{"@every keeps real time across fall-back", "America/New_York", "@every 30m", "2026-11-01T01:00:00-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:30:00-05:00"}},
		{"seconds field", "UTC", "30 0 12 * * *", "2026-01-01T12:00:30Z",
			[]string{"2026-01-02T12:00:30Z"}},
		{"descriptor in zone", "Asia/Shanghai", "@daily", "2026-01-01T00:00:00+08:00",
			[]string{"2026-01-02T00:00:00+08:00"}},
	} {
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
			if len(got) != len(tc.want) {
				t.Fatalf("got %d times, want %d", len(got), len(tc.want))
			}
			for i, g := range got {
				if g.Format(time.RFC3339) != tc.want[i] {
					t.Errorf("fire %d = %s, want %s", i, g.Format(time.RFC3339), tc.want[i])
				}
				if g.Location() != loc {
					t.Errorf("fire %d is in %s, want %s", i, g.Location(), loc)
				}
			}
		})
	}
}

func TestParseScheduleErrors(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ spec, want string }{
		{"", "is empty"},
		{"@every 0s", "below the one-second tick"},
		{"@every 500ms", "below the one-second tick"},
		{"@every soon", "@every needs a Go duration"},
		{"CRON_TZ=", "time zone prefix"},
		{"TZ=UTC 0 2 * * *", "time zone prefix"},
		{"0 0 30 2 *", "can never fire"},
		{"0 0 31 4 *", "can never fire"},
		{"1 2 3", "cannot parse"},
		{"@fortnightly", "cannot parse"},
	} {
		_, err := ParseSchedule(tc.spec, time.UTC, now)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSchedule(%q) = %v, want an error containing %q", tc.spec, err, tc.want)
		}
	}
	// Feb 29 is possible: it fires in the next leap year.
	if _, err := ParseSchedule("0 0 29 2 *", time.UTC, now); err != nil {
		t.Errorf("Feb 29: %v", err)
	}
}

// `?` is documented as the same as `*`, but a `?` minute or hour field made
// a schedule fixed for daylight saving: `0 ? * * *` in New York lost the
// repeated 01:00 hour of the fall-back day (2 fires between 00:00 EDT and
// 02:59 EST instead of 3), `? 1 * * *` 60 minutes of 120.
func TestQuestionMarkIsWildcardForDST(t *testing.T) {
	t.Parallel()
	loc := mustLoc(t, "America/New_York")
	from := time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC) // 00:00 EDT
	end := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)  // 03:00 EST
	for spec, want := range map[string]int{"0 ? * * *": 3, "? 1 * * *": 120, "0 0 ? * * *": 3} {
		s, err := ParseSchedule(spec, loc, from)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, at := range s.NextN(from, 400) {
			if at.Before(end) {
				n++
			}
		}
		if n != want {
			t.Errorf("%q: %d fires from 00:00 EDT to 03:00 EST on the fall-back day, want %d (as with *)", spec, n, want)
		}
	}
}
