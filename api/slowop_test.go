package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// TestSlowTriggerAnswerIsTruthful: when the loop applies a trigger longer
// than the API waits (its run's creation held here until the answer is
// in), the answer is 202 naming the request, never "nothing was applied";
// the run is created all the same and the action log has the trigger,
// naming the request and the run. A second trigger that the loop, still
// busy, does not take within the wait is answered 503 and is never applied.
func TestSlowTriggerAnswerIsTruthful(t *testing.T) {
	const wait = 200 * time.Millisecond
	e := apitest.Setup(t, apitest.Opts{}, func(e *apitest.Env) http.Handler {
		return Handler(Config{Store: e.St, Graph: e.Graph, Engine: e.Eng, Gather: e.Reg, OpWait: wait})
	})
	held, release := make(chan struct{}), make(chan struct{})
	store.SetFault(e.St, func(what string) error {
		if what == "create run" {
			select {
			case held <- struct{}{}:
				<-release // the loop is slower than the API's wait
			default:
			}
		}
		return nil
	})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() { free(); store.SetFault(e.St, nil) }) // before the engine stops
	type answer struct {
		code int
		body string
	}
	first := make(chan answer, 1)
	go func() {
		code, body := e.Call("POST", "/api/v1/pipelines/shop/trigger", `{"reason": "big"}`)
		first <- answer{code, body}
	}()
	<-held // the loop is applying the first trigger
	a := <-first
	res := decodeJSON[Result](t, a.body)
	if a.code != http.StatusAccepted || res.Request == 0 || !strings.Contains(res.Result, "accepted as request") || strings.Contains(res.Result, "nothing was applied") {
		t.Fatalf("a trigger the loop took but had not finished: %d %s, want 202 naming the request", a.code, a.body)
	}
	code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/sync/trigger", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "nothing was applied") {
		t.Fatalf("a trigger the busy loop did not take: %d %s, want 503 nothing was applied", code, body)
	}
	free()
	// The loop serves requests in turn: once this one is refused, the
	// first is applied.
	if _, err := e.Eng.Do(context.Background(), engine.Pause{Scope: store.ScopeTask, Target: "shop.nope"}, engine.By{}); err == nil {
		t.Fatal("pause of an unknown task applied")
	}
	acts, err := e.St.Actions(context.Background(), store.LogFilter{Action: engine.OpTrigger})
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 1 || acts[0].Pipeline != "shop" || !strings.Contains(acts[0].Detail, fmt.Sprintf("(request %d)", res.Request)) ||
		!strings.Contains(acts[0].Detail, "run ") {
		t.Fatalf("trigger actions %+v, want the first trigger alone, naming request %d and its run", acts, res.Request)
	}
	var run int64
	if _, err := fmt.Sscanf(acts[0].Detail, "run %d started", &run); err != nil {
		t.Fatalf("trigger action %q does not name its run", acts[0].Detail)
	}
	ins, err := e.St.Instances(context.Background(), store.InstanceFilter{RunID: run})
	if err != nil || len(ins) != 3 {
		t.Fatalf("run %d has %d instances (%v), want the 3 of shop", run, len(ins), err)
	}
	if runs, _ := e.St.Runs(context.Background(), "shop", 10); len(runs) != 1 {
		t.Errorf("%d runs of shop, want 1 (the second trigger never applied)", len(runs))
	}
}
