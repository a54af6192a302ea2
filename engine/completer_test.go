package engine

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
)

// TestJudgeResult is the table of the completer's rule: what a result does
// to its RUNNING instance.
func TestJudgeResult(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	task := &taskInfo{id: "p.t", def: &defs.Task{Pipeline: "p", Name: "t", Timeout: time.Minute,
		Retry: defs.Retry{Count: 2, Interval: 10 * time.Second}}}
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	for _, tc := range []struct {
		name         string
		res          runner.Result
		counted      int // attempts counted, this one included
		interrupted  bool
		due          time.Time
		refusalLimit time.Time
		notStarted   string

		to        axtype.State
		next      *time.Time // NextFireAt set, or nil
		count     *int       // Counted set (not counted), or nil
		refused   bool
		status    string
		action    string
		reason    string
		errorText string
	}{
		{name: "success", res: runner.Result{Status: runner.StatusSuccess, Duration: 1500 * time.Millisecond}, counted: 1,
			to: axtype.Success, status: "success", action: "result", reason: "succeeded in 1.5s"},
		{name: "killed", res: runner.Result{Status: runner.StatusKilled, Error: "killed by alice"}, counted: 1,
			to: axtype.Killed, status: "killed", action: "result", reason: "killed", errorText: "killed by alice"},
		{name: "failure with retries left waits the interval", res: runner.Result{Status: runner.StatusFailed, Error: "exit 1"}, counted: 1,
			to: axtype.Retrying, next: at(10 * time.Second), status: "failed", action: "retry",
			reason: "failed: retry 1 of 2 at 2026-03-01T12:00:10Z: exit 1", errorText: "exit 1"},
		{name: "the last retry", res: runner.Result{Status: runner.StatusFailed, Error: "exit 1"}, counted: 2,
			to: axtype.Retrying, next: at(10 * time.Second), status: "failed", action: "retry",
			reason: "failed: retry 2 of 2 at 2026-03-01T12:00:10Z: exit 1", errorText: "exit 1"},
		{name: "no retries left fails", res: runner.Result{Status: runner.StatusFailed, Error: "exit 1"}, counted: 3,
			to: axtype.Failed, status: "failed", action: "failed", reason: "failed after 3 attempt(s): exit 1", errorText: "exit 1"},
		{name: "a permanent failure is not retried", res: runner.Result{Status: runner.StatusFailed, Error: "bad input", Permanent: true}, counted: 1,
			to: axtype.Failed, status: "failed", action: "failed", reason: "failed after 1 attempt(s): bad input", errorText: "bad input"},
		{name: "a timeout is retried as a timeout", res: runner.Result{Status: runner.StatusTimeout, Error: "timeout: no result within 1m0s"}, counted: 1,
			to: axtype.Retrying, next: at(10 * time.Second), status: "timeout", action: "timeout",
			reason: "timeout: retry 1 of 2 at 2026-03-01T12:00:10Z: timeout: no result within 1m0s", errorText: "timeout: no result within 1m0s"},
		{name: "interrupted by shutdown is given back now, uncounted", res: runner.Result{Status: runner.StatusFailed, Error: "context canceled"},
			counted: 2, interrupted: true, to: axtype.Retrying, next: at(0), count: ptr(1), refused: true, status: "interrupted", action: "interrupted",
			reason: "interrupted by shutdown: given back after the grace period, the attempt not counted", errorText: "interrupted by shutdown"},
		{name: "claimed ahead and never started is given back at its fire time", res: runner.Result{Status: runner.StatusFailed},
			counted: 1, interrupted: true, due: now.Add(30 * time.Second), notStarted: "not started: stopped",
			to: axtype.Retrying, next: at(30 * time.Second), count: ptr(0), refused: true, status: "interrupted", action: "interrupted",
			reason: "not started: stopped", errorText: "interrupted by shutdown"},
		{name: "a success within the grace period is a success", res: runner.Result{Status: runner.StatusSuccess}, counted: 1, interrupted: true,
			to: axtype.Success, status: "success", action: "result", reason: "succeeded in 0s"},
		{name: "refused is offered again in 5 s, uncounted", res: runner.Result{Status: runner.StatusFailed, Refused: true, Error: "busy"},
			counted: 1, refusalLimit: now.Add(time.Minute), to: axtype.Retrying, next: at(5 * time.Second), count: ptr(0), refused: true,
			status: "refused", action: "refused",
			reason: "no executor took it, trying again at 2026-03-01T12:00:05Z (until 2026-03-01T12:01:00Z): busy", errorText: "busy"},
		{name: "refused close to its limit is offered at the limit", res: runner.Result{Status: runner.StatusFailed, Refused: true, Error: "busy"},
			counted: 1, refusalLimit: now.Add(2 * time.Second), to: axtype.Retrying, next: at(2 * time.Second), count: ptr(0), refused: true,
			status: "refused", action: "refused",
			reason: "no executor took it, trying again at 2026-03-01T12:00:02Z (until 2026-03-01T12:00:02Z): busy", errorText: "busy"},
		{name: "refused past its limit fails and retries per policy", res: runner.Result{Status: runner.StatusSuccess, Refused: true, Error: "busy"},
			counted: 1, refusalLimit: now, to: axtype.Retrying, next: at(10 * time.Second), status: "failed", action: "retry",
			reason:    "failed: retry 1 of 2 at 2026-03-01T12:00:10Z: no executor took it within its timeout of 1m0s: busy",
			errorText: "no executor took it within its timeout of 1m0s: busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Its number is another than its count: a result judges by the count.
			a := &attempt{ticket: "tk", version: 7, task: task, attempt: tc.counted + 4, counted: tc.counted, interrupted: tc.interrupted, due: tc.due}
			tc.res.Ticket = "tk"
			o := outcome{instance: 42, res: tc.res, notStarted: tc.notStarted}
			p, m := judgeResult(o, a, resultRule{now: now, epoch: 3, refusalLimit: tc.refusalLimit, backoffCap: time.Hour})
			if p.InstanceID != 42 || p.Version != 7 || p.From != axtype.Running || p.Epoch != 3 || p.To != tc.to {
				t.Errorf("transition = %d v%d %s→%s epoch %d; want 42 v7 RUNNING→%s epoch 3", p.InstanceID, p.Version, p.From, p.To, p.Epoch, tc.to)
			}
			if m.to != tc.to || m.refused != tc.refused || m.status != tc.status || m.id != 42 || m.a != a {
				t.Errorf("judged = %+v; want to %s, refused %v, status %q", m, tc.to, tc.refused, tc.status)
			}
			if p.Reason != tc.reason {
				t.Errorf("reason = %q; want %q", p.Reason, tc.reason)
			}
			if p.Action == nil || p.Action.Action != tc.action {
				t.Errorf("action = %+v; want %q", p.Action, tc.action)
			}
			if p.Set.Error == nil || *p.Set.Error != tc.errorText {
				t.Errorf("error = %v; want %q", p.Set.Error, tc.errorText)
			}
			if p.Set.EndedAt == nil || !p.Set.EndedAt.Equal(now) {
				t.Errorf("ended at = %v; want %v", p.Set.EndedAt, now)
			}
			switch {
			case tc.next == nil && p.Set.NextFireAt != nil:
				t.Errorf("next fire = %v; want none", *p.Set.NextFireAt)
			case tc.next != nil && (p.Set.NextFireAt == nil || !p.Set.NextFireAt.Equal(*tc.next)):
				t.Errorf("next fire = %v; want %v", p.Set.NextFireAt, *tc.next)
			}
			switch {
			case tc.count == nil && p.Set.Counted != nil:
				t.Errorf("count set to %d; want it counted (unset)", *p.Set.Counted)
			case tc.count != nil && (p.Set.Counted == nil || *p.Set.Counted != *tc.count):
				t.Errorf("count = %v; want %d", p.Set.Counted, *tc.count)
			}
			if p.Set.Attempt != nil {
				t.Errorf("attempt number set to %d by a result; only a dispatch numbers an attempt", *p.Set.Attempt)
			}
		})
	}
}
