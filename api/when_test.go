package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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
