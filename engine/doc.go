// Package engine is the scheduler core of ax: the eight-state machine, the
// time wheel, the priority queue, the token bucket, retries and backoff,
// timeouts, the circuit breaker, dependency triggering, pause and resume,
// run-now, kill and the leader lease. It decides what runs when; it stores
// through package store and executes through package runner.
package engine
