package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/taskexec"
)

// setupAPI serves the API of a primary engine running the stock binary's
// executors on a fresh store, for tests of the CLI through the API.
func setupAPI(t testing.TB, o apitest.Opts) *apitest.Env {
	t.Helper()
	o.Executors = func(g *dag.Graph, st *store.Store, alert func(engine.Alert)) (engine.Executors, error) {
		return taskexec.Executors(g, st, alert, runner.NewSecrets(""))
	}
	return apitest.Setup(t, o, func(e *apitest.Env) http.Handler {
		e.Reg.MustRegister(api.NewExecutorCollector(e.St))
		return api.Handler(api.Config{Store: e.St, Graph: e.Graph, Engine: e.Eng, Reload: o.Reload, Gather: e.Reg, Token: o.Token, ExecToken: o.ExecToken,
			OpenReads: o.OpenReads, OpWait: 10 * time.Second, Retain: o.Retain, PruneBudget: o.PruneBudget})
	})
}

// shopPipeline is the pipeline of most tests (apitest.ShopPipeline).
const shopPipeline = apitest.ShopPipeline
