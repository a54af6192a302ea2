package defs

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOutputsAndUpstreamReads(t *testing.T) {
	t.Parallel()
	src := `pipeline: o
schedule: "@daily"
tasks:
  - {name: extract, command: [x], outputs: [rows, path]}
  - {name: clean, depends_on: [extract], command: [x]}
  - name: load
    depends_on: [clean]
    command: [load, "--rows={{ .Upstream.extract.rows }}", "{{ .Upstream.clean.any }}"]
    env: {SRC: "{{ .Upstream.extract.path }}"}
`
	p, errs := Parse("o.yaml", []byte(src), Options{Now: time.Now()})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	if got := p.Task("extract").Outputs; !slices.Equal(got, []string{"path", "rows"}) {
		t.Errorf("extract declares %v, want [path rows]", got)
	}
	if got := p.Task("load").Reads; !slices.Equal(got, []string{"clean", "extract"}) {
		t.Errorf("load reads %v, want [clean extract] (extract through clean)", got)
	}
	if got := p.Task("clean").Reads; got != nil {
		t.Errorf("clean reads %v, want none", got)
	}
	head := "pipeline: o\nschedule: \"@daily\"\ntasks:\n  - {name: extract, command: [x], outputs: [rows]}\n  - {name: side, command: [x]}\n"
	for _, tc := range []struct{ task, want string }{
		{`{name: load, depends_on: [extract], command: [x, "{{ .Upstream.extract.rws }}"]}`,
			`o.yaml:6:54: task "load": command argument 1 reads {{ .Upstream.extract.rws }}, but extract declares the outputs [rows], not "rws" (did you mean "rows"?)`},
		{`{name: load, depends_on: [extract], command: [x, "{{ .Upstream.extrct.rows }}"]}`,
			`command argument 1 reads {{ .Upstream.extrct.rows }}, but "extrct" is no task of the pipeline (did you mean "extract"?)`},
		{`{name: load, depends_on: [extract], command: [x, "{{ .Upstream.side.rows }}"]}`,
			`o.yaml:6:54: task "load": command argument 1 reads {{ .Upstream.side.rows }}, but "side" is not an upstream of load: read the outputs of a task it depends on`},
		{`{name: load, depends_on: [extract], command: [x], env: {A: "{{ .Upstream.side.rows }}"}}`,
			`task "load": env A reads {{ .Upstream.side.rows }}, but "side" is not an upstream of load`},
		{`{name: load, command: [x], outputs: ["a=b"]}`, `o.yaml:6:42: task "load": output key "a=b" is not a name`},
		{`{name: load, command: [x], outputs: ["a\nb"]}`, `output key "a\nb" is not a name`},
		{`{name: load, command: [x], outputs: [rows, rows]}`, `output key "rows" is declared twice`},
		{`{name: load, command: [x], outputs: rows}`, `outputs must be a list of the keys the task gives its downstream`},
	} {
		src := head + "  - " + tc.task + "\n"
		p, errs := Parse("o.yaml", []byte(src), Options{Now: time.Now()})
		if errs.Err() == nil || !strings.Contains(errs.Err().Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %q", tc.task, errs.Err(), tc.want)
		}
		if p != nil && errs.Err() == nil {
			t.Errorf("%s: a pipeline with no error", tc.task)
		}
	}
	_, errs = Parse("o.yaml", []byte("pipeline: o\nschedule: \"@daily\"\ndefaults: {outputs: [a]}\ntasks:\n  - {name: a, command: [x]}\n"), Options{Now: time.Now()})
	if errs.Err() == nil || !strings.Contains(errs.Err().Error(), `"outputs" cannot have a default`) {
		t.Errorf("outputs in defaults: %v", errs.Err())
	}
}

// .Upstream read as a whole (by index, by range) cannot be followed, and is
// refused: the scheduler gives a task only the outputs it names.
func TestUpstreamReadWhole(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{`{{ index .Upstream "clean-orders" "rows" }}`, `{{ range .Upstream }}x{{ end }}`, `{{ .Upstream }}`} {
		src := "pipeline: o\nschedule: \"@daily\"\ntasks:\n  - {name: a, command: [x]}\n  - {name: b, depends_on: [a], command: [x, '" + arg + "']}\n"
		_, errs := Parse("o.yaml", []byte(src), Options{Now: time.Now()})
		if errs.Err() == nil || !strings.Contains(errs.Err().Error(), `o.yaml:5:45: task "b": command argument 1 cannot be expanded: reads .Upstream as a whole: read one output as {{ .Upstream.TASK.KEY }}`) {
			t.Errorf("%s: %v", arg, errs.Err())
		}
	}
}
