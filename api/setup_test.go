package api

import (
	"flag"
	"net/http"
	"testing"
	"time"

	"github.com/ax-sched/ax/api/apitest"
)

// shopPipeline is the pipeline of most tests (apitest.ShopPipeline).
const shopPipeline = apitest.ShopPipeline

// setupAPI serves the admin API and the executor endpoints of a primary
// engine (or, with o.Standby, of none) on a fresh store.
func setupAPI(t testing.TB, o apitest.Opts) *apitest.Env {
	t.Helper()
	return apitest.Setup(t, o, func(e *apitest.Env) http.Handler {
		e.Reg.MustRegister(&executorCollector{st: e.St})
		return Handler(Config{Store: e.St, Graph: e.Graph, Engine: e.Eng, Reload: o.Reload, Gather: e.Reg, Token: o.Token, ExecToken: o.ExecToken,
			OpenReads: o.OpenReads, OpWait: 10 * time.Second, Retain: o.Retain, PruneBudget: o.PruneBudget})
	})
}

var (
	waitFor   = apitest.WaitFor
	openStore = apitest.OpenStore
)

func decodeJSON[T any](t testing.TB, body string) T {
	t.Helper()
	return apitest.DecodeJSON[T](t, body)
}

var update = flag.Bool("update", false, "rewrite docs/api.md from the route table")
