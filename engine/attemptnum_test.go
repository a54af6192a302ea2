package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// Every dispatch of an instance is a new attempt, numbered one past its
// last: an attempt given back at a shutdown, its retry, and an operator's
// rerun of the FAILED instance are attempts 1 to 4, each with its own
// output and record, and no write of output fails. The give-back is not
// counted against the retries: with retry.count 1 the instance still gets
// two counted attempts after it.
func TestGiveBackAndRerunAreNewAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		fns := map[string]func(context.Context, runner.Attempt) error{
			"n.a": func(ctx context.Context, _ runner.Attempt) error {
				calls++
				runner.Logger(ctx).Info(fmt.Sprintf("try %d", calls))
				switch calls {
				case 1:
					<-ctx.Done() // still running at the shutdown: given back
					return context.Cause(ctx)
				case 4:
					return nil
				}
				return errors.New("boom")
			},
		}
		e := setup(t, Config{Grace: time.Second}, fns, "pipeline: n\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: a, function: record, retry: {count: 1, interval: 1s}}\n")
		sleep(time.Hour + time.Second)
		e.stop()
		ins := e.instances(store.InstanceFilter{TaskID: "n.a"})
		if len(ins) != 1 || ins[0].State != axtype.Retrying {
			t.Fatalf("after the shutdown %+v, want one RETRYING (given back)", ins)
		}
		id := ins[0].ID
		again, stop := e.takeOver(Config{})
		sleep(10 * time.Second)
		if in, _ := e.st.Instance(context.Background(), id); in.State != axtype.Failed {
			t.Fatalf("after the give-back and one retry: %s attempt %d (%s), want FAILED after two counted attempts", in.State, in.Attempt, in.Error)
		}
		if _, err := again.Do(context.Background(), Rerun{Instance: id}, By{}); err != nil {
			t.Fatal(err)
		}
		sleep(5 * time.Second)
		lost := testutil.ToFloat64(again.logs.m.errors) + testutil.ToFloat64(e.eng.logs.m.errors)
		stop()
		in, err := e.st.Instance(context.Background(), id)
		if err != nil || in.State != axtype.Success || in.Attempt != 4 {
			t.Errorf("instance %+v %v, want SUCCESS at attempt 4", in, err)
		}
		if calls != 4 {
			t.Errorf("%d calls, want 4", calls)
		}
		if lost != 0 {
			t.Errorf("ax_task_output_errors_total %v, want 0: an attempt's output collided with another's", lost)
		}
		recs, err := e.st.Attempts(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs {
			got = append(got, fmt.Sprintf("%d:%s", r.Attempt, r.Status))
		}
		if want := "[1:failed 2:failed 3:failed 4:success]"; fmt.Sprint(got) != want {
			t.Errorf("attempt records %v, want %s", got, want)
		}
		for n := 1; n <= 4; n++ {
			lines := attemptLines(t, e.st, id, n)
			if len(lines) != 1 || !strings.HasSuffix(lines[0], fmt.Sprintf("msg=\"try %d\"", n)) {
				t.Errorf("attempt %d output %q, want only its own line (try %d)", n, lines, n)
			}
		}
	})
}
