package main

import (
	"context"
	"fmt"
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

// TestTakeoverChecksCommandGroups: a server
// runs two commands that leave a child behind in their groups
// (`sleep 60 & sleep 60`), and is SIGKILLed: Pdeathsig kills the direct
// child, the background sleep lives on in each group. The test ends one
// group itself. A second server on the same store takes over and fails the
// attempt whose group is gone once the inbox has had its 5 s to bring a
// result the old primary might have left (and within a second or two
// more), saying so, while the one whose group still runs stays RUNNING (it keeps
// the unknown-outcome rule until its timeout); ax logs names the group,
// host and boot of each. Before, both stayed RUNNING for their 10-minute
// timeout.
func TestTakeoverChecksCommandGroups(t *testing.T) {
	t.Parallel()
	if w := runner.Where(); w.Boot == "" || w.PidNS == "" {
		t.Skip("no /proc boot id or PID namespace here")
	}
	for name, target := range e2eTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tgt := target(t)
			dir := t.TempDir()
			src := `pipeline: og
timezone: UTC
schedule: "@every 1h"
tasks:
  - {name: freed, command: ["sh", "-c", "sleep 60 & sleep 60"], timeout: 10m}
  - {name: held, command: ["sh", "-c", "sleep 60 & sleep 60"], timeout: 10m}
`
			if err := os.WriteFile(filepath.Join(dir, "og.yaml"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			apiA, apiB := freeAddr(t), freeAddr(t)
			a := startServer(t, tgt, dir, "--holder", "a", "--listen", apiA)
			st := openStore(t, tgt)
			waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder == "a" })
			procs := map[string]store.ProcRecord{}
			for _, task := range []string{"freed", "held"} {
				// Until it has loaded its term, the new primary answers as a standby.
				waitFor(t, func() bool {
					code, _, _ := runAx(t, "trigger", "og."+task, "--server", "http://"+apiA)
					return code == cli.ExitOK
				})
			}
			ids := map[string]int64{}
			waitFor(t, func() bool { // both running, and where their groups run recorded
				for _, task := range []string{"freed", "held"} {
					ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "og." + task, States: []axtype.State{axtype.Running}})
					if len(ins) != 1 {
						return false
					}
					got, _ := st.Procs(context.Background(), []string{ins[0].Ticket})
					p, ok := got[ins[0].Ticket]
					if !ok || p.Kind != store.ProcGroup { // the scheduler's own record comes first, the group's within 20 ms
						return false
					}
					procs[task], ids[task] = p, ins[0].ID
				}
				return true
			})
			proc := func(task string) runner.Process {
				p := procs[task]
				return runner.Process{Host: p.Host, Boot: p.Boot, PidNS: p.PidNS, Pgid: p.Pgid, Start: p.Start}
			}
			t.Cleanup(func() { proc("held").Kill() })
			old := lease(t, st)
			a.crash(t)
			// The background sleep outlives the server in each group; end one.
			waitFor(t, func() bool { return runner.CheckGroups([]runner.Process{proc("freed")})[0] == runner.GroupAlive })
			if err := syscall.Kill(-procs["freed"].Pgid, syscall.SIGKILL); err != nil {
				t.Fatalf("end the group of freed: %v", err)
			}
			waitFor(t, func() bool { return runner.CheckGroups([]runner.Process{proc("freed")})[0] == runner.GroupGone })
			if st := runner.CheckGroups([]runner.Process{proc("held")})[0]; st != runner.GroupAlive {
				t.Fatalf("the group of held after the crash: %v, want alive (its background sleep)", st)
			}
			startServer(t, tgt, dir, "--holder", "b", "--listen", apiB)
			takeover(t, st, old, time.Now())
			tookOver := time.Now()
			instance := func(task string) axtype.Instance {
				in, err := st.Instance(context.Background(), ids[task])
				if err != nil {
					t.Fatal(err)
				}
				return in
			}
			waitFor(t, func() bool { return instance("freed").State != axtype.Running })
			failedIn := time.Since(tookOver)
			want := fmt.Sprintf("unknown outcome: its process group %d is gone (the primary that ran it died)", procs["freed"].Pgid)
			if in := instance("freed"); in.State != axtype.Failed || in.Error != want {
				t.Errorf("freed: %s %q, want FAILED with %q", in.State, in.Error, want)
			}
			if failedIn < 4500*time.Millisecond || failedIn > 8*time.Second {
				t.Errorf("freed failed %s after the takeover, want after the inbox's %s and within a second or two more", failedIn, 5*time.Second)
			}
			t.Logf("freed failed %s after the takeover was seen (polled every 100 ms)", failedIn.Round(time.Millisecond))
			// One pass checks every inherited group: the pass that failed freed
			// found held's group alive, and left it to its timeout.
			if in := instance("held"); in.State != axtype.Running || strings.Contains(in.Error, "unknown outcome") {
				t.Errorf("held (its group alive): %s %q, want RUNNING until its timeout", in.State, in.Error)
			}
			// ax logs says where each attempt runs or ran: its group, host and boot.
			for _, task := range []string{"freed", "held"} {
				_, out, errOut := runAx(t, "logs", "og."+task, "--server", "http://"+apiB)
				p := procs[task]
				if want := fmt.Sprintf("executor local:%s (pgid %d on %s, boot %s)", p.Host, p.Pgid, p.Host, p.Boot); !strings.Contains(out, want) {
					t.Errorf("ax logs og.%s: want %q in\n%s%s", task, want, out, errOut)
				}
			}
		})
	}
}
