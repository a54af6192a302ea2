package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// burstSize is the size of the burst, command tasks due in the same
// second, and how far ahead of it the servers start (enough to sync the
// definitions and create and load the burst's run on a loaded machine,
// about five times what they took: runBurst fails, saying so, when it was
// not). make bench (AX_BENCH=1) runs the full 10,000; make test the
// 30-second version of 3,000 (AX_BURST_FULL=1 runs the full one there
// too), which checks the same promises in a third of the time.
func burstSize() (n int, lead time.Duration) {
	if os.Getenv("AX_BENCH") != "" || os.Getenv("AX_BURST_FULL") != "" {
		return 10_000, 12 * time.Second
	}
	return 3_000, 8 * time.Second
}

// burstFails is every how many tasks of the burst one runs `false` instead
// of `true`: its recorded outcome must be FAILED, as its exit status says.
const burstFails = 50

// burstPipeline writes one pipeline of n `command: ["true"]` tasks that all
// fire once, at fire (a six-field cron naming that second, UTC); every
// burstFails-th runs `false` (exit status 1, no retry) instead.
func burstPipeline(t *testing.T, n int, fire time.Time) string {
	t.Helper()
	dir := t.TempDir()
	f := fire.UTC()
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline: burst\ntimezone: UTC\nschedule: \"%d %d %d %d %d *\"\ndefaults: {command: [\"true\"], timeout: 60s}\ntasks:\n",
		f.Second(), f.Minute(), f.Hour(), f.Day(), int(f.Month()))
	for i := range n {
		if i%burstFails == burstFails-1 {
			fmt.Fprintf(&b, "  - {name: t%05d, command: [\"false\"]}\n", i)
			continue
		}
		fmt.Fprintf(&b, "  - {name: t%05d}\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "burst.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// burstResult is what a burst measured.
type burstResult struct {
	startP99, startMax time.Duration // fire → start on this host (the attempt's record), over every instance
	apiP99, apiMax     time.Duration // GET /api/v1/status on the primary during the burst
	apiCalls           int
	renewLateMax       time.Duration
	took               time.Duration // fire → last result recorded
	startup            time.Duration // servers started → the burst's run created and loaded
	epochs             []int64       // lease epoch before and after
	duplicates         int           // instances dispatched more than once
	failures           int           // instances whose outcome is not their exit status at the first attempt (true: SUCCESS, false: FAILED)
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
func runBurst(t *testing.T, target string, servers, burstTasks int, lead time.Duration) burstResult {
	t.Helper()
	fire := time.Now().Add(lead).Truncate(time.Second)
	dir := burstPipeline(t, burstTasks, fire)
	st := openStore(t, target)
	ports := []string{freeAddr(t), freeAddr(t)}
	began := time.Now()
	var (
		procs  []*server
		before store.Lease // from the first server's start: a leader change while it loads counts too
	)
	for i := range servers {
		procs = append(procs, startServer(t, target, dir, "--holder", string(rune('a'+i)), "--listen", ports[i], "--log-level", "warn"))
		if i == 0 {
			waitForWithin(t, lead, func() bool {
				l, err := st.GetLease(context.Background(), "")
				return err == nil && l.Holder == "a" && time.Now().Before(l.ExpiresAt)
			})
			before = lease(t, st)
		}
	}
	ctx := context.Background()
	// The run of the burst exists once the primary has loaded its window.
	waitForWithin(t, lead, func() bool {
		ins, err := st.Instances(ctx, store.InstanceFilter{Pipeline: "burst", Limit: 1})
		return err == nil && len(ins) == 1
	})
	startup := time.Since(began)
	if left := time.Until(fire); left < time.Second {
		t.Fatalf("the servers took too long to start (%s): the burst is due in %s", startup.Round(time.Millisecond), left)
	}
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
	// Done when no instance of the burst is left unended (one cheap query).
	var done time.Time
	for deadline := fire.Add(3 * time.Minute); done.IsZero(); time.Sleep(250 * time.Millisecond) {
		left, err := st.Instances(ctx, store.InstanceFilter{Pipeline: "burst", States: []axtype.State{axtype.Waiting, axtype.Scheduled, axtype.Running, axtype.Retrying}, Limit: 1})
		if err == nil && len(left) == 0 && time.Now().After(fire) {
			done = time.Now()
		}
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			ended, _ := st.Instances(ctx, store.InstanceFilter{Pipeline: "burst", States: []axtype.State{axtype.Success, axtype.Failed, axtype.Killed}, Limit: 1 << 20})
			t.Fatalf("%d of %d instances ended 3 minutes after the burst", len(ended), burstTasks)
		}
	}
	close(stop)
	wg.Wait()
	after := lease(t, st)
	// The primary's worst renewal of its term: a status that cannot be
	// read, or that lacks the figure, fails the run rather than reading 0.
	var status struct {
		Loop struct {
			RenewLateMax *time.Duration `json:"renew_late_max"`
		} `json:"loop"`
	}
	resp, err := http.Get("http://" + ports[0] + "/api/v1/status")
	if err != nil {
		t.Fatalf("status after the burst: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(b, &status); resp.StatusCode != 200 || err != nil || status.Loop.RenewLateMax == nil {
		t.Fatalf("status after the burst: %d %v, no loop.renew_late_max in %.300s", resp.StatusCode, err, b)
	}
	res := burstResult{apiP99: percentile(lat, 0.99), apiMax: percentile(lat, 1), apiCalls: len(lat), renewLateMax: *status.Loop.RenewLateMax,
		took: done.Sub(fire), startup: startup, epochs: []int64{before.Epoch, after.Epoch}}
	for _, p := range procs {
		p.stop(t)
	}
	if errs > 0 {
		t.Errorf("%d API call(s) failed during the burst", errs)
	}
	// Every instance: one dispatch, and its outcome at its first attempt is
	// what its command's exit status says.
	h, err := st.History(ctx, store.LogFilter{Limit: 1 << 22})
	if err != nil {
		t.Fatal(err)
	}
	dispatches := map[int64]int{}
	for _, r := range h {
		if r.To == axtype.Running && strings.HasPrefix(r.TaskID, "burst.") {
			dispatches[r.InstanceID]++
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
	if len(ins) != burstTasks {
		t.Errorf("%d instances of the burst, want %d", len(ins), burstTasks)
	}
	// Its start is when its command started on this host: the attempt's
	// record, not the dispatch (recorded ahead of the start, a batch at a time).
	var starts []time.Duration
	for _, in := range ins {
		var i int
		fmt.Sscanf(in.TaskID, "burst.t%d", &i)
		want, code := axtype.Success, 0
		if i%burstFails == burstFails-1 {
			want, code = axtype.Failed, 1
		}
		recs, err := st.Attempts(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		ok := in.State == want && in.Attempt == 1 && len(recs) == 1 && recs[0].ExitCode != nil && *recs[0].ExitCode == code
		if !ok {
			res.failures++
			if res.failures <= 3 {
				t.Logf("%s: %s attempt %d (%d record(s)): %s; want %s, exit status %d", in.TaskID, in.State, in.Attempt, len(recs), in.Error, want, code)
			}
		}
		if len(recs) > 0 {
			starts = append(starts, max(recs[0].StartedAt.Sub(fire), 0))
		}
	}
	res.startP99, res.startMax = percentile(starts, 0.99), percentile(starts, 1)
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

// forkFloor is how long this host takes to fork/exec n `true` commands,
// par at a time (the default --max-running): the earliest the last of a
// burst of n commands could start, whatever the scheduler. Measured in the
// same run as the burst, for make bench's ratio.
func forkFloor(t *testing.T, n, par int) time.Duration {
	t.Helper()
	t0 := time.Now()
	var wg sync.WaitGroup
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	for range par {
		wg.Go(func() {
			for range next {
				if err := exec.Command("true").Run(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(t0)
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

// TestBurstOfTenThousandCommands is the burst load test: 10,000
// `command: ["true"]` tasks due in one second (3,000 in make test, see
// burstSize), on SQLite (one server) and on MariaDB (two servers,
// --lease-ttl 3s). No leader change, no duplicate, every outcome its
// command's exit status (every 50th runs false), the API answers within
// 100 ms (p99) throughout and lease renewals are never late by more than a
// third of the TTL. With AX_BENCH=1 it prints its figures as benchmark
// lines for make bench, beside the fork/exec floor measured in the same run.
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
			burstTasks, lead := burstSize()
			r := runBurst(t, target, servers, burstTasks, lead)
			t.Logf("%s, %d server(s): started and loaded in %s; fire→start p99 %s (max %s); all %d results %s after the fire; API p99 %s (max %s, %d calls); lease renewals at worst %s late; epoch %d → %d; %d duplicates, %d false outcomes",
				name, servers, r.startup.Round(time.Millisecond), r.startP99, r.startMax, burstTasks, r.took.Round(time.Millisecond), r.apiP99, r.apiMax, r.apiCalls, r.renewLateMax, r.epochs[0], r.epochs[1], r.duplicates, r.failures)
			if os.Getenv("AX_BENCH") != "" {
				// The floor: this host forking the same commands, as many at a
				// time as --max-running lets the scheduler, measured now.
				floor := forkFloor(t, burstTasks, engine.DefaultMaxRunning())
				t.Logf("fork/exec floor: %d `true` %d at a time in %s", burstTasks, engine.DefaultMaxRunning(), floor.Round(time.Millisecond))
				fmt.Printf("BenchmarkBurst/%s \t1\t%.1f fire-start-p99-ms\t%.1f fork-floor-ms\t%.2f x-floor\t%.1f api-p99-ms\t%.1f renew-late-ms\t%.0f duplicates\t%.0f failures\t%.2f burst-s\t%.0f leader-changes\n",
					name, ms(r.startP99), ms(floor), ms(r.startP99)/ms(floor), ms(r.apiP99), ms(r.renewLateMax), float64(r.duplicates), float64(r.failures), r.took.Seconds(), float64(r.epochs[1]-r.epochs[0]))
			}
			if r.epochs[0] != r.epochs[1] {
				t.Errorf("the lease changed hands during the burst: epoch %d → %d", r.epochs[0], r.epochs[1])
			}
			if r.duplicates != 0 || r.failures != 0 {
				t.Errorf("%d duplicate dispatch(es), %d instance(s) whose outcome at the first attempt is not their exit status", r.duplicates, r.failures)
			}
			// The timing targets (API p99 < 100 ms, renewals at most a third
			// of the TTL late) fail the run under make bench (AX_BENCH=1),
			// where the machine is meant to be quiet. Under make test, other
			// packages' tests run beside this one and can starve any process
			// on a 2-core machine (under make bench's quieter lock the full
			// burst measured API p99 0.33-0.57 s and renewals 1.2-2.5 s
			// late), so it asserts bounds only a regression crosses: the API
			// waiting on the burst (p99 over 3 s) or a renewal late by two
			// TTLs (a lease that would have been lost, which the epoch check
			// above also catches).
			apiMax, lateMax := 3*time.Second, 2*ttl
			if os.Getenv("AX_BENCH") != "" {
				apiMax, lateMax = 100*time.Millisecond, ttl/3
			}
			if r.apiP99 >= apiMax {
				t.Errorf("API p99 %s during the burst, want < %s", r.apiP99, apiMax)
			}
			if r.renewLateMax > lateMax {
				t.Errorf("a lease renewal completed %s late, want at most %s (TTL %s)", r.renewLateMax, lateMax, ttl)
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
