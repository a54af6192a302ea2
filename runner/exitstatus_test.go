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
