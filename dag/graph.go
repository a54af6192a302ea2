package dag

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ax-sched/ax/defs"
	"github.com/dominikbraun/graph"
)

// Options tunes compilation.
type Options struct {
	// Now is the reference time for look-ahead warnings. Zero means time.Now().
	Now time.Time
	// DispatchRate is the dispatch rate, in tasks per second, against which
	// fire-time collisions are judged. Zero means 100; negative disables the check.
	DispatchRate int
	// External accepts references to pipelines that are not among those
	// compiled, recording them instead of reporting them, for commands that
	// look at one file alone (`ax graph`, `ax next`).
	External bool
}

// DefaultDispatchRate is the dispatch rate assumed when none is configured.
const DefaultDispatchRate = 100

// Graph is the compiled form of a set of pipelines. It is immutable once
// compiled and safe for concurrent use.
type Graph struct {
	pipelines []*defs.Pipeline // sorted by name
	byName    map[string]*defs.Pipeline
	tasks     []*defs.Task // node index → task
	ids       []string     // node index → `pipeline.task`
	index     map[string]int
	up, down  [][]int // upstream and downstream node indexes
	order     []int   // global topological order
	rank      []int   // node index → position in order
	triggers  []*Trigger
	triggerOf []*Trigger       // node index → the trigger whose run set holds it (nil: none)
	external  map[int][]string // node index → upstreams outside the compiled set

	libOnce sync.Once
	lib     graph.Graph[string, *defs.Task]
}

// Trigger is one schedule and the run set its fire starts: the whole pipeline
// for a pipeline `schedule`, or a task and everything downstream of it for a
// task's `cron`.
type Trigger struct {
	Pipeline string
	Task     string // "" for the pipeline's schedule
	Schedule *defs.Schedule
	Tasks    []string // the run set, in topological order
	Pos      defs.Pos
	// Disabled says the schedule never fires (its pipeline, or its task,
	// says disabled: true); its run set is kept, as the file describes it.
	Disabled bool

	nodes []int // the run set as node indexes
}

// Name describes the trigger for people: `orders_daily` or `orders_daily.sync`.
func (t *Trigger) Name() string {
	if t.Task == "" {
		return t.Pipeline
	}
	return t.Pipeline + "." + t.Task
}

// Compile builds the graph of pipelines and checks what needs more than one
// file: duplicate pipeline names, cross-pipeline references, cycles, run sets.
// It returns the graph (nil when the errors make it unusable) and every
// problem, warnings included, sorted.
func Compile(pipelines []*defs.Pipeline, opts Options) (*Graph, defs.Errors) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.DispatchRate == 0 {
		opts.DispatchRate = DefaultDispatchRate
	}
	c := &compiler{opts: opts, g: &Graph{byName: map[string]*defs.Pipeline{}, index: map[string]int{}, external: map[int][]string{}}}
	c.nodes(pipelines)
	c.edges()
	// A cycle does not stop the other checks: the tasks outside it are
	// judged as usual, so that one run reports every problem.
	c.sort()
	c.runSets()
	c.warnPriority()
	if opts.DispatchRate > 0 {
		c.warnCollisions(opts.Now, opts.DispatchRate)
	}
	c.errs.Sort()
	if c.errs.Err() != nil {
		return nil, c.errs
	}
	return c.g, c.errs
}

type compiler struct {
	opts Options
	g    *Graph
	errs defs.Errors
}

func (c *compiler) errorf(sev defs.Severity, pos defs.Pos, pipeline, task, format string, args ...any) {
	c.errs = append(c.errs, &defs.Error{Pos: pos, Pipeline: pipeline, Task: task, Msg: fmt.Sprintf(format, args...), Severity: sev})
}

func (c *compiler) nodes(pipelines []*defs.Pipeline) {
	g := c.g
	sorted := slices.Clone(pipelines)
	slices.SortStableFunc(sorted, func(a, b *defs.Pipeline) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.File, b.File))
	})
	for _, p := range sorted {
		if p == nil {
			continue
		}
		if prev, dup := g.byName[p.Name]; dup {
			c.errorf(defs.SevError, p.Pos, p.Name, "", "pipeline %q is also defined in %s: pipeline names must be unique", p.Name, prev.File)
			continue
		}
		g.byName[p.Name] = p
		g.pipelines = append(g.pipelines, p)
		for _, t := range p.Tasks {
			g.index[t.ID()] = len(g.tasks)
			g.tasks = append(g.tasks, t)
			g.ids = append(g.ids, t.ID())
		}
	}
	g.up = make([][]int, len(g.tasks))
	g.down = make([][]int, len(g.tasks))
}

func (c *compiler) edges() {
	g := c.g
	for i, t := range g.tasks {
		for _, d := range t.DependsOn {
			pipe := cmp.Or(d.Pipeline, t.Pipeline)
			j, ok := g.index[pipe+"."+d.Task]
			if !ok {
				if _, known := g.byName[d.Pipeline]; c.opts.External && d.Pipeline != "" && !known {
					g.external[i] = append(g.external[i], d.String())
					continue
				}
				c.unknownRef(t, d)
				continue
			}
			g.up[i] = append(g.up[i], j)
			g.down[j] = append(g.down[j], i)
		}
	}
}

func (c *compiler) unknownRef(t *defs.Task, d defs.Dep) {
	other, ok := c.g.byName[d.Pipeline]
	if !ok {
		names := make([]string, 0, len(c.g.byName))
		for n := range c.g.byName {
			names = append(names, n)
		}
		c.errorf(defs.SevError, d.Pos, t.Pipeline, t.Name, "depends_on %q: no pipeline %q among the files given%s; pass its file to ax validate too",
			d.String(), d.Pipeline, defs.DidYouMean(d.Pipeline, names))
		return
	}
	c.errorf(defs.SevError, d.Pos, t.Pipeline, t.Name, "depends_on %q: pipeline %q (%s) has no task %q%s",
		d.String(), d.Pipeline, other.File, d.Task, defs.DidYouMean(d.Task, other.TaskNames()))
}

// less orders two nodes for the topological tie-break: priority, then name.
func (g *Graph) less(a, b int) bool {
	ta, tb := g.tasks[a], g.tasks[b]
	if ta.Priority != tb.Priority {
		return ta.Priority < tb.Priority
	}
	return g.ids[a] < g.ids[b]
}

type nodeHeap struct {
	g     *Graph
	items []int
}

func (h *nodeHeap) Len() int           { return len(h.items) }
func (h *nodeHeap) Less(i, j int) bool { return h.g.less(h.items[i], h.items[j]) }
func (h *nodeHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *nodeHeap) Push(x any)         { h.items = append(h.items, x.(int)) }
func (h *nodeHeap) Pop() any {
	n := len(h.items) - 1
	x := h.items[n]
	h.items = h.items[:n]
	return x
}

// sort runs Kahn's algorithm with a heap for the tie-break: O((V+E) log V).
// It reports each cycle by its path and returns whether there was one.
func (c *compiler) sort() bool {
	g := c.g
	n := len(g.tasks)
	indeg := make([]int, n)
	h := &nodeHeap{g: g}
	for i := range n {
		indeg[i] = len(g.up[i])
		if indeg[i] == 0 {
			h.items = append(h.items, i)
		}
	}
	heap.Init(h)
	g.order = make([]int, 0, n)
	for h.Len() > 0 {
		i := heap.Pop(h).(int)
		g.order = append(g.order, i)
		for _, j := range g.down[i] {
			indeg[j]--
			if indeg[j] == 0 {
				heap.Push(h, j)
			}
		}
	}
	g.rank = make([]int, n)
	for r, i := range g.order {
		g.rank[i] = r
	}
	if len(g.order) == n {
		return false
	}
	c.reportCycles(indeg)
	return true
}

// reportCycles names the cycles among the nodes Kahn's algorithm could not
// order: github.com/dominikbraun/graph finds the strongly connected
// components of those nodes, and each component of two or more is reported
// by one cycle path. A node left over with a component of one is downstream
// of a cycle, not on one (self loops are refused in defs).
func (c *compiler) reportCycles(indeg []int) {
	g := c.g
	left := make([]bool, len(g.tasks))
	for i, d := range indeg {
		left[i] = d > 0
	}
	sccs, _ := graph.StronglyConnectedComponents(g.libOf(left)) // fails only on an undirected graph
	for _, ids := range sccs {
		if len(ids) < 2 {
			continue
		}
		scc := make([]int, len(ids))
		for k, id := range ids {
			scc[k] = g.index[id]
		}
		c.reportCycle(scc)
	}
}

func (c *compiler) reportCycle(scc []int) {
	g := c.g
	in := make(map[int]bool, len(scc))
	start := scc[0]
	for _, i := range scc {
		in[i] = true
		a, b := g.tasks[i].Pos, g.tasks[start].Pos
		if cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col)) < 0 {
			start = i
		}
	}
	// Shortest path from start back to start along depends_on edges, inside the component.
	prev := map[int]int{}
	queue := []int{start}
	found := false
	for len(queue) > 0 && !found {
		i := queue[0]
		queue = queue[1:]
		ups := slices.Clone(g.up[i])
		slices.SortFunc(ups, func(a, b int) int { return cmp.Compare(g.tasks[a].ID(), g.tasks[b].ID()) })
		for _, j := range ups {
			if !in[j] {
				continue
			}
			if j == start {
				prev[start] = i
				found = true
				break
			}
			if _, seen := prev[j]; !seen {
				prev[j] = i
				queue = append(queue, j)
			}
		}
	}
	path := []int{start}
	for i := prev[start]; i != start; i = prev[i] {
		path = append(path, i)
	}
	path = append(path, start)
	// path runs backwards along depends_on; reverse it to read "a depends on b".
	slices.Reverse(path[1 : len(path)-1])
	t := g.tasks[start]
	cross := false
	for _, i := range path {
		cross = cross || g.tasks[i].Pipeline != t.Pipeline
	}
	names := make([]string, len(path))
	for k, i := range path {
		names[k] = g.tasks[i].Name
		if cross {
			names[k] = g.tasks[i].ID()
		}
	}
	c.errorf(defs.SevError, t.Pos, t.Pipeline, t.Name, "dependency cycle: %s; remove one of these depends_on entries", strings.Join(names, " -> "))
}

// Load finds the pipeline files under paths, parses them and compiles them
// together: what `ax validate` and `ax server` do. The graph is nil when any
// problem of severity error was found.
func Load(paths []string, popts defs.Options, opts Options) (*Graph, defs.Errors, error) {
	files, err := defs.FindFiles(paths)
	if err != nil {
		return nil, nil, err
	}
	pls, errs := defs.ParseFiles(files, popts)
	// Every error and warning of every file, those of files with errors
	// too: the compiler itself holds back what an error makes unknowable
	// (what a schedule that did not parse reaches).
	g, cerrs := Compile(pls, opts)
	errs = append(errs, cerrs...)
	errs.Sort()
	if errs.Err() != nil {
		return nil, errs, nil
	}
	return g, errs, nil
}
