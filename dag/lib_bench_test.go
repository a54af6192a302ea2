package dag

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/ax-sched/ax/defs"
	"github.com/dominikbraun/graph"
	"github.com/dominikbraun/graph/draw"
)

// benchGraph parses and compiles a generated random pipeline of n tasks.
func benchGraph(b *testing.B, n int) (*defs.Pipeline, *Graph) {
	b.Helper()
	p, errs := defs.Parse("big.yaml", genPipeline(n, false), defs.Options{Now: refNow})
	if errs.Err() != nil {
		b.Fatal(errs)
	}
	g, cerrs := Compile([]*defs.Pipeline{p}, Options{Now: refNow, DispatchRate: -1})
	if cerrs.Err() != nil {
		b.Fatal(cerrs)
	}
	return p, g
}

// BenchmarkGraphLibrary measures github.com/dominikbraun/graph against
// dag's own index-slice code on the same compiled graph, the two
// interleaved in one loop: metrics lib-us, ours-us and x-ours (the library's
// time over ours). Topological order at 10,000 tasks takes the library
// seconds per call; run it alone with -benchtime 1x. Sub-benchmarks are
// tasks-N/OP.
func BenchmarkGraphLibrary(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("tasks-%d", n), func(b *testing.B) { benchGraphLibrary(b, n) })
	}
}

// benchGraphLibrary runs each operation of BenchmarkGraphLibrary on a
// random pipeline of n tasks.
func benchGraphLibrary(b *testing.B, n int) {
	p, g := benchGraph(b, n)
	lib := g.libOf(nil)
	root := g.ids[g.order[0]] // the first in order: its downstream closure is the largest
	ops := []struct {
		name      string
		lib, ours func(b *testing.B)
	}{
		{"build", func(b *testing.B) { g.libOf(nil) }, func(b *testing.B) {
			c := &compiler{g: &Graph{byName: map[string]*defs.Pipeline{}, index: map[string]int{}, external: map[int][]string{}}}
			c.nodes([]*defs.Pipeline{p})
			c.edges()
		}},
		{"reach", func(b *testing.B) {
			n := 0
			if err := graph.BFS(lib, root, func(string) bool { n++; return false }); err != nil {
				b.Fatal(err)
			}
		}, func(b *testing.B) { g.reach(g.index[root], g.down, true) }},
		{"dot", func(b *testing.B) {
			if err := draw.DOT(lib, io.Discard); err != nil {
				b.Fatal(err)
			}
		}, func(b *testing.B) {
			if err := g.WriteDOT(io.Discard, "big"); err != nil {
				b.Fatal(err)
			}
		}},
		{"cycles", func(b *testing.B) {
			if _, err := graph.StronglyConnectedComponents(lib); err != nil {
				b.Fatal(err)
			}
		}, func(b *testing.B) { (&compiler{g: g}).sort() }},
		{"order", func(b *testing.B) {
			if _, err := graph.StableTopologicalSort(lib, func(a, c string) bool { return g.less(g.index[a], g.index[c]) }); err != nil {
				b.Fatal(err)
			}
		}, func(b *testing.B) { (&compiler{g: g}).sort() }},
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			var libT, oursT time.Duration
			for b.Loop() {
				start := time.Now()
				op.lib(b)
				mid := time.Now()
				op.ours(b)
				libT += mid.Sub(start)
				oursT += time.Since(mid)
			}
			b.ReportMetric(float64(libT.Microseconds())/float64(b.N), "lib-us")
			b.ReportMetric(float64(oursT.Microseconds())/float64(b.N), "ours-us")
			b.ReportMetric(libT.Seconds()/oursT.Seconds(), "x-ours")
		})
	}
}
