package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// acceptingExecutor answers every dispatch 202 and hands it to the test,
// which posts the result wherever it likes.
func acceptingExecutor(t *testing.T) (url string, dispatched chan runner.Dispatch) {
	t.Helper()
	dispatched = make(chan runner.Dispatch, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d runner.Dispatch
		if err := json.NewDecoder(r.Body).Decode(&d); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		dispatched <- d
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"accepted":true}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/dispatch", dispatched
}

// postResult posts a result as an executor does, with the executor
// credential of the test servers on MySQL.
func postResult(t *testing.T, addr, body string) (int, string) {
	t.Helper()
	return postResultWith(t, addr, testExecutorToken, body)
}

func postResultWith(t *testing.T, addr, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+addr+"/api/v1/results", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestResultToStandbyAppliedByPrimary: an executor reports to the standby
// (its callback's server is gone, or it knows several): the standby stores
// the result before answering 200 and the primary applies it, once. Bad
// results are refused with their reason and recorded, and change nothing.
func TestResultToStandbyAppliedByPrimary(t *testing.T) {
	t.Parallel()
	eachServer(t, resultToStandby)
}

func resultToStandby(t *testing.T, kind string) {
	target := serverTarget(t, kind)
	url, dispatched := acceptingExecutor(t)
	dir := t.TempDir()
	src := fmt.Sprintf("pipeline: inbox\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: work, http: %q, timeout: 10m}\n  - {name: other, http: %q, timeout: 10m}\n", url, url)
	if err := os.WriteFile(filepath.Join(dir, "inbox.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, target)
	pa, pb := freeAddr(t), freeAddr(t)
	a := startServer(t, target, dir, "--holder", "a", "--listen", pa)
	waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder == "a" })
	b := startServer(t, target, dir, "--holder", "b", "--listen", pb)
	waitFor(t, func() bool { out, _ := os.ReadFile(b.log.Name()); return strings.Contains(string(out), "msg=standby") })
	waitPrimary(t, pa)

	for _, task := range []string{"inbox.work", "inbox.other"} {
		if code, out, errOut := runAx(t, "trigger", task, "--server", "http://"+pa); code != cli.ExitOK {
			t.Fatalf("trigger %s: %d %s %s", task, code, out, errOut)
		}
	}
	got := map[string]runner.Dispatch{}
	for range 2 {
		d := <-dispatched
		got[d.Task] = d
	}
	work, other := got["work"], got["other"]
	ctx := context.Background()
	before, err := st.Instance(ctx, work.InstanceID)
	if err != nil || before.State != axtype.Running {
		t.Fatalf("instance %+v, %v", before, err)
	}
	otherBefore, err := st.Instance(ctx, other.InstanceID)
	if err != nil || otherBefore.State != axtype.Running {
		t.Fatalf("instance %+v, %v", otherBefore, err)
	}

	// Bad input at the standby: refused with the reason, recorded, nothing stored or applied.
	big := strings.Repeat("x", runner.MaxReportOutput+1)
	for _, tc := range []struct {
		name, body string
		code       int
		want       string
	}{
		{"unknown ticket", `{"ticket":"no-such-ticket","status":"success"}`, 404, "ticket no-such-ticket is unknown"},
		{"another instance's ticket", fmt.Sprintf(`{"ticket":%q,"status":"success","instance_id":%d}`, other.Ticket, work.InstanceID), 409,
			fmt.Sprintf("ticket %s belongs to instance %d, not to instance %d", other.Ticket, other.InstanceID, work.InstanceID)},
		{"oversized output", fmt.Sprintf(`{"ticket":%q,"status":"success","output":%q}`, work.Ticket, big), 413, "more than 65536: send the tail"},
		{"malformed", `{"ticket":"x","status":"maybe"}`, 400, "want success or failed"},
		// What a scheduler leaves in the inbox (the output and record of an
		// attempt it ran) never comes from an executor.
		{"a scheduler's hand-over", fmt.Sprintf(`{"ticket":%q,"status":"success","left_by_scheduler":{"Chunks":[]}}`, work.Ticket), 400, `unknown field`},
	} {
		if code, body := postResult(t, pb, tc.body); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want %d %q", tc.name, code, body, tc.code, tc.want)
		}
	}
	refused, _ := st.Actions(ctx, store.LogFilter{Action: "refused_result"})
	if len(refused) != 3 {
		t.Errorf("refused results recorded: %+v, want 3", refused)
	}
	if pend, _ := st.PendingResults(ctx, 10); len(pend) != 0 {
		t.Errorf("refused results reached the inbox: %+v", pend)
	}
	for _, want := range []axtype.Instance{before, otherBefore} {
		if in, err := st.Instance(ctx, want.ID); err != nil || in.State != axtype.Running || in.Version != want.Version || in.Ticket != want.Ticket {
			t.Errorf("refused results changed instance %d: %+v (%v), was %+v", want.ID, in, err, want)
		}
	}

	// The good result, to the standby.
	good := fmt.Sprintf(`{"ticket":%q,"status":"success","duration_ms":5,"instance_id":%d}`, work.Ticket, work.InstanceID)
	if code, body := postResult(t, pb, good); code != 200 || !strings.Contains(body, `"received": "stored"`) {
		t.Fatalf("result to the standby: %d %s", code, body)
	}
	waitFor(t, func() bool { in, _ := st.Instance(ctx, work.InstanceID); return in.State == axtype.Success })
	waitFor(t, func() bool { e, _ := st.InboxEntryOf(ctx, work.Ticket); return e.Outcome == "applied" })
	// Delivered again, to the primary this time: recorded and ignored.
	if code, body := postResult(t, pa, good); code != 200 || !strings.Contains(body, `"duplicate": true`) {
		t.Errorf("second delivery: %d %s", code, body)
	}
	hist, _ := st.History(ctx, store.LogFilter{InstanceID: work.InstanceID})
	successes := 0
	for _, h := range hist {
		if h.To == axtype.Success {
			successes++
		}
	}
	if successes != 1 {
		t.Errorf("history %+v: %d successes, want 1", hist, successes)
	}
	if in, _ := st.Instance(ctx, other.InstanceID); in.State != axtype.Running || in.Ticket != other.Ticket {
		t.Errorf("the other instance changed: %+v", in)
	}
	b.stop(t)
	a.stop(t)
}

// TestLateOutputOfAnOldPrimaryReachesTheNewOne: primary a runs a command
// that prints a line, then waits for the test's word; a is stopped
// (SIGTERM, a 20 s grace) and standby b takes over while the command still
// runs. The command then prints a second line and exits 0 during a's grace,
// at once, so that it may end while b still takes over and finds its
// process group gone before a's result reaches the inbox:
// a can no longer record it (b holds the lease) and leaves the result, with
// the output not stored yet and the attempt's record, in the inbox; b
// applies them. ax logs on b shows both lines and the exit status, and the
// command ran once. Before, b recorded the result but the output written
// after the takeover and the attempt's record were lost (the header said
// "unknown", the second line was missing).
func TestLateOutputOfAnOldPrimaryReachesTheNewOne(t *testing.T) {
	t.Parallel()
	for name, target := range e2eTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tgt := target(t)
			dir := t.TempDir()
			record, goOn := filepath.Join(dir, "ran.txt"), filepath.Join(dir, "go-on")
			src := fmt.Sprintf(`pipeline: late
timezone: UTC
schedule: "@every 1h"
tasks:
  - name: work
    timeout: 1m
    command: ["sh", "-c", "echo ran >> %s; echo first line; i=0; while [ ! -e %s ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo second line"]
`, record, goOn)
			if err := os.WriteFile(filepath.Join(dir, "late.yaml"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			st := openStore(t, tgt)
			pa, pb := freeAddr(t), freeAddr(t)
			a := startServer(t, tgt, dir, "--holder", "a", "--listen", pa, "--shutdown-grace", "20s")
			waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder == "a" })
			waitPrimary(t, pa)
			b := startServer(t, tgt, dir, "--holder", "b", "--listen", pb)
			waitFor(t, func() bool { out, _ := os.ReadFile(b.log.Name()); return strings.Contains(string(out), "msg=standby") })
			if code, out, errOut := runAx(t, "trigger", "late.work", "--server", "http://"+pa); code != cli.ExitOK {
				t.Fatalf("trigger: %d %s %s", code, out, errOut)
			}
			ctx := context.Background()
			var in axtype.Instance
			waitFor(t, func() bool { // running, its first line stored
				ins, _ := st.Instances(ctx, store.InstanceFilter{TaskID: "late.work", States: []axtype.State{axtype.Running}})
				if len(ins) != 1 {
					return false
				}
				in = ins[0]
				cs, _ := st.LogChunks(ctx, in.ID, 1, 0, 0)
				return len(cs) > 0
			})
			old := lease(t, st)
			if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			takeover(t, st, old, time.Now())
			if now, _ := st.Instance(ctx, in.ID); now.State != axtype.Running {
				t.Fatalf("the instance is %s when b takes over, want RUNNING (the command waits for the test)", now.State)
			}
			if err := os.WriteFile(goOn, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := a.cmd.Wait(); err != nil {
				t.Errorf("a's exit: %v", err)
			}
			waitFor(t, func() bool { now, _ := st.Instance(ctx, in.ID); return now.State != axtype.Running })
			if now, _ := st.Instance(ctx, in.ID); now.State != axtype.Success {
				t.Errorf("the instance is %s %q, want SUCCESS", now.State, now.Error)
			}
			code, out, errOut := runAx(t, "logs", "late.work", "--server", "http://"+pb)
			for _, want := range []string{"stdout| first line", "stdout| second line", "success (exit status 0)"} {
				if !strings.Contains(out, want) {
					t.Errorf("ax logs on b: want %q in\n%s%s", want, out, errOut)
				}
			}
			if code != cli.ExitOK {
				t.Errorf("ax logs exit %d", code)
			}
			if out, _ := os.ReadFile(a.log.Name()); !strings.Contains(string(out), "result_left_in_inbox") {
				t.Error("a did not leave the result in the inbox: the test did not reach the case it is about")
			}
			b.stop(t)
			if ran, _ := os.ReadFile(record); strings.Count(string(ran), "ran") != 1 {
				t.Errorf("the command ran %d times, want once", strings.Count(string(ran), "ran"))
			}
		})
	}
}
