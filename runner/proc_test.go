package runner

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startGroup starts argv as the leader of a process group of its own, and
// kills and reaps the group when the test ends.
func startGroup(t *testing.T, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd
}

// waitFor polls cond until it holds, for processes to end or start: the
// kernel, not a clock of ours, decides when.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after 10 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestParseStartTime(t *testing.T) {
	t.Parallel()
	// Field 22 is 987654; the command name holds spaces and parentheses.
	rest := " S 1 100 100 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10\n"
	for _, name := range []string{"(sleep)", "(a b) c)", "()", "(x) S 1 2 3)"} {
		got, err := parseStartTime([]byte("4242 " + name + rest))
		if err != nil || got != 987654 {
			t.Errorf("%s: %d %v, want 987654", name, got, err)
		}
	}
	for _, bad := range []string{"4242 sleep S 1", "4242 (sleep) S 1 2 3", "4242 (sleep)" + strings.Replace(rest, "987654", "x", 1)} {
		if got, err := parseStartTime([]byte(bad)); err == nil {
			t.Errorf("%q: %d, want an error", bad, got)
		}
	}
}

// TestCheckGroups: a recorded group is alive while any process of it runs
// (its leader too, or only the children of a leader that exited); gone once
// its last process ended, or when its pid runs another process (same pgid,
// another start time: the number was reused); and never judged when it was
// recorded on another host, boot or PID namespace.
func TestCheckGroups(t *testing.T) {
	t.Parallel()
	if Where().Boot == "" || Where().PidNS == "" {
		t.Skip("no /proc boot id or PID namespace here")
	}
	leader := startGroup(t, "sleep", "60")
	alive, err := ProcessOf(leader.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if !alive.Local() || alive.Pgid != leader.Process.Pid || alive.Start == 0 {
		t.Fatalf("ProcessOf = %+v, want a local record of pgid %d with a start time", alive, leader.Process.Pid)
	}
	// The leader exits at once; its child sleeps on in the group.
	orphaned := startGroup(t, "sh", "-c", "sleep 60 & exit 0")
	withChild, err := ProcessOf(orphaned.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := orphaned.Wait(); err != nil { // the leader reaped: its pid is no process now
		t.Fatal(err)
	}
	reused := alive
	reused.Start++ // same pgid, another start time: a reused pid
	other := func(f func(*Process)) Process { p := alive; f(&p); return p }
	ps := []Process{alive, withChild, reused,
		other(func(p *Process) { p.Host += "-other" }), other(func(p *Process) { p.Boot = "another-boot" }),
		other(func(p *Process) { p.PidNS = "pid:[1]" }), other(func(p *Process) { p.Boot = "" }), {}}
	want := []GroupState{GroupAlive, GroupAlive, GroupGone, GroupElsewhere, GroupElsewhere, GroupElsewhere, GroupElsewhere, GroupElsewhere}
	if got := CheckGroups(ps); !equalStates(got, want) {
		t.Errorf("CheckGroups = %v, want %v", got, want)
	}
	// The leader killed and reaped: its group is gone.
	if err := syscall.Kill(-alive.Pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = leader.Wait()
	if got := CheckGroups([]Process{alive}); got[0] != GroupGone {
		t.Errorf("after the kill: %v, want gone", got[0])
	}
	// The child of the exited leader killed: gone, once it is no process
	// (a zombie left unreaped by an init that does not reap counts as gone).
	if !withChild.Kill() {
		t.Fatal("Kill of a live group reported false")
	}
	waitFor(t, "gone", func() bool { return CheckGroups([]Process{withChild})[0] == GroupGone })
	if withChild.Kill() {
		t.Error("Kill of a gone group reported true")
	}
}

func equalStates(a, b []GroupState) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCommandReportsItsGroup: Commands tells the function on the attempt's
// context where the command's group runs, as soon as it started, and the
// record names the command's own process and group.
func TestCommandReportsItsGroup(t *testing.T) {
	t.Parallel()
	c := NewCommands(func(Attempt) (CommandSpec, error) {
		return CommandSpec{Argv: []string{"sh", "-c", `echo "$$ $(cut -d' ' -f5 /proc/$$/stat)"`}}, nil
	})
	var got []Process
	ctx := WithStarted(context.Background(), func(p Process) { got = append(got, p) })
	res, err := c.Execute(ctx, Attempt{Ticket: "t1", Deadline: time.Now().Add(time.Minute)})
	if err != nil || res.Status != StatusSuccess {
		t.Fatalf("execute: %+v %v", res, err)
	}
	f := strings.Fields(string(res.Output))
	if len(f) != 2 {
		t.Fatalf("output %q, want pid and pgid", res.Output)
	}
	pid, _ := strconv.Atoi(f[0])
	pgid, _ := strconv.Atoi(f[1])
	if len(got) != 1 || got[0].Pgid != pid || pgid != pid || !got[0].Local() || got[0].Start == 0 {
		t.Fatalf("reported %+v; the command ran as pid %d in group %d", got, pid, pgid)
	}
	if h, _ := os.Hostname(); got[0].Host != h {
		t.Errorf("host %q, want %q", got[0].Host, h)
	}
}

// TestUnreapedLeaderOfALiveParentIsAlive: a command that ended while the
// scheduler that started it was stopped (SIGSTOP, a frozen VM) stays a
// zombie until that scheduler wakes and collects it, with its result. Its
// group is not gone: the primary that ran it is alive and knows the
// outcome, so a new primary must not fail the attempt and run it again.
// Once collected, it is gone. Before, the zombie counted as gone (a double
// run with two servers on MariaDB: SIGSTOP of the primary while a command
// finished).
func TestUnreapedLeaderOfALiveParentIsAlive(t *testing.T) {
	t.Parallel()
	if Where().Boot == "" || Where().PidNS == "" {
		t.Skip("no /proc boot id or PID namespace here")
	}
	ended := startGroup(t, "sh", "-c", "exit 0")
	p, err := ProcessOf(ended.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a zombie", func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pgid) + "/stat")
		state, _, _, ok := statGroup(b)
		return err == nil && ok && state == "Z"
	})
	if got := CheckGroups([]Process{p}); got[0] != GroupAlive {
		t.Errorf("exited, not collected by its live parent: %v, want alive", got[0])
	}
	_ = ended.Wait()
	if got := CheckGroups([]Process{p}); got[0] != GroupGone {
		t.Errorf("collected: %v, want gone", got[0])
	}
}
