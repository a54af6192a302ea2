package runner

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A command that exits 0 while something it started still holds its output
// pipe (here a background sleep) is a success: the output copier giving up
// (exec.ErrWaitDelay) must never turn an exit status into a failure.
func TestCommandExitZeroWithHeldPipeIsSuccess(t *testing.T) {
	t.Parallel()
	c := commands("sh", "-c", "echo done; sleep 3 & exit 0")
	c.Grace = 50 * time.Millisecond // the copier's wait after the exit
	r, err := c.Execute(context.Background(), attempt("t-held"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusSuccess || r.Error != "" {
		t.Fatalf("exit 0 with a held pipe: status %s, error %q; want success", r.Status, r.Error)
	}
	if !strings.Contains(string(r.Output), "done") {
		t.Errorf("output %q lost the line written before the exit", r.Output)
	}
}

// The same with a non-zero exit stays a failure naming the exit status.
func TestCommandExitNonZeroWithHeldPipeIsFailure(t *testing.T) {
	t.Parallel()
	c := commands("sh", "-c", "sleep 3 & exit 4")
	c.Grace = 50 * time.Millisecond
	r, err := c.Execute(context.Background(), attempt("t-held4"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusFailed || !strings.HasPrefix(r.Error, "exit status 4") {
		t.Fatalf("exit 4 with a held pipe: status %s, error %q; want failed with exit status 4", r.Status, r.Error)
	}
}

// A command that exits 0 at once while a child it left behind holds its
// output pipe is a success as soon as it exits, within its timeout: the
// child is ended with the command (as it always was, after the wait) so the
// output ends there, and the wait for the copier never runs into the
// deadline. It took the whole 5 s grace and, with a timeout of 5 s or
// less, was recorded as a timeout (outside finding F8).
func TestCommandExitZeroWithHeldPipeEndsAtItsExit(t *testing.T) {
	t.Parallel()
	c := commands("sh", "-c", "(echo child; sleep 30) & sleep 0.2; echo done; exit 0")
	a := attempt("t-held-deadline")
	a.Deadline = time.Now().Add(3 * time.Second) // shorter than the 5 s grace
	r, err := c.Execute(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusSuccess || r.Error != "" {
		t.Fatalf("exit 0 with a held pipe and a 3 s deadline: status %s, error %q after %s; want success", r.Status, r.Error, r.Duration)
	}
	if r.Duration >= 2*time.Second {
		t.Errorf("took %s: the attempt should end when its command exits (0.2 s), not after the copier's grace", r.Duration)
	}
	for _, line := range []string{"child", "done"} {
		if !strings.Contains(string(r.Output), line) {
			t.Errorf("output %q lost %q", r.Output, line)
		}
	}
}

// A child that left the command's process group (setsid) is not ended
// with it and holds the output pipe past the exit: the output copier then
// gives up after the grace (exec.ErrWaitDelay), and the exit status 0 is
// still the outcome, not "WaitDelay expired".
func TestCommandExitZeroWithPipeHeldOutsideItsGroupIsSuccess(t *testing.T) {
	t.Parallel()
	c := commands("sh", "-c", "setsid -f sleep 3; echo done; exit 0")
	c.Grace = 100 * time.Millisecond
	r, err := c.Execute(context.Background(), attempt("t-held-setsid"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusSuccess || r.Error != "" {
		t.Fatalf("exit 0 with the pipe held outside its group: status %s, error %q; want success", r.Status, r.Error)
	}
	if r.ExitCode == nil || *r.ExitCode != 0 {
		t.Errorf("exit code %v, want 0", r.ExitCode)
	}
	if !strings.Contains(string(r.Output), "done") {
		t.Errorf("output %q lost the line written before the exit", r.Output)
	}
}
