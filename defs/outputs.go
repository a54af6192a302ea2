package defs

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// outputKeyRe is the shape of an output's key: a name a template reads as
// {{ .Upstream.TASK.KEY }}.
var outputKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidOutputKey reports whether key may name an output: letters, digits
// and _, not starting with a digit.
func ValidOutputKey(key string) bool { return outputKeyRe.MatchString(key) }

// UpstreamRef is what a template reads of an upstream's outputs:
// {{ .Upstream.Task.Key }} (Key "" for the whole map).
type UpstreamRef struct {
	Task, Key string
}

// readRef is an UpstreamRef found in a template of task, written at node
// (what names the template: "command argument 2", "env X").
type readRef struct {
	task *Task
	node *yaml.Node
	what string
	ref  UpstreamRef
}

// outputs reads a task's `outputs: [rows, path]`.
func (p *parser) outputs(v *yaml.Node, task string) []string {
	if v.Kind != yaml.SequenceNode {
		p.errorf(v, task, "outputs must be a list of the keys the task gives its downstream, such as [rows, path], not a %s", kindName(v))
		return nil
	}
	out := []string{}
	for _, item := range v.Content {
		s, ok := p.str(item, task, "outputs entry")
		switch {
		case !ok:
		case !ValidOutputKey(s):
			p.errorf(item, task, "output key %q is not a name: use letters, digits and _ (not starting with a digit), as {{ .Upstream.%s.KEY }} reads it", s, task)
		case slices.Contains(out, s):
			p.errorf(item, task, "output key %q is declared twice: remove one", s)
		default:
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// noteReads keeps what a template of t at node reads of its upstreams'
// outputs, checked once every task of the pipeline is known (checkReads).
func (p *parser) noteReads(t *Task, node *yaml.Node, what string, refs []UpstreamRef) {
	for _, r := range refs {
		p.reads = append(p.reads, readRef{task: t, node: node, what: what, ref: r})
	}
}

// checkReads checks every output a template reads: its task is an
// upstream of the reader in the same pipeline (transitively), and the key
// is one it declares, when it declares its outputs. Each task's Reads are
// set from those that pass.
func (p *parser) checkReads(pl *Pipeline) {
	reads := p.reads
	p.reads = nil
	for _, r := range reads {
		ups := upstreamsOf(pl, r.task)
		name, key := r.ref.Task, r.ref.Key
		shown := "{{ .Upstream." + name + strings.TrimSuffix("."+key, ".") + " }}"
		if !slices.Contains(ups, name) {
			why := "is no task of the pipeline"
			if _, ok := pl.byName[name]; ok {
				why = "is not an upstream of " + r.task.Name
			}
			p.errorf(r.node, r.task.Name, "%s reads %s, but %q %s%s: read the outputs of a task it depends on (depends_on, directly or through others)",
				r.what, shown, name, why, didYouMean(name, ups))
			continue
		}
		if decl := pl.byName[name].Outputs; decl != nil && key != "" && !slices.Contains(decl, key) {
			p.errorf(r.node, r.task.Name, "%s reads %s, but %s declares the outputs [%s], not %q%s: read a declared key, or add it to %s's outputs",
				r.what, shown, name, strings.Join(decl, ", "), key, didYouMean(key, decl), name)
			continue
		}
		if !slices.Contains(r.task.Reads, name) {
			r.task.Reads = append(r.task.Reads, name)
			slices.Sort(r.task.Reads)
		}
	}
}

// upstreamsOf returns the tasks of pl that t depends on, directly or
// through others, sorted.
func upstreamsOf(pl *Pipeline, t *Task) []string {
	seen := map[string]bool{}
	var walk func(*Task)
	walk = func(t *Task) {
		for _, d := range t.DependsOn {
			if d.Pipeline != "" && d.Pipeline != pl.Name || seen[d.Task] {
				continue
			}
			seen[d.Task] = true
			if u := pl.byName[d.Task]; u != nil {
				walk(u)
			}
		}
	}
	walk(t)
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// sampleUpstream is the outputs the templates are tried with at
// validation: a sample value for each read.
func sampleUpstream(refs []UpstreamRef) map[string]map[string]string {
	up := map[string]map[string]string{}
	for _, r := range refs {
		if up[r.Task] == nil {
			up[r.Task] = map[string]string{}
		}
		if r.Key != "" {
			up[r.Task][r.Key] = fmt.Sprintf("sample-%s", r.Key)
		}
	}
	return up
}
