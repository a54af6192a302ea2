package runner

import (
	"context"
	"runtime"
	"sync"
	"testing"
)

// The gate lets no more than its limit through at once; the others wait
// and go through, one per place given back.
func TestForkGateBoundsConcurrentStarts(t *testing.T) {
	t.Parallel()
	g := newForkGate(func() int { return 2 })
	release := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	inside, most := 0, 0
	for range 5 {
		wg.Go(func() {
			g.enter()
			mu.Lock()
			inside++
			most = max(most, inside)
			mu.Unlock()
			<-release
			mu.Lock()
			inside--
			mu.Unlock()
			g.leave()
		})
	}
	at := func(running, waiting int) func() bool {
		return func() bool { r, w := g.counts(); return r == running && w == waiting }
	}
	waitFor(t, "2 inside, 3 waiting", at(2, 3))
	release <- struct{}{}
	waitFor(t, "2 inside, 2 waiting after one left", at(2, 2))
	close(release)
	wg.Wait()
	if r, w := g.counts(); r != 0 || w != 0 || most != 2 {
		t.Fatalf("after all left: %d inside, %d waiting, at most %d at once; want 0, 0, 2", r, w, most)
	}
}

// The default limit leaves one Go processor free, and never stops starts.
func TestForkGateLeavesAProcessorFree(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for procs, want := range map[int]int{1: 1, 2: 1, 3: 2, 8: 7} {
		runtime.GOMAXPROCS(procs)
		if got := forks.limit(); got != want {
			t.Errorf("GOMAXPROCS %d: %d forks at once, want %d", procs, got, want)
		}
	}
}

// A command starts only through the gate: with the gate's one place taken
// it waits, and runs once the place is given back.
func TestCommandStartsThroughTheForkGate(t *testing.T) {
	saved := forks
	defer func() { forks = saved }()
	forks = newForkGate(func() int { return 1 })
	forks.enter()
	done := make(chan Result, 1)
	go func() {
		r, err := commands("true").Execute(context.Background(), attempt("t-gate"))
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	waitFor(t, "the command waiting at the gate", func() bool { _, w := forks.counts(); return w == 1 })
	select {
	case r := <-done:
		t.Fatalf("the command ran with the gate full: %+v", r)
	default:
	}
	forks.leave()
	if r := <-done; r.Status != StatusSuccess {
		t.Fatalf("after the gate opened: %s %q, want success", r.Status, r.Error)
	}
	if r, w := forks.counts(); r != 0 || w != 0 {
		t.Errorf("gate after the start: %d inside, %d waiting; want 0, 0", r, w)
	}
}
