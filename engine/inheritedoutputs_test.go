package engine

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/runner/executor"
	"github.com/ax-sched/ax/store"
)

// TestInheritedResultKeepsItsOutputs: a previous primary dispatched an HTTP
// attempt and died; its executor finished it with outputs. The new primary
// learns the result from the executor's /status, and records the attempt
// with its outputs, which the downstream then reads.
func TestInheritedResultKeepsItsOutputs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gone := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, fmt.Errorf("connection refused") })}
		x, err := executor.New(executor.Config{Client: gone}, map[string]runner.Func{"up": func(_ context.Context, a runner.Attempt) error {
			return a.Output("rows", "7")
		}})
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: handlerTransport{x.Handler()}}
		exCtx, stopEx := context.WithCancel(context.Background())
		defer stopEx()
		go x.Run(exCtx)
		start := time.Now()
		var id int64
		e := setupRoutedClient(t, Config{Grace: time.Millisecond}, client, `pipeline: inh
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: up, http: "http://exec-a/dispatch", timeout: 10m}
`, func(st *store.Store) {
			ctx := context.Background()
			def := store.PipelineDef{Name: "inh", File: "p.yaml", Hash: "old", Definition: []byte(`{}`),
				Tasks: []store.TaskDef{{ID: "inh.up", Pipeline: "inh", Name: "up", Group: "default", Priority: 3, Hash: "old", Definition: []byte(`{}`)}}}
			if _, err := st.SyncDefinitions(ctx, store.SyncParams{Pipelines: []store.PipelineDef{def}, Now: start}); err != nil {
				t.Fatal(err)
			}
			_, ins, err := st.CreateRun(ctx, store.CreateRunParams{Pipeline: "inh", Trigger: "inh", Kind: axtype.RunManual, LogicalTime: start,
				Actor: "old", Now: start, Instances: []store.NewInstance{{TaskID: "inh.up", State: axtype.Scheduled, NextFireAt: start}}})
			if err != nil {
				t.Fatal(err)
			}
			id = ins[0].ID
			tk, att := "ticket-up", 1
			if _, err := st.Transition(ctx, store.TransitionParams{InstanceID: id, Version: ins[0].Version, From: axtype.Scheduled, To: axtype.Running,
				Set: store.Changes{Ticket: &tk, Attempt: &att, Counted: &att, StartedAt: &start}, Now: start, Actor: "old", Reason: "dispatched by the old primary"}); err != nil {
				t.Fatal(err)
			}
			if err := st.RegisterExecutor(ctx, store.RegisterParams{Address: "http://exec-a", Protocol: "http", Tasks: []string{"inh.up"}, Boot: "b1", Now: start}); err != nil {
				t.Fatal(err)
			}
			body := fmt.Sprintf(`{"version":1,"pipeline":"inh","task":"up","instance_id":%d,"ticket":"ticket-up","callback":"http://old-primary/api/v1/results"}`, id)
			req, _ := http.NewRequest("POST", "http://exec-a/dispatch", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := client.Do(req); err != nil || resp.StatusCode != 202 {
				t.Fatalf("dispatch by the old primary: %v %v", resp, err)
			}
			synctest.Wait()
		})
		sleep(2 * time.Second) // the first sweep asks at once
		in, err := e.st.Instance(context.Background(), id)
		if err != nil || in.State != axtype.Success {
			t.Fatalf("the inherited attempt: %+v %v, want SUCCESS", in, err)
		}
		recs, err := e.st.Attempts(context.Background(), id)
		if err != nil || len(recs) != 1 || recs[0].Ticket != "ticket-up" || recs[0].Outputs["rows"] != "7" {
			t.Errorf("its record: %+v %v; want attempt 1, ticket-up, outputs rows=7", recs, err)
		}
		if got, err := e.st.RunOutputs(context.Background(), in.RunID, []string{"inh.up"}); err != nil || got["inh.up"]["rows"] != "7" {
			t.Errorf("what its downstream reads: %v %v", got, err)
		}
		e.stop()
	})
}
