package taskexec

import (
	"context"
	"strings"
	"testing"

	"github.com/ax-sched/ax/runner"
)

// TestAddFunctions: functions added to the binary are validated and run
// with the examples; a name the examples have already fails with the name.
func TestAddFunctions(t *testing.T) {
	extra.Lock()
	saved := extra.regs
	extra.Unlock()
	t.Cleanup(func() { extra.Lock(); extra.regs = saved; extra.Unlock() })
	ran := false
	AddFunctions(func(f *runner.Functions) error {
		return f.Register("team_fn", func(context.Context, runner.Attempt) error { ran = true; return nil })
	})
	names, err := FunctionNames()
	if err != nil || !strings.Contains(strings.Join(names, ","), "team_fn") || !strings.Contains(strings.Join(names, ","), "build_report") {
		t.Fatalf("FunctionNames %v, %v: want the examples and team_fn", names, err)
	}
	funcs, err := newFunctions(func(runner.Attempt) string { return "team_fn" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := funcs.Execute(context.Background(), runner.Attempt{Task: "t"}); err != nil || !ran {
		t.Errorf("team_fn: ran %v, %v", ran, err)
	}
	AddFunctions(func(f *runner.Functions) error { return f.Register("noop", nil) })
	_, err = FunctionNames()
	if want := `registering the functions of this binary: runner: function "noop" is registered already`; err == nil || err.Error() != want {
		t.Errorf("a duplicate name: %v, want %q", err, want)
	}
}
