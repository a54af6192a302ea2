package runner_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/runner/executor"
)

// BenchmarkRoundTrip: dispatch plus asynchronous result per task over
// loopback HTTP, with 1 and 4 SDK executors and 16 tasks in flight, against
// bare HTTP pings on the same loopback in the same run.
func BenchmarkRoundTrip(b *testing.B) {
	const parallel = 16
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("executors-%d", n), func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			funcs := map[string]runner.Func{}
			for i := range parallel {
				funcs[fmt.Sprintf("t%d", i)] = func(context.Context, runner.Attempt) error { return nil }
			}
			var eps []runner.Endpoint
			for range n {
				x, err := executor.New(executor.Config{Client: client}, funcs)
				if err != nil {
					b.Fatal(err)
				}
				srv := httptest.NewServer(x.Handler())
				defer srv.Close()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go x.Run(ctx)
				eps = append(eps, runner.Endpoint{Address: srv.URL, LastHeartbeat: time.Now().Add(time.Hour)})
			}
			var r *runner.Routed
			cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				data, _ := io.ReadAll(req.Body)
				rep, err := runner.ParseReport(data)
				if err != nil {
					http.Error(w, err.Error(), 400)
					return
				}
				r.Deliver(rep)
			}))
			defer cb.Close()
			r = runner.NewRouted(runner.RoutedConfig{Client: client,
				Registry: func(context.Context, string) ([]runner.Endpoint, error) { return eps, nil },
				URL:      func(runner.Attempt) (string, error) { return "", fmt.Errorf("unused") }}).WithCallback(cb.URL)
			var trips, pings time.Duration
			total := 0
			for b.Loop() {
				start := time.Now()
				var wg sync.WaitGroup
				for g := range parallel {
					wg.Add(1)
					go func() {
						defer wg.Done()
						res, err := r.Execute(context.Background(), runner.Attempt{Pipeline: "p", Task: fmt.Sprintf("t%d", g),
							Ticket: fmt.Sprintf("%d-%d", total, g), LogicalTime: start, Deadline: start.Add(time.Minute)})
						if err != nil || res.Status != runner.StatusSuccess {
							b.Errorf("%+v %v", res, err)
						}
					}()
				}
				wg.Wait()
				trips += time.Since(start)
				start = time.Now()
				for g := range parallel {
					wg.Add(1)
					go func() {
						defer wg.Done()
						resp, err := client.Get(eps[g%n].Address + "/healthz")
						if err == nil {
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					}()
				}
				wg.Wait()
				pings += time.Since(start)
				total++
			}
			b.ReportMetric(float64(total*parallel)/trips.Seconds(), "tasks/s")
			b.ReportMetric(float64(total*parallel)/pings.Seconds(), "pings/s")
			b.ReportMetric(trips.Seconds()/pings.Seconds(), "x-ping")
		})
	}
}
