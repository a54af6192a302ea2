package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/reload"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

func instancesOf(t *testing.T, st *store.Store, task string, states ...axtype.State) []axtype.Instance {
	t.Helper()
	ins, err := st.Instances(context.Background(), store.InstanceFilter{TaskID: task, States: states, Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

func reloadActions(t *testing.T, st *store.Store) []store.Action {
	t.Helper()
	as, err := st.Actions(context.Background(), store.LogFilter{Action: "reload", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return as
}

func write(t *testing.T, path, src string) {
	t.Helper()
	apitest.WriteFile(t, path, src)
}

const (
	reloadA = "pipeline: a\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: x, function: noop}\n"
	// b.y runs until the file "release" appears beside the pipelines.
	reloadB = "pipeline: b\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - name: y\n    timeout: 1m\n    command: [\"sh\", \"-c\", \"while [ ! -f %s ]; do sleep 0.05; done\"]\n"
)

// TestServerReloadsPipelines: the reload scenario (reloadScenario) under
// one server on SQLite.
func TestServerReloadsPipelines(t *testing.T) {
	t.Parallel()
	reloadScenario(t, filepath.Join(t.TempDir(), "ax.db"), 1)
}

// TestHAReloadsPipelines: the reload scenario under two servers on one
// MariaDB database: both reload every change, only the primary applies it
// (one action per change, the standby never logs applying), and the
// standby takes over with the set in force.
func TestHAReloadsPipelines(t *testing.T) {
	t.Parallel()
	reloadScenario(t, "mysql://"+storetest.MySQLDSN(t), 2)
}

// reloadState reads GET /api/v1/reload of the server at addr: the last
// reload and the fingerprints of the set running there.
func reloadState(t *testing.T, addr string) (last *reload.Status, running string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/reload")
	if err != nil {
		return nil, ""
	}
	defer resp.Body.Close()
	var out struct {
		Last    *reload.Status  `json:"last"`
		Running json.RawMessage `json:"running"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil {
		return nil, ""
	}
	return out.Last, string(out.Running)
}

// reloadScenario runs n servers (s0 the primary, the others standing by)
// on target and, under them, adds a pipeline file, changes one, removes one
// while its task runs, breaks the set with one bad file among valid ones,
// then mends it. Each valid change is reloaded by every server, applied
// once (one reload action) and logged; the broken set keeps the whole
// running set on every server, names file:line:col, writes nothing and
// leaves /readyz ready.
func reloadScenario(t *testing.T, target string, n int) {
	dir := t.TempDir()
	pipes := filepath.Join(dir, "pipelines")
	if err := os.Mkdir(pipes, 0o755); err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(dir, "release")
	write(t, filepath.Join(pipes, "a.yaml"), reloadA)
	st := openStore(t, target)
	var (
		srvs  []*server
		addrs []string
	)
	for i := range n {
		addr := freeAddr(t)
		srvs, addrs = append(srvs, startServer(t, target, pipes, "--holder", fmt.Sprintf("s%d", i), "--listen", addr, "--watch", "100ms")), append(addrs, addr)
		if i == 0 {
			waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder == "s0" })
		}
		waitFor(t, func() bool { // serving: its reloader holds the files as they are now
			resp, err := http.Get("http://" + addr + "/readyz")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil && resp.StatusCode == 200
		})
	}
	waitFor(t, func() bool { return len(instancesOf(t, st, "a.x", axtype.Success)) > 0 })
	// everyReloaded waits until every server's last reload is ok (or not)
	// with the given summary.
	everyReloaded := func(ok bool, summary string, after time.Time) []*reload.Status {
		t.Helper()
		out := make([]*reload.Status, n)
		for i, addr := range addrs {
			waitFor(t, func() bool {
				l, _ := reloadState(t, addr)
				out[i] = l
				return l != nil && l.OK == ok && l.Summary == summary && !l.At.Before(after)
			})
		}
		return out
	}
	actions := 0
	applied := func(summary string) {
		t.Helper()
		actions++
		waitFor(t, func() bool { return len(reloadActions(t, st)) >= actions })
		as := reloadActions(t, st)
		if len(as) != actions || as[actions-1].Reason != summary {
			t.Fatalf("reload actions after %q: %d, the last %+v; want %d, the last with that reason (one per change: the primary's)", summary, len(as), as[len(as)-1], actions)
		}
	}

	// Add: b.y starts firing.
	write(t, filepath.Join(pipes, "b.yaml"), strings.Replace(reloadB, "%s", release, 1))
	everyReloaded(true, "added b.y; schedules re-planned b", time.Time{})
	applied("added b.y; schedules re-planned b")
	var running []axtype.Instance // started, not only claimed ahead of its fire time
	waitFor(t, func() bool {
		running = nil
		for _, in := range instancesOf(t, st, "b.y", axtype.Running) {
			if in.StartedAt.Before(time.Now().Add(-100 * time.Millisecond)) {
				running = append(running, in)
			}
		}
		return len(running) > 0
	})

	// Change: a fires hourly from now on; its runs planned ahead every second are gone.
	write(t, filepath.Join(pipes, "a.yaml"), strings.Replace(reloadA, "@every 1s", "@every 1h", 1))
	everyReloaded(true, "schedules re-planned a", time.Time{})
	applied("schedules re-planned a")
	changedAt := reloadActions(t, st)[1].At
	for _, in := range instancesOf(t, st, "a.x") {
		if in.LogicalTime.After(changedAt.Add(2 * time.Second)) {
			t.Errorf("a.x has an instance at %s (%s), after its schedule became hourly at %s", in.LogicalTime, in.State, changedAt)
		}
	}

	// Remove while running: b.y stops firing; its running attempt is still
	// tracked and its result recorded.
	if err := os.Remove(filepath.Join(pipes, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	everyReloaded(true, "removed b.y; schedules re-planned b", time.Time{})
	applied("removed b.y; schedules re-planned b")
	write(t, release, "")
	waitFor(t, func() bool {
		in, err := st.Instance(context.Background(), running[0].ID)
		return err == nil && in.State == axtype.Success
	})
	if waiting := instancesOf(t, st, "b.y", axtype.Waiting, axtype.Scheduled, axtype.Running); len(waiting) != 0 {
		t.Errorf("b.y still has %d instance(s) waiting or running after its removal", len(waiting))
	}

	// Break: one bad file among valid ones (a, and d added beside it) keeps
	// the whole running set on every server.
	before := make([]string, n)
	for i, addr := range addrs {
		_, before[i] = reloadState(t, addr)
	}
	write(t, filepath.Join(pipes, "c.yaml"), "pipeline: c\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: z, function: noop, depends_on: [nosuch]}\n")
	dYAML := "pipeline: d\ntimezone: UTC\nschedule: \"@every 1s\"\noverlap: allow # a crashed primary's attempt is not waited for\ntasks:\n  - {name: w, function: noop}\n"
	write(t, filepath.Join(pipes, "d.yaml"), dYAML)
	wroteD := time.Now()
	refused := everyReloaded(false, "invalid: the running pipelines stay as they are", wroteD.Add(-time.Millisecond))
	at := regexp.MustCompile(regexp.QuoteMeta(filepath.Join(pipes, "c.yaml")) + `:5:[0-9]+: `)
	for i, last := range refused {
		if len(last.Errors) != 1 || !at.MatchString(last.Errors[0]) || !strings.Contains(last.Errors[0], "nosuch") {
			t.Errorf("server s%d: errors of the broken reload: %q, want one at c.yaml:5:col naming nosuch", i, last.Errors)
		}
		if _, now := reloadState(t, addrs[i]); now != before[i] {
			t.Errorf("server s%d: the running set changed on a refused reload:\n%s\nwas\n%s", i, now, before[i])
		}
		resp, err := http.Get("http://" + addrs[i] + "/readyz")
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("server s%d: /readyz after a broken reload: %v %v", i, resp, err)
		} else {
			resp.Body.Close()
		}
	}
	if got := len(reloadActions(t, st)); got != actions {
		t.Errorf("the broken reload wrote a reload action (%d in all, want %d)", got, actions)
	}
	tasks, err := st.Tasks(context.Background(), store.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		if tk.Pipeline == "c" || tk.Pipeline == "d" {
			t.Errorf("task %s of the refused set was synced", tk.ID)
		}
	}
	if ins := instancesOf(t, st, "d.w"); len(ins) != 0 {
		t.Errorf("d.w, of the refused set, has %d instance(s)", len(ins))
	}

	// Mend: the set without the bad file is applied whole.
	if err := os.Remove(filepath.Join(pipes, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	everyReloaded(true, "added d.w; schedules re-planned d", time.Time{})
	applied("added d.w; schedules re-planned d")
	waitFor(t, func() bool { return len(instancesOf(t, st, "d.w", axtype.Success)) > 0 })

	held := lease(t, st)
	if n > 1 {
		// The standby takes over with the set in force.
		srvs[0].crash(t)
		k := len(instancesOf(t, st, "d.w", axtype.Success))
		waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder != "s0" })
		waitFor(t, func() bool { return len(instancesOf(t, st, "d.w", axtype.Success)) > k+1 })
	}
	for _, s := range srvs {
		if s.cmd.ProcessState == nil {
			s.stop(t)
		}
	}
	logs := make([]string, n)
	for i, s := range srvs {
		b, _ := os.ReadFile(s.log.Name())
		logs[i] = string(b)
	}
	if !strings.Contains(logs[0], "msg=reload_refused") || !at.MatchString(logs[0]) {
		t.Error("the server log does not carry the refused reload's file:line:col")
	}
	if held.Epoch != 1 {
		t.Logf("the lease changed hands during the scenario (epoch %d, on a loaded machine): who applied is not checked in the logs", held.Epoch)
		return
	}
	if got := strings.Count(logs[0], "msg=pipelines_reloaded applied=true"); got != actions {
		t.Errorf("the primary logged applying %d reload(s), want %d", got, actions)
	}
	for i := 1; i < n; i++ {
		if strings.Contains(logs[i], "msg=pipelines_reloaded applied=true") || !strings.Contains(logs[i], "msg=pipelines_reloaded applied=false") {
			t.Errorf("standby s%d applied a reload, or did not take the reloaded set; its reload lines:\n%s", i, grepLines(logs[i], "reload"))
		}
	}
}

// TestDiffAndSIGHUP: ax diff shows what a reload of a directory would
// change against the running server; SIGHUP applies it.
func TestDiffAndSIGHUP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), reloadA)
	target := filepath.Join(dir, "ax.db")
	addr := freeAddr(t)
	srv := startServer(t, target, dir, "--listen", addr, "--watch", "0")
	st := openStore(t, target)
	waitFor(t, func() bool { return len(instancesOf(t, st, "a.x", axtype.Success)) > 0 })
	code, out, errOut := runAx(t, "diff", dir, "--server", "http://"+addr)
	if code != 0 || !strings.Contains(out, "no change") {
		t.Fatalf("ax diff of the running set: %d %q %q", code, out, errOut)
	}
	write(t, filepath.Join(dir, "q.yaml"), "pipeline: q\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: z, function: noop}\n")
	code, out, errOut = runAx(t, "diff", dir, "--server", "http://"+addr)
	want := "+ q.z                                      added\n@ q                                        schedule planned again from the reload\n1 added, 0 removed, 0 changed; 1 schedule(s) planned again\n"
	if code != 0 || out != want {
		t.Fatalf("ax diff after adding q.yaml: exit %d\n%s\nwant:\n%s\nstderr: %s", code, out, want, errOut)
	}
	write(t, filepath.Join(dir, "bad.yaml"), "pipeline: bad\ntasks:\n  - {name: z, function: noop, retry: {count: many}}\n")
	code, _, errOut = runAx(t, "diff", dir, "--server", "http://"+addr)
	if code != cli.ExitFailed || !strings.Contains(errOut, "bad.yaml:3:") {
		t.Errorf("ax diff with a broken file: exit %d, stderr %q", code, errOut)
	}
	if err := os.Remove(filepath.Join(dir, "bad.yaml")); err != nil {
		t.Fatal(err)
	}
	if len(reloadActions(t, st)) != 0 {
		t.Fatal("a reload happened with --watch 0 before SIGHUP")
	}
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(instancesOf(t, st, "q.z", axtype.Success)) > 0 })
	if code, out, _ := runAx(t, "diff", dir, "--server", "http://"+addr); code != 0 || !strings.Contains(out, "no change") {
		t.Errorf("ax diff after SIGHUP: %d %q", code, out)
	}
	srv.stop(t)
}

// grepLines returns the lines of text that contain any of words.
func grepLines(text string, words ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
