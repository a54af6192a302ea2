package runner

import (
	"slices"
	"testing"
	"text/template"
	"time"

	"github.com/ax-sched/ax/defs"
)

// The date helpers of command templates, on the logical time in the
// pipeline's zone; expected values written by hand.
func TestTemplateDateHelpers(t *testing.T) {
	t.Parallel()
	sh, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	daily, err := defs.ParseSchedule("0 2 * * *", sh, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// 2026-12-01 02:00 in Shanghai is 2026-11-30 18:00 UTC.
	a := Attempt{Pipeline: "p", Task: "t", Ticket: "tk", LogicalTime: time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC).In(sh),
		Params: map[string]any{"region": "cn", "day": "20261129"}}
	tests := []struct{ tmpl, want string }{
		{"{{ .LogicalTime }}", "2026-12-01T02:00:00+08:00"},
		{"{{ .LogicalTime.Date }}", "2026-12-01"},
		{"{{ (.LogicalTime.AddDays -1).Compact }}", "20261130"},
		{"{{ (.LogicalTime.AddDays 1).Format \"2006/01/02\" }}", "2026/12/02"},
		{"{{ (.LogicalTime.AddHours -3).Format \"15:04\" }}", "23:00"},
		{"{{ .LogicalTime.Prev.Format \"2006-01-02T15:04\" }}", "2026-11-30T02:00"},
		{"{{ .LogicalTime.Next }}", "2026-12-02T02:00:00+08:00"},
		{"{{ .LogicalTime.Unix }}", "1796061600"}, // date -d 2026-11-30T18:00Z +%s,
		{"{{ .Params.region }}-{{ .Params.day }}", "cn-20261129"},
		{"{{ .Pipeline }}.{{ .Task }} {{ .Ticket }}", "p.t tk"},
	}
	for _, tc := range tests {
		tmpl := template.Must(template.New("t").Option("missingkey=error").Parse(tc.tmpl))
		argv, err := render(CommandSpec{Argv: []string{"echo", tc.tmpl}, Templates: []*template.Template{nil, tmpl}, Schedule: daily}, a)
		if err != nil || argv[1] != tc.want {
			t.Errorf("%s = %q, %v; want %q", tc.tmpl, argv, err, tc.want)
		}
	}
	// Without a schedule, Prev is an error that says so.
	tmpl := template.Must(template.New("t").Parse("{{ .LogicalTime.Prev }}"))
	if _, err := render(CommandSpec{Argv: []string{"echo", "x"}, Templates: []*template.Template{nil, tmpl}}, a); err == nil {
		t.Error("Prev without a schedule: no error")
	}
}

// TestCommandResultKeepsRenderedArgv: a command's result carries the argv
// it ran, templates rendered, whether it exits 0 or not; a start failure
// carries it too.
func TestCommandResultKeepsRenderedArgv(t *testing.T) {
	t.Parallel()
	a := Attempt{Pipeline: "p", Task: "t", Ticket: "tk", LogicalTime: time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC), Params: map[string]any{"code": "3"}}
	for _, tc := range []struct {
		argv []string
		want []string
	}{
		{[]string{"sh", "-c", "exit {{ .Params.code }}", "{{ .LogicalTime.Date }}"}, []string{"sh", "-c", "exit 3", "2026-03-01"}},
		{[]string{"true", "{{ .Task }}"}, []string{"true", "t"}},
		{[]string{"/nonexistent/ax-{{ .Task }}"}, []string{"/nonexistent/ax-t"}},
	} {
		tmpls := make([]*template.Template, len(tc.argv))
		for i, s := range tc.argv {
			tmpls[i] = template.Must(template.New("t").Option("missingkey=error").Parse(s))
		}
		c := NewCommands(func(Attempt) (CommandSpec, error) { return CommandSpec{Argv: tc.argv, Templates: tmpls}, nil })
		res, err := c.Execute(t.Context(), a)
		if err != nil || !slices.Equal(res.Argv, tc.want) {
			t.Errorf("%q ran as %q (%v, %s); want %q", tc.argv, res.Argv, err, res.Error, tc.want)
		}
	}
}
