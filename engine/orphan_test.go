package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/runner/executor"
	"github.com/ax-sched/ax/store"
)

// handlerTransport serves requests with a handler in memory, so that an SDK
// executor runs inside the synctest bubble.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	if r.RemoteAddr == "" {
		r.RemoteAddr = "127.0.0.1:1" // as a server would see the scheduler beside it
	}
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestInheritedTicketsResolvedByAskingTheExecutor: a previous primary left
// three HTTP instances RUNNING. The new primary asks their executor about
// the tickets at once: t1 is done there (its result is applied), t2 runs
// there (it waits, and applies the result once the executor has it), t3 is
// unknown (it never started: it is dispatched again with the same ticket and
// runs once). None waits for its timeout or counts an unknown outcome.
func TestInheritedTicketsResolvedByAskingTheExecutor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			calls = map[string][]string{} // task → tickets run
		)
		release := make(chan struct{})
		run := func(name string) runner.Func {
			return func(ctx context.Context, a runner.Attempt) error {
				mu.Lock()
				calls[name] = append(calls[name], a.Ticket)
				mu.Unlock()
				if name == "t2" {
					<-release
				}
				return nil
			}
		}
		// The old primary is gone: results posted to its callback never arrive.
		gone := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, fmt.Errorf("connection refused") })}
		x, err := executor.New(executor.Config{Client: gone}, map[string]runner.Func{"t1": run("t1"), "t2": run("t2"), "t3": run("t3")})
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: handlerTransport{x.Handler()}}
		exCtx, stopEx := context.WithCancel(context.Background())
		go x.Run(exCtx)
		start := time.Now()
		tickets := map[string]string{"t1": "ticket-one", "t2": "ticket-two", "t3": "ticket-three"}
		var ids map[string]int64
		e := setupRoutedClient(t, Config{Grace: time.Millisecond}, client, `pipeline: inh
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: t1, http: "http://exec-a/dispatch", timeout: 10m}
  - {name: t2, http: "http://exec-a/dispatch", timeout: 10m}
  - {name: t3, http: "http://exec-a/dispatch", timeout: 10m}
`, func(st *store.Store) {
			ctx := context.Background()
			var def store.PipelineDef
			def.Name, def.File, def.Hash, def.Definition = "inh", "p.yaml", "old", []byte(`{}`)
			for _, n := range []string{"t1", "t2", "t3"} {
				def.Tasks = append(def.Tasks, store.TaskDef{ID: "inh." + n, Pipeline: "inh", Name: n, Group: "default", Priority: 3, Hash: "old", Definition: []byte(`{}`)})
			}
			if _, err := st.SyncDefinitions(ctx, store.SyncParams{Pipelines: []store.PipelineDef{def}, Now: start}); err != nil {
				t.Fatal(err)
			}
			_, ins, err := st.CreateRun(ctx, store.CreateRunParams{Pipeline: "inh", Trigger: "inh", Kind: axtype.RunManual, LogicalTime: start,
				Actor: "old", Now: start, Instances: []store.NewInstance{
					{TaskID: "inh.t1", State: axtype.Scheduled, NextFireAt: start}, {TaskID: "inh.t2", State: axtype.Scheduled, NextFireAt: start},
					{TaskID: "inh.t3", State: axtype.Scheduled, NextFireAt: start}}})
			if err != nil {
				t.Fatal(err)
			}
			ids = map[string]int64{}
			for _, in := range ins {
				name := strings.TrimPrefix(in.TaskID, "inh.")
				ids[name] = in.ID
				tk, att := tickets[name], 1
				if _, err := st.Transition(ctx, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Scheduled, To: axtype.Running,
					Set: store.Changes{Ticket: &tk, Attempt: &att, Counted: &att, StartedAt: &start}, Now: start, Actor: "old", Reason: "dispatched by the old primary"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.RegisterExecutor(ctx, store.RegisterParams{Address: "http://exec-a", Protocol: "http",
				Tasks: []string{"inh.t1", "inh.t2", "inh.t3"}, Boot: "b1", Now: start}); err != nil {
				t.Fatal(err)
			}
			// What the old primary handed out before it died: t1 (done by now) and t2 (running).
			for _, n := range []string{"t1", "t2"} {
				body := fmt.Sprintf(`{"version":1,"pipeline":"inh","task":%q,"instance_id":%d,"ticket":%q,"callback":"http://old-primary/api/v1/results"}`, n, ids[n], tickets[n])
				req, _ := http.NewRequest("POST", "http://exec-a/dispatch", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json") // as the scheduler sends it
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != 202 {
					t.Fatalf("dispatch %s by the old primary: %v %v", n, resp, err)
				}
			}
			synctest.Wait()
		})
		defer stopEx()
		sleep(2 * time.Second) // the first sweep asks at once
		state := func(n string) axtype.Instance {
			in, err := e.st.Instance(context.Background(), ids[n])
			if err != nil {
				t.Fatal(err)
			}
			return in
		}
		if in := state("t1"); in.State != axtype.Success || in.Ticket != tickets["t1"] {
			t.Errorf("t1 (done on the executor): %+v, want SUCCESS with its ticket", in)
		}
		if in := state("t2"); in.State != axtype.Running {
			t.Errorf("t2 (running on the executor): %+v, want RUNNING", in)
		}
		if in := state("t3"); in.State != axtype.Success || in.Ticket != tickets["t3"] || in.Attempt != 1 {
			t.Errorf("t3 (unknown): %+v, want SUCCESS at attempt 1 with the same ticket", in)
		}
		close(release) // t2 ends on the executor; the next sweep hears it is done
		sleep(10 * time.Second)
		if in := state("t2"); in.State != axtype.Success || in.Ticket != tickets["t2"] {
			t.Errorf("t2 after it ended: %+v, want SUCCESS", in)
		}
		e.stop()
		mu.Lock()
		defer mu.Unlock()
		want := fmt.Sprint(map[string][]string{"t1": {"ticket-one"}, "t2": {"ticket-two"}, "t3": {"ticket-three"}})
		if fmt.Sprint(calls) != want {
			t.Errorf("executions %v, want each once: %s", calls, want)
		}
		acts, _ := e.st.Actions(context.Background(), store.LogFilter{Action: "redispatch"})
		if len(acts) != 1 || acts[0].Ticket != tickets["t3"] {
			t.Errorf("redispatch actions %+v, want one for t3", acts)
		}
		for _, n := range []string{"t1", "t2", "t3"} {
			if in := state(n); strings.Contains(in.Error, "unknown outcome") {
				t.Errorf("%s: %s", n, in.Error)
			}
		}
	})
}

// TestInheritedRedispatchKeepsItsDeadline: a primary that inherited an HTTP
// ticket unknown to its executor dispatched it again a minute ago, and then
// died; the ticket runs on the executor under a deadline counted from that
// redispatch. The next primary counts the timeout from the redispatch too:
// at the deadline of the first dispatch, nine minutes earlier, the attempt
// still runs there and is not failed as an unknown outcome (its retry would
// run beside it); it ends once, with its result.
func TestInheritedRedispatchKeepsItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			calls []string
		)
		release := make(chan struct{})
		// The old primary is gone: results posted to its callback never arrive.
		gone := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, fmt.Errorf("connection refused") })}
		x, err := executor.New(executor.Config{Client: gone}, map[string]runner.Func{"t1": func(ctx context.Context, a runner.Attempt) error {
			mu.Lock()
			calls = append(calls, a.Ticket)
			mu.Unlock()
			<-release
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: handlerTransport{x.Handler()}}
		exCtx, stopEx := context.WithCancel(context.Background())
		go x.Run(exCtx)
		start := time.Now()
		first, resent := start.Add(-9*time.Minute), start.Add(-time.Minute)
		const ticket = "ticket-resent"
		var id int64
		e := setupRoutedClient(t, Config{Grace: time.Millisecond}, client, `pipeline: inh
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: t1, http: "http://exec-a/dispatch", timeout: 10m, retry: {count: 1, interval: 1s}}
`, func(st *store.Store) {
			ctx := context.Background()
			var def store.PipelineDef
			def.Name, def.File, def.Hash, def.Definition = "inh", "p.yaml", "old", []byte(`{}`)
			def.Tasks = append(def.Tasks, store.TaskDef{ID: "inh.t1", Pipeline: "inh", Name: "t1", Group: "default", Priority: 3, Hash: "old", Definition: []byte(`{}`)})
			if _, err := st.SyncDefinitions(ctx, store.SyncParams{Pipelines: []store.PipelineDef{def}, Now: first}); err != nil {
				t.Fatal(err)
			}
			_, ins, err := st.CreateRun(ctx, store.CreateRunParams{Pipeline: "inh", Trigger: "inh", Kind: axtype.RunManual, LogicalTime: first,
				Actor: "old", Now: first, Instances: []store.NewInstance{{TaskID: "inh.t1", State: axtype.Scheduled, NextFireAt: first}}})
			if err != nil {
				t.Fatal(err)
			}
			id = ins[0].ID
			tk, att := ticket, 1
			if _, err := st.Transition(ctx, store.TransitionParams{InstanceID: id, Version: ins[0].Version, From: axtype.Scheduled, To: axtype.Running,
				Set: store.Changes{Ticket: &tk, Attempt: &att, Counted: &att, StartedAt: &first}, Now: first, Actor: "old", Reason: "dispatched by the old primary"}); err != nil {
				t.Fatal(err)
			}
			if err := st.AppendAction(ctx, store.Action{At: resent, Actor: Actor, Action: "redispatch", Pipeline: "inh", TaskID: "inh.t1",
				InstanceID: id, Ticket: ticket, Reason: "unknown to every executor of the task: dispatched again with the same ticket"}); err != nil {
				t.Fatal(err)
			}
			if err := st.RegisterExecutor(ctx, store.RegisterParams{Address: "http://exec-a", Protocol: "http", Tasks: []string{"inh.t1"}, Boot: "b1", Now: start}); err != nil {
				t.Fatal(err)
			}
			// What the primary that dispatched it again handed out before it died.
			body := fmt.Sprintf(`{"version":1,"pipeline":"inh","task":"t1","instance_id":%d,"ticket":%q,"callback":"http://old-primary/api/v1/results"}`, id, ticket)
			req, _ := http.NewRequest("POST", "http://exec-a/dispatch", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil || resp.StatusCode != 202 {
				t.Fatalf("dispatch by the old primary: %v %v", resp, err)
			}
			synctest.Wait()
		})
		defer stopEx()
		state := func() axtype.Instance {
			in, err := e.st.Instance(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			return in
		}
		sleep(3 * time.Minute) // past the first dispatch's deadline (start+1m), before the redispatch's (start+9m)
		if in := state(); in.State != axtype.Running || in.Ticket != ticket || in.Attempt != 1 {
			t.Errorf("at %s, past the first dispatch's deadline: %+v, want RUNNING attempt 1 with ticket %s (it runs on the executor under the redispatch's deadline)",
				time.Since(start), in, ticket)
		}
		close(release)
		sleep(10 * time.Second)
		if in := state(); in.State != axtype.Success || in.Ticket != ticket || strings.Contains(in.Error, "unknown outcome") {
			t.Errorf("after it ended on the executor: %+v, want SUCCESS with ticket %s", in, ticket)
		}
		e.stop()
		mu.Lock()
		defer mu.Unlock()
		if len(calls) != 1 || calls[0] != ticket {
			t.Errorf("executions %v, want one of %s", calls, ticket)
		}
	})
}
