// Package dag compiles parsed pipelines into one dependency graph and answers
// the questions the rest of ax asks of it: in what order tasks run
// (topological order and layers), which tasks each schedule's fire starts
// (run sets), which tasks an operator's selection expression names, and how
// the graph looks as DOT.
//
// The graph is held in github.com/dominikbraun/graph for callers that want a
// general graph value, but every algorithm here runs on index slices in
// linear time: the library's PreventCycles and TopologicalSort are quadratic
// or worse and would take minutes at 10,000 tasks. Ordering is deterministic:
// ties are broken by priority, then by name.
//
// dag reports problems as defs.Errors, positioned in the files, so that
// `ax validate` prints parse and graph problems in one sorted list. It never
// touches a store, a clock of its own, or an executor.
package dag
