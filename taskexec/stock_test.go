package taskexec_test

import (
	"testing"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/taskexec"
)

// The HTTP executor gives attempts their env and is still the routing
// executor the engine and the server ask for their capabilities: results
// handed in from the inbox, status queries, failover (a wrapper around it
// hid them, and a result a standby received never reached its attempt).
func TestHTTPExecutorKeepsItsCapabilities(t *testing.T) {
	t.Parallel()
	execs, err := taskexec.ExecutorsOf(func() *dag.Graph { return nil }, nil, nil, 0, runner.NewSecrets(""))
	if err != nil {
		t.Fatal(err)
	}
	web := execs[defs.ExecHTTP]
	if _, ok := web.(*runner.Routed); !ok {
		t.Errorf("the HTTP executor is a %T, not the *runner.Routed the server configures", web)
	}
	if _, ok := web.(engine.Deliverer); !ok {
		t.Error("the HTTP executor is not an engine.Deliverer")
	}
	if _, ok := web.(engine.StatusAsker); !ok {
		t.Error("the HTTP executor is not an engine.StatusAsker")
	}
	if _, ok := web.(engine.Failoverer); !ok {
		t.Error("the HTTP executor is not an engine.Failoverer")
	}
}
