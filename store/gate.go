package store

import (
	"context"
	"slices"
	"sync"
)

// writeGate orders the writers of an SQLite store, which has one write
// connection: the lease's writes (renew, take, release) go first, waiting
// only for the transaction in progress; the others take turns in the order
// they came. Without it every writer queued at database/sql's pool, which
// hands a freed connection to a waiter picked at random, so that a renewal
// could wait for several of the primary's batches in a row (during a
// 10,000-command burst, batches of hundreds of instances, on a machine
// short of CPU). A nil *writeGate lets everyone through (MySQL: the lease
// has connections of its own).
//
// As database/sql's pool does, each waiter waits on a channel of its own,
// and the writer leaving hands the turn to the next one.
type writeGate struct {
	mu             sync.Mutex
	busy           bool
	urgent, normal []chan struct{} // waiting: lease writes, the others
}

// enter waits for the turn of a writer (urgent: a lease write) and takes
// it; the caller must call leave. It fails only when ctx ends first.
func (g *writeGate) enter(ctx context.Context, urgent bool) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		return nil
	}
	turn := make(chan struct{}, 1)
	if urgent {
		g.urgent = append(g.urgent, turn)
	} else {
		g.normal = append(g.normal, turn)
	}
	g.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	n, u := len(g.normal), len(g.urgent)
	g.normal = slices.DeleteFunc(g.normal, func(c chan struct{}) bool { return c == turn })
	g.urgent = slices.DeleteFunc(g.urgent, func(c chan struct{}) bool { return c == turn })
	queued := len(g.normal) != n || len(g.urgent) != u
	g.mu.Unlock()
	if !queued { // the turn came meanwhile: pass it on
		<-turn
		g.leave()
	}
	return ctx.Err()
}

// leave ends the turn taken by enter, handing it to the next writer.
func (g *writeGate) leave() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var next chan struct{}
	switch {
	case len(g.urgent) > 0:
		next, g.urgent = g.urgent[0], g.urgent[1:]
	case len(g.normal) > 0:
		next, g.normal = g.normal[0], g.normal[1:]
	default:
		g.busy = false
		return
	}
	next <- struct{}{} // buffered: never blocks
}
