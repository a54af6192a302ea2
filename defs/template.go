package defs

import (
	"fmt"
	"slices"
	"strings"
	"text/template"
	"time"
)

// TemplateData is what a command's templates see: `{{ .LogicalTime }}`,
// `{{ .Params.NAME }}` (the task's params with a trigger's --param values
// over them), `{{ .Task }}`, `{{ .Pipeline }}` and `{{ .Ticket }}`.
type TemplateData struct {
	LogicalTime Moment
	Params      map[string]any
	Task        string
	Pipeline    string
	Ticket      string
	// Upstream holds the outputs of the run's upstream tasks, by task name
	// then key: {{ .Upstream.clean_orders.rows }}.
	Upstream map[string]map[string]string
}

// Moment is the logical time as templates see it: a time in the pipeline's
// zone that prints as RFC 3339 and has the date helpers a data pipeline
// needs, for example the day before as 20261130:
//
//	{{ (.LogicalTime.AddDays -1).Format "20060102" }}
//
// Prev and Next are the schedule's fires before and after it.
type Moment struct {
	t     time.Time
	sched *Schedule
}

// NewMoment returns t in loc, with the schedule that fires the task (nil:
// none, and Prev and Next are errors).
func NewMoment(t time.Time, loc *time.Location, s *Schedule) Moment {
	if loc != nil {
		t = t.In(loc)
	}
	return Moment{t: t, sched: s}
}

// String is the time in RFC 3339, with the zone's offset.
func (m Moment) String() string { return m.t.Format(time.RFC3339) }

// Time returns the moment as a time.Time.
func (m Moment) Time() time.Time { return m.t }

// Format formats the moment with a Go layout ("2006-01-02", "20060102").
func (m Moment) Format(layout string) string { return m.t.Format(layout) }

// Date is the calendar date, 2006-01-02.
func (m Moment) Date() string { return m.t.Format(time.DateOnly) }

// Compact is the calendar date without dashes, 20060102.
func (m Moment) Compact() string { return m.t.Format("20060102") }

// Unix is the moment in seconds since 1970.
func (m Moment) Unix() int64 { return m.t.Unix() }

// AddDays moves by n calendar days in the zone (the wall-clock time stays
// across daylight-saving changes).
func (m Moment) AddDays(n int) Moment { return Moment{t: m.t.AddDate(0, 0, n), sched: m.sched} }

// AddHours moves by n hours of real time.
func (m Moment) AddHours(n int) Moment {
	return Moment{t: m.t.Add(time.Duration(n) * time.Hour), sched: m.sched}
}

// Prev is the schedule's latest fire before the moment.
func (m Moment) Prev() (Moment, error) {
	if m.sched == nil {
		return m, fmt.Errorf("LogicalTime.Prev: the task has no schedule")
	}
	p := m.sched.Prev(m.t)
	if p.IsZero() {
		return m, fmt.Errorf("LogicalTime.Prev: %q has no fire before %s", m.sched.Spec(), m)
	}
	return Moment{t: p.In(m.t.Location()), sched: m.sched}, nil
}

// Next is the schedule's first fire after the moment.
func (m Moment) Next() (Moment, error) {
	if m.sched == nil {
		return m, fmt.Errorf("LogicalTime.Next: the task has no schedule")
	}
	n := m.sched.Next(m.t)
	if n.IsZero() {
		return m, fmt.Errorf("LogicalTime.Next: %q never fires after %s", m.sched.Spec(), m)
	}
	return Moment{t: n.In(m.t.Location()), sched: m.sched}, nil
}

// Prev returns the latest fire strictly before t, or the zero time when
// there is none within ten years. It looks back as far as the next fire is
// ahead, then four times as far, and so on, the last look covering the whole
// ten years (a schedule whose next fire is decades away may have fired
// last month).
func (s *Schedule) Prev(t time.Time) time.Time {
	const limit = 10 * 366 * 24 * time.Hour
	gap := time.Second
	if n := s.Next(t); !n.IsZero() && n.Sub(t) > gap {
		gap = n.Sub(t)
	}
	for span := min(gap, limit); ; span = min(span*4, limit) {
		var last time.Time
		for at := s.Next(t.Add(-span)); !at.IsZero() && at.Before(t); at = s.Next(at) {
			last = at
		}
		if !last.IsZero() {
			return last
		}
		if span == limit {
			return time.Time{}
		}
	}
}

// TemplateHelp lists what templates may use, for error messages.
const TemplateHelp = "{{ .LogicalTime }} (with .Format \"20060102\", .Date, .Compact, .AddDays N, .AddHours N, .Prev, .Next, .Unix), {{ .Params.NAME }}, {{ .Upstream.TASK.KEY }}, {{ .Task }}, {{ .Pipeline }}, {{ .Ticket }}"

// checkTemplate names what keeps tmpl from executing: every field, helper
// and param it cannot resolve (each with a suggestion), or else the error of
// executing it on sample data (a helper called wrongly), so that a template
// that cannot execute is a validation error rather than a failure at run
// time. It returns nil when tmpl executes.
func checkTemplate(tmpl *template.Template, t *Task, pl *Pipeline, sched *Schedule) ([]string, []UpstreamRef) {
	problems, refs := staticProblems(tmpl, t.Params)
	if len(problems) > 0 {
		return problems, refs
	}
	loc := pl.Location
	if loc == nil {
		loc = time.UTC
	}
	if sched == nil { // fired by another task's cron: sample with a daily schedule
		sched, _ = ParseSchedule("@daily", loc, time.Time{})
	}
	params := t.Params
	if params == nil {
		params = map[string]any{}
	}
	data := TemplateData{LogicalTime: NewMoment(time.Date(2026, 1, 15, 2, 0, 0, 0, loc), loc, sched), Params: params,
		Task: t.Name, Pipeline: pl.Name, Ticket: "0123456789abcdef0123456789abcdef", Upstream: sampleUpstream(refs)}
	var b strings.Builder
	err := tmpl.Execute(&b, data)
	if err == nil {
		return nil, refs
	}
	msg := err.Error()
	if i := strings.Index(msg, "map has no entry for key "); i >= 0 && strings.Contains(msg, ".Params.") {
		key := strings.Trim(msg[i+len("map has no entry for key "):], `"`)
		names := make([]string, 0, len(params))
		for k := range params {
			names = append(names, k)
		}
		slices.Sort(names)
		return []string{undeclaredParam(key, names)}, refs
	}
	return []string{msg}, refs
}
