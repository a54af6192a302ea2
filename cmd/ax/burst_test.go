package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// burstTasks is the size of the burst: command tasks due in the same second.
const burstTasks = 10_000

// burstPipeline writes one pipeline of n `command: ["true"]` tasks that all
// fire once, at fire (a six-field cron naming that second, UTC).
func burstPipeline(t *testing.T, n int, fire time.Time) string {
	t.Helper()
	dir := t.TempDir()
	f := fire.UTC()
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline: burst\ntimezone: UTC\nschedule: \"%d %d %d %d %d *\"\ndefaults: {command: [\"true\"], timeout: 60s}\ntasks:\n",
		f.Second(), f.Minute(), f.Hour(), f.Day(), int(f.Month()))
	for i := range n {
		fmt.Fprintf(&b, "  - {name: t%05d}\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "burst.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// burstResult is what a burst measured.
type burstResult struct {
	startP99, startMax time.Duration // fire → start, over every instance
	apiP99, apiMax     time.Duration // GET /api/v1/status on the primary during the burst
	apiCalls           int
	renewLateMax       time.Duration
	took               time.Duration // fire → last result recorded
	epochs             []int64       // lease epoch before and after
	duplicates         int           // instances dispatched more than once
	failures           int           // instances not SUCCESS at their first attempt
}

// pollAPI calls GET url every 20 ms until stop closes and returns the latencies.
func pollAPI(url string, stop <-chan struct{}) (lat []time.Duration, errs int) {
	hc := &http.Client{Timeout: 5 * time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return lat, errs
		case <-tick.C:
		}
		t0 := time.Now()
		resp, err := hc.Get(url)
		if err != nil {
			errs++
			continue
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			errs++
		}
		lat = append(lat, time.Since(t0))
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// runBurst starts the given servers (on free loopback ports) on target with a
// burst due at fire, waits until every instance has a result, and measures.
func runBurst(t *testing.T, target string, servers int, lead time.Duration) burstResult {
	t.Helper()
	fire := time.Now().Add(lead).Truncate(time.Second)
	dir := burstPipeline(t, burstTasks, fire)
	st := openStore(t, target)
	ports := []string{freeAddr(t), freeAddr(t)}
	var procs []*server
	for i := range servers {
		procs = append(procs, startServer(t, target, dir, "--holder", string(rune('a'+i)), "--listen", ports[i], "--log-level", "warn"))
		if i == 0 {
			waitForWithin(t, lead, func() bool {
				l, err := st.GetLease(context.Background(), "")
				return err == nil && l.Holder == "a" && time.Now().Before(l.ExpiresAt)
			})
		}
	}
	ctx := context.Background()
	// The run of the burst exists once the primary has loaded its window.
	waitForWithin(t, lead, func() bool {
		ins, err := st.Instances(ctx, store.InstanceFilter{Pipeline: "burst", Limit: 1})
		return err == nil && len(ins) == 1
	})
	if left := time.Until(fire); left < time.Second {
		t.Fatalf("the servers took too long to start: the burst is due in %s", left)
	}
	before := lease(t, st)
	stop := make(chan struct{})
	var (
		wg   sync.WaitGroup
		lat  []time.Duration
		errs int
	)
	wg.Go(func() {
		time.Sleep(time.Until(fire.Add(-time.Second)))
		lat, errs = pollAPI("http://"+ports[0]+"/api/v1/status", stop)
	})
	var done time.Time
	for deadline := fire.Add(3 * time.Minute); done.IsZero(); time.Sleep(250 * time.Millisecond) {
		ended, err := st.Instances(ctx, store.InstanceFilter{Pipeline: "burst", States: []store.State{store.Success, store.Failed, store.Killed}, Limit: 1 << 20})
		if err == nil && len(ended) >= burstTasks {
			done = time.Now()
		}
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("%d of %d instances ended 3 minutes after the burst", len(ended), burstTasks)
		}
	}
	close(stop)
	wg.Wait()
	after := lease(t, st)
	var status struct {
		Loop struct {
			RenewLateMax time.Duration `json:"renew_late_max"`
		} `json:"loop"`
	}
	if resp, err := http.Get("http://" + ports[0] + "/api/v1/status"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		_ = json.Unmarshal(b, &status)
	}
	res := burstResult{apiP99: percentile(lat, 0.99), apiMax: percentile(lat, 1), apiCalls: len(lat), renewLateMax: status.Loop.RenewLateMax,
		took: done.Sub(fire), epochs: []int64{before.Epoch, after.Epoch}}
	if errs > 0 {
		t.Errorf("%d API call(s) failed during the burst", errs)
	}
	// Every instance: one dispatch, SUCCESS at its first attempt; its start
	// is its dispatch, or its fire time when it was claimed ahead.
	h, err := st.History(ctx, store.LogFilter{Limit: 1 << 22})
	if err != nil {
		t.Fatal(err)
	}
	dispatches := map[int64]int{}
	var starts []time.Duration
	for _, r := range h {
		if r.To == store.Running && strings.HasPrefix(r.TaskID, "burst.") {
			dispatches[r.InstanceID]++
			starts = append(starts, max(r.At.Sub(fire), 0))
		}
	}
	for _, n := range dispatches {
		if n > 1 {
			res.duplicates++
		}
	}
	ins, err := st.Instances(ctx, store.InstanceFilter{Pipeline: "burst", Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if in.State != store.Success || in.Attempt != 1 {
			res.failures++
			if res.failures <= 3 {
				t.Logf("%s: %s attempt %d: %s", in.TaskID, in.State, in.Attempt, in.Error)
			}
		}
	}
	res.startP99, res.startMax = percentile(starts, 0.99), percentile(starts, 1)
	for _, p := range procs {
		p.stop(t)
	}
	if before.Epoch != after.Epoch || res.failures > 0 {
		for _, p := range procs { // what the lease did, for the failure message
			out, _ := os.ReadFile(p.log.Name())
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, "lease") || strings.Contains(l, "standby") || strings.Contains(l, "store_error") {
					t.Log(l)
				}
			}
		}
	}
	return res
}

// waitForWithin polls cond every 50 ms for at most d.
func waitForWithin(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBurstOfTenThousandCommands is the load test of R46: 10,000
// `command: ["true"]` tasks due in one second, on SQLite (one server) and on
// MariaDB (two servers, --lease-ttl 3s). No leader change, no duplicate, no
// false failure, the API answers within 100 ms (p99) throughout and lease
// renewals are never late by more than a third of the TTL. With AX_BENCH=1
// it prints its figures as benchmark lines for make bench.
func TestBurstOfTenThousandCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 commands")
	}
	targets := map[string]func(t *testing.T) (string, int){
		"sqlite": func(t *testing.T) (string, int) { return "sqlite:" + filepath.Join(t.TempDir(), "ax.db"), 1 },
		"mysql":  func(t *testing.T) (string, int) { return "mysql://" + storetest.MySQLDSN(t), 2 },
	}
	for _, name := range []string{"sqlite", "mysql"} {
		t.Run(name, func(t *testing.T) {
			target, servers := targets[name](t)
			r := runBurst(t, target, servers, 25*time.Second)
			t.Logf("%s, %d server(s): fire→start p99 %s (max %s); all %d results %s after the fire; API p99 %s (max %s, %d calls); lease renewals at worst %s late; epoch %d → %d; %d duplicates, %d failures",
				name, servers, r.startP99, r.startMax, burstTasks, r.took.Round(time.Millisecond), r.apiP99, r.apiMax, r.apiCalls, r.renewLateMax, r.epochs[0], r.epochs[1], r.duplicates, r.failures)
			if os.Getenv("AX_BENCH") != "" {
				fmt.Printf("BenchmarkBurst/%s \t1\t%.1f fire-start-p99-ms\t%.1f api-p99-ms\t%.1f renew-late-ms\t%.0f duplicates\t%.0f failures\t%.2f burst-s\t%.0f leader-changes\n",
					name, ms(r.startP99), ms(r.apiP99), ms(r.renewLateMax), float64(r.duplicates), float64(r.failures), r.took.Seconds(), float64(r.epochs[1]-r.epochs[0]))
			}
			if r.epochs[0] != r.epochs[1] {
				t.Errorf("the lease changed hands during the burst: epoch %d → %d", r.epochs[0], r.epochs[1])
			}
			if r.duplicates != 0 || r.failures != 0 {
				t.Errorf("%d duplicate dispatch(es), %d instance(s) not succeeded at the first attempt", r.duplicates, r.failures)
			}
			// Timing targets depend on the machine: on this shared 2-core one,
			// other tests running beside make test can starve any process, so
			// they fail the run only under make bench (AX_BENCH=1), where the
			// machine is meant to be quiet; make test logs them above. The
			// promises (one lease holder, no duplicate, no false failure) hold
			// whatever the load and always fail the test.
			strict := os.Getenv("AX_BENCH") != ""
			if r.apiP99 >= 100*time.Millisecond && strict {
				t.Errorf("API p99 %s during the burst, want < 100 ms", r.apiP99)
			}
			if r.renewLateMax > ttl/3 && strict {
				t.Errorf("a lease renewal completed %s late, more than a third of the %s TTL", r.renewLateMax, ttl)
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
