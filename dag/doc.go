// Package dag compiles parsed pipelines into one dependency graph and answers
// the questions the rest of ax asks of it: in what order tasks run
// (topological order and layers), which tasks each schedule's fire starts
// (run sets), which tasks an operator's selection expression names, and how
// the graph looks as DOT.
//
// Every algorithm that runs at a load, a reload or an operator's request
// works on index slices in linear (order: O((V+E) log V)) time:
// github.com/dominikbraun/graph's TopologicalSort is quadratic, its BFS
// rebuilds the whole adjacency map on every call, and its DOT is not what
// `ax graph` prints.
// The library names the cycles a failed compile found (its strongly
// connected components of the tasks the sort could not order), and Lib
// gives callers its general graph value. docs/design.md has the measured
// figures. Ordering is deterministic: ties are broken by priority, then
// by name.
//
// dag reports problems as defs.Errors, positioned in the files, so that
// `ax validate` prints parse and graph problems in one sorted list. It never
// touches a store, a clock of its own, or an executor.
package dag
