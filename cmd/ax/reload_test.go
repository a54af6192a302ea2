package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// reloadGet reads GET /api/v1/reload of the server at addr.
func reloadGet(t *testing.T, addr string) (last *reloadStatus) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/reload")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out struct {
		Last *reloadStatus `json:"last"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil {
		return nil
	}
	return out.Last
}

func instancesOf(t *testing.T, st *store.Store, task string, states ...store.State) []store.Instance {
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
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	reloadA = "pipeline: a\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: x, function: noop}\n"
	// b.y runs until the file "release" appears beside the pipelines.
	reloadB = "pipeline: b\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - name: y\n    timeout: 1m\n    command: [\"sh\", \"-c\", \"while [ ! -f %s ]; do sleep 0.05; done\"]\n"
)

// TestServerReloadsPipelines: under a running server on SQLite, a pipeline
// file added, changed, removed while its task runs, and broken: each valid
// change is applied and written to the action log; the broken set keeps
// the running one, names file:line:col and leaves /readyz ready.
func TestServerReloadsPipelines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pipes := filepath.Join(dir, "pipelines")
	if err := os.Mkdir(pipes, 0o755); err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(dir, "release")
	write(t, filepath.Join(pipes, "a.yaml"), reloadA)
	target := filepath.Join(dir, "ax.db")
	addr := freeAddr(t)
	srv := startServer(t, target, pipes, "--listen", addr, "--watch", "100ms")
	st := openStore(t, target)
	waitFor(t, func() bool { return len(instancesOf(t, st, "a.x", store.Success)) > 0 })

	// Add: b.y starts firing.
	write(t, filepath.Join(pipes, "b.yaml"), strings.Replace(reloadB, "%s", release, 1))
	var running []store.Instance // started, not only claimed ahead of its fire time
	waitFor(t, func() bool {
		running = nil
		for _, in := range instancesOf(t, st, "b.y", store.Running) {
			if in.StartedAt.Before(time.Now().Add(-100 * time.Millisecond)) {
				running = append(running, in)
			}
		}
		return len(running) > 0
	})
	if as := reloadActions(t, st); len(as) != 1 || !strings.HasPrefix(as[0].Reason, "added b.y;") {
		t.Fatalf("reload actions after adding b.yaml: %+v", as)
	}

	// Change: a fires hourly from now on; its runs planned ahead every second are gone.
	write(t, filepath.Join(pipes, "a.yaml"), strings.Replace(reloadA, "@every 1s", "@every 1h", 1))
	waitFor(t, func() bool { return len(reloadActions(t, st)) == 2 })
	changedAt := reloadActions(t, st)[1].At
	if r := reloadActions(t, st)[1].Reason; r != "schedules re-planned a" {
		t.Errorf("reload action for the change: %q", r)
	}
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
	waitFor(t, func() bool { return len(reloadActions(t, st)) == 3 })
	if r := reloadActions(t, st)[2].Reason; r != "removed b.y; schedules re-planned b" {
		t.Errorf("reload action for the removal: %q", r)
	}
	write(t, release, "")
	waitFor(t, func() bool {
		in, err := st.Instance(context.Background(), running[0].ID)
		return err == nil && in.State == store.Success
	})
	if waiting := instancesOf(t, st, "b.y", store.Waiting, store.Scheduled, store.Running); len(waiting) != 0 {
		t.Errorf("b.y still has %d instance(s) waiting or running after its removal", len(waiting))
	}

	// Break: one bad file among the others keeps the whole running set.
	write(t, filepath.Join(pipes, "c.yaml"), "pipeline: c\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: z, function: noop, depends_on: [nosuch]}\n")
	var last *reloadStatus
	waitFor(t, func() bool { last = reloadGet(t, addr); return last != nil && !last.OK })
	if len(last.Errors) != 1 || !strings.Contains(last.Errors[0], filepath.Join(pipes, "c.yaml")+":5:") || !strings.Contains(last.Errors[0], "nosuch") {
		t.Errorf("errors of the broken reload: %q, want c.yaml:5:col naming nosuch", last.Errors)
	}
	if n := len(reloadActions(t, st)); n != 3 {
		t.Errorf("the broken reload wrote a reload action (%d in all)", n)
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("/readyz after a broken reload: %v %v", resp.StatusCode, err)
	}
	tasks, err := st.Tasks(context.Background(), store.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		if tk.Pipeline == "c" {
			t.Errorf("task %s of the broken file was synced", tk.ID)
		}
	}
	srv.stop(t)
	logged, _ := os.ReadFile(srv.log.Name())
	if !strings.Contains(string(logged), "msg=reload_refused") || !strings.Contains(string(logged), "c.yaml:5:") {
		t.Error("the server log does not carry the refused reload's file:line:col")
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
	waitFor(t, func() bool { return len(instancesOf(t, st, "a.x", store.Success)) > 0 })
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
	if code != exitFailed || !strings.Contains(errOut, "bad.yaml:3:") {
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
	waitFor(t, func() bool { return len(instancesOf(t, st, "q.z", store.Success)) > 0 })
	if code, out, _ := runAx(t, "diff", dir, "--server", "http://"+addr); code != 0 || !strings.Contains(out, "no change") {
		t.Errorf("ax diff after SIGHUP: %d %q", code, out)
	}
	srv.stop(t)
}

// TestHAReloadOnlyPrimaryApplies: two servers on one MariaDB database both
// reload a changed directory; only the primary writes the definitions and
// the action; the standby holds the set for when it takes over.
func TestHAReloadOnlyPrimaryApplies(t *testing.T) {
	t.Parallel()
	target := "mysql://" + storetest.MySQLDSN(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), reloadA)
	st := openStore(t, target)
	addrA, addrB := freeAddr(t), freeAddr(t)
	a := startServer(t, target, dir, "--holder", "a", "--listen", addrA, "--watch", "100ms")
	waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder == "a" })
	b := startServer(t, target, dir, "--holder", "b", "--listen", addrB, "--watch", "100ms")
	waitFor(t, func() bool { return len(instancesOf(t, st, "a.x", store.Success)) > 0 })
	write(t, filepath.Join(dir, "q.yaml"), "pipeline: q\ntimezone: UTC\nschedule: \"@every 1s\"\noverlap: allow # the crashed primary's attempt is not waited for\ntasks:\n  - {name: z, function: noop}\n")
	for _, addr := range []string{addrA, addrB} {
		waitFor(t, func() bool {
			l := reloadGet(t, addr)
			return l != nil && l.OK && l.Summary == "added q.z; schedules re-planned q"
		})
	}
	held := lease(t, st) // who was primary when both had reloaded
	waitFor(t, func() bool { return len(instancesOf(t, st, "q.z", store.Success)) > 0 })
	if as := reloadActions(t, st); len(as) != 1 {
		t.Errorf("reload actions: %d, want 1 (the primary's)", len(as))
	}
	// The standby takes over with the new set.
	a.crash(t)
	n := len(instancesOf(t, st, "q.z", store.Success))
	waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder == "b" })
	waitFor(t, func() bool { return len(instancesOf(t, st, "q.z", store.Success)) > n+1 })
	b.stop(t)
	if held.Epoch != 1 {
		t.Logf("the lease changed hands before the reload (epoch %d, on a loaded machine): the standby's log is not checked", held.Epoch)
		return
	}
	logB, _ := os.ReadFile(b.log.Name())
	if !strings.Contains(string(logB), "msg=pipelines_reloaded applied=false") {
		t.Errorf("the standby did not log taking the reloaded set; its reload and lease lines:\n%s", grepLines(string(logB), "reload", "lease", "standby", "ax:"))
	}
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
