// Package runner executes one attempt of a task: an in-process Go function, a
// shell command, or an HTTP executor. It knows nothing of scheduling.
package runner
