package api

import (
	"sync"

	"github.com/ax-sched/ax/runner"
)

// pools keeps the worker pool figures each executor sent with its last
// heartbeat to this server, by address. They are a gauge of the moment,
// not state: kept in memory, never stored, and absent for an executor
// that sends none (one not built on an SDK) or that beats to another server.
type pools struct {
	mu sync.Mutex
	m  map[string]runner.PoolStats
}

// set keeps s as address's figures (nil: it sent none). A nil board keeps nothing.
func (p *pools) set(address string, s *runner.PoolStats) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s == nil {
		delete(p.m, address)
		return
	}
	if p.m == nil {
		p.m = map[string]runner.PoolStats{}
	}
	p.m[address] = *s
}

func (p *pools) get(address string) *runner.PoolStats {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.m[address]
	if !ok {
		return nil
	}
	return &s
}
