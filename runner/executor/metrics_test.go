package executor

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/runner"
)

// TestPoolMetrics: with one worker busy, one dispatch queued, one refused
// for a full pool and one for a task already queued, Pool and /metrics say
// so; when the work ends, the worker is idle and the queue empty.
func TestPoolMetrics(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	funcs := map[string]runner.Func{}
	for i := range 3 {
		funcs[fmt.Sprintf("t%d", i)] = func(ctx context.Context, _ runner.Attempt) error { started <- struct{}{}; <-release; return nil }
	}
	s := newSetup(t, Config{Core: 1, Max: 1, Queue: 1}, funcs)
	send := func(task, ticket string) int {
		d := disp(task, ticket)
		d.Callback = s.sURL + "/results"
		code, _ := dispatch(t, s.url, d)
		return code
	}
	codes := []int{send("t0", "k0")}
	<-started
	codes = append(codes, send("t1", "k1"), send("t2", "k2"), send("t1", "k3"))
	if fmt.Sprint(codes) != "[202 202 503 409]" {
		t.Fatalf("codes %v, want [202 202 503 409]", codes)
	}
	if got, want := s.x.Pool(), (runner.PoolStats{Workers: 1, Active: 1, Max: 1, Queued: 1, Queue: 1, Refused: 2}); got != want {
		t.Errorf("Pool %+v, want %+v", got, want)
	}
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"ax_executor_workers_active 1\n", "ax_executor_queue_depth 1\n", "ax_executor_queue_capacity 1\n",
		`ax_executor_refused_total{reason="pool_full"} 1` + "\n", `ax_executor_refused_total{reason="task_running"} 1` + "\n",
		`ax_executor_refused_total{reason="shutting_down"} 0` + "\n"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	close(release)
	for deadline := time.Now().Add(10 * time.Second); s.x.Pool().Active != 0 || s.x.Pool().Queued != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Pool %+v: the work never ended", s.x.Pool())
		}
	}
}
