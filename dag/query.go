package dag

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ax-sched/ax/defs"
	"github.com/dominikbraun/graph"
)

// Lib returns the graph as a github.com/dominikbraun/graph value, keyed by
// `pipeline.task`, with an edge from each upstream to its downstream, for
// callers that want the library's general algorithms. It is built on first
// use: at 10,000 tasks and 20,000 edges the library's per-edge bookkeeping
// costs more than all of compilation, and no hot path needs it.
func (g *Graph) Lib() graph.Graph[string, *defs.Task] {
	g.libOnce.Do(func() { g.lib = g.libOf(nil) })
	return g.lib
}

// libOf builds the library's graph of the nodes marked in include (every
// node when include is nil) and the edges between them.
func (g *Graph) libOf(include []bool) graph.Graph[string, *defs.Task] {
	in := func(i int) bool { return include == nil || include[i] }
	lib := graph.New(func(t *defs.Task) string { return t.ID() }, graph.Directed())
	for i, t := range g.tasks {
		if in(i) {
			_ = lib.AddVertex(t) // ids are unique: defs refused duplicates
		}
	}
	for i, ups := range g.up {
		for _, j := range ups {
			if in(i) && in(j) {
				_ = lib.AddEdge(g.ids[j], g.ids[i]) // both vertices exist; no duplicate edges
			}
		}
	}
	return lib
}

// Pipelines returns the pipelines, sorted by name.
func (g *Graph) Pipelines() []*defs.Pipeline { return g.pipelines }

// Pipeline returns the pipeline called name, or nil.
func (g *Graph) Pipeline(name string) *defs.Pipeline { return g.byName[name] }

// Triggers returns every schedule with its run set.
func (g *Graph) Triggers() []*Trigger { return g.triggers }

// TriggerOf returns the schedule whose run set holds the task with the
// global id `pipeline.task`, or nil when none does (it runs only when an
// operator runs it). Validation makes it at most one.
func (g *Graph) TriggerOf(id string) *Trigger {
	if i, ok := g.index[id]; ok && i < len(g.triggerOf) {
		return g.triggerOf[i]
	}
	return nil
}

// Task returns the task with the global id `pipeline.task`, or nil.
func (g *Graph) Task(id string) *defs.Task {
	if i, ok := g.index[id]; ok {
		return g.tasks[i]
	}
	return nil
}

// Order returns every task in topological order (upstreams first; ties by
// priority, then name).
func (g *Graph) Order() []*defs.Task {
	out := make([]*defs.Task, len(g.order))
	for k, i := range g.order {
		out[k] = g.tasks[i]
	}
	return out
}

// Upstream returns the tasks the task with the given id depends on, in
// depends_on order, other pipelines' included.
func (g *Graph) Upstream(id string) []*defs.Task { return g.list(g.up, id) }

// Downstream returns the tasks that depend directly on the task with the given id.
func (g *Graph) Downstream(id string) []*defs.Task { return g.list(g.down, id) }

func (g *Graph) list(adj [][]int, id string) []*defs.Task {
	i, ok := g.index[id]
	if !ok {
		return nil
	}
	out := make([]*defs.Task, len(adj[i]))
	for k, j := range adj[i] {
		out[k] = g.tasks[j]
	}
	return out
}

// downstream returns i and every node below it in the same pipeline, unordered.
func (g *Graph) downstream(i int, samePipeline bool) []int { return g.reach(i, g.down, samePipeline) }

func (g *Graph) reach(i int, adj [][]int, samePipeline bool) []int {
	pipe := g.tasks[i].Pipeline
	seen := map[int]bool{i: true}
	out := []int{i}
	for k := 0; k < len(out); k++ {
		for _, j := range adj[out[k]] {
			if !seen[j] && (!samePipeline || g.tasks[j].Pipeline == pipe) {
				seen[j] = true
				out = append(out, j)
			}
		}
	}
	return out
}

// Layers returns the pipeline's tasks by topological layer: layer 0 has the
// tasks with no upstream in the pipeline, layer k those whose longest chain of
// upstreams in the pipeline has length k. Each layer is sorted by priority,
// then name. Cross-pipeline upstreams do not count.
func (g *Graph) Layers(pipeline string) [][]*defs.Task {
	var layers [][]*defs.Task
	depth := map[int]int{}
	for _, i := range g.order {
		t := g.tasks[i]
		if t.Pipeline != pipeline {
			continue
		}
		d := 0
		for _, j := range g.up[i] {
			if g.tasks[j].Pipeline == pipeline {
				d = max(d, depth[j]+1)
			}
		}
		depth[i] = d
		for len(layers) <= d {
			layers = append(layers, nil)
		}
		layers[d] = append(layers[d], t)
	}
	for _, l := range layers {
		slices.SortFunc(l, func(a, b *defs.Task) int {
			return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Name, b.Name))
		})
	}
	return layers
}

// Select returns the tasks of pipeline named by expr, in topological order.
// expr is a comma-separated union of terms: `task`, `task+` (with everything
// downstream), `+task` (with everything upstream), `+task+`, `group:NAME`.
// Only edges inside the pipeline are followed. An empty expr selects every task.
func (g *Graph) Select(pipeline, expr string) ([]*defs.Task, error) {
	p := g.byName[pipeline]
	if p == nil {
		names := make([]string, len(g.pipelines))
		for i, q := range g.pipelines {
			names[i] = q.Name
		}
		return nil, fmt.Errorf("dag: unknown pipeline %q%s", pipeline, defs.DidYouMean(pipeline, names))
	}
	chosen := map[int]bool{}
	if strings.TrimSpace(expr) == "" {
		for _, t := range p.Tasks {
			chosen[g.index[t.ID()]] = true
		}
	}
	for term := range strings.SplitSeq(expr, ",") {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		if group, ok := strings.CutPrefix(term, "group:"); ok {
			var groups []string
			n := 0
			for _, t := range p.Tasks {
				groups = append(groups, t.Group)
				if t.Group == group {
					chosen[g.index[t.ID()]] = true
					n++
				}
			}
			if n == 0 {
				return nil, fmt.Errorf("dag: select %q: pipeline %q has no task in group %q%s", term, pipeline, group, defs.DidYouMean(group, groups))
			}
			continue
		}
		name, up := strings.CutPrefix(term, "+")
		name, down := strings.CutSuffix(name, "+")
		t := p.Task(name)
		if t == nil {
			return nil, fmt.Errorf("dag: select %q: pipeline %q has no task %q%s", term, pipeline, name, defs.DidYouMean(name, p.TaskNames()))
		}
		i := g.index[t.ID()]
		chosen[i] = true
		if down {
			for _, j := range g.reach(i, g.down, true) {
				chosen[j] = true
			}
		}
		if up {
			for _, j := range g.reach(i, g.up, true) {
				chosen[j] = true
			}
		}
	}
	var out []*defs.Task
	for _, i := range g.order {
		if chosen[i] {
			out = append(out, g.tasks[i])
		}
	}
	return out, nil
}

// WriteDOT writes the pipeline's graph in Graphviz DOT, deterministically:
// nodes in topological order, edges sorted. Upstreams in other pipelines are
// drawn dashed.
func (g *Graph) WriteDOT(w io.Writer, pipeline string) error {
	p := g.byName[pipeline]
	if p == nil {
		return fmt.Errorf("dag: unknown pipeline %q", pipeline)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %q {\n\trankdir=LR;\n\tnode [shape=box];\n", pipeline)
	var edges []string
	external := map[string]bool{}
	for _, i := range g.order {
		t := g.tasks[i]
		if t.Pipeline != pipeline {
			continue
		}
		attrs := fmt.Sprintf("label=%q", fmt.Sprintf("%s\np%d %s", t.Name, t.Priority, t.Executor.Kind))
		if t.Manual {
			attrs += ", style=rounded"
		}
		fmt.Fprintf(&b, "\t%q [%s];\n", t.Name, attrs)
		for _, j := range g.up[i] {
			u := g.tasks[j]
			from := u.Name
			if u.Pipeline != pipeline {
				from = u.ID()
				external[from] = true
			}
			edges = append(edges, fmt.Sprintf("\t%q -> %q;\n", from, t.Name))
		}
		for _, e := range g.external[i] {
			external[e] = true
			edges = append(edges, fmt.Sprintf("\t%q -> %q;\n", e, t.Name))
		}
	}
	ext := make([]string, 0, len(external))
	for e := range external {
		ext = append(ext, e)
	}
	slices.Sort(ext)
	for _, e := range ext {
		fmt.Fprintf(&b, "\t%q [style=dashed];\n", e)
	}
	slices.Sort(edges)
	for _, e := range edges {
		b.WriteString(e)
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}
