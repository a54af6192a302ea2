// Package defs owns the YAML pipeline format of ax: its types, strict parsing,
// defaults and per-file validation, with every problem reported as an [Error]
// that names file:line:column, the task and what to do about it.
//
// defs knows YAML, cron expressions and time zones and nothing else: it does
// not build graphs (package dag checks cycles, cross-pipeline references and
// run sets) and it never touches a store or an executor.
//
// Parsing walks the yaml.Node tree by hand instead of decoding into structs so
// that every key and value keeps its position, unknown keys are errors (a typo
// must never silently turn a setting off), and one run reports every problem
// of a file rather than the first.
package defs
