// Package runner executes one attempt of a task: an in-process Go function
// registered by name, or a shell command; the HTTP executor and the executor
// SDK slot in behind the same Executor interface. It knows nothing of
// scheduling: it does not retry, does not touch the store, and reports what
// happened as a Result.
//
// Every attempt runs under a context carrying its deadline (the executor's
// own bound; the scheduler keeps a second one and kills past it) and is
// cancelled by a kill; the ticket reaches the work as its idempotency key. EnvExecutor (and
// Routed.WithEnv) give every kind the task's env at dispatch, its secrets
// resolved by a SecretProvider and masked (***) by the attempt's Output in
// what is kept of its output and error.
package runner
