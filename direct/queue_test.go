package direct

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// TestQueueOpNeverReportsAppliedAsWithdrawn: the CLI's --store path waits
// for the primary; a request nobody claimed is withdrawn (and can no longer
// be applied), while one the primary claimed is waited for and never
// reported withdrawn, even when its outcome comes late or not at all.
func TestQueueOpNeverReportsAppliedAsWithdrawn(t *testing.T) {
	ctx := context.Background()
	op := store.Op{Kind: "trigger", Target: "a.x", Args: "{}"}
	// scheduler claims the first pending request at claimAt (never: 0) and
	// records its outcome at finishAt (never: 0).
	scheduler := func(st *store.Store, claimAt, finishAt time.Duration, stop <-chan struct{}) {
		start := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ops, _ := st.PendingOps(ctx, 1)
			if claimAt > 0 && len(ops) == 1 && time.Since(start) >= claimAt {
				if err := st.ClaimOp(ctx, ops[0].ID, 0); err != nil {
					t.Errorf("claim: %v", err)
				}
				for finishAt > 0 && time.Since(start) < finishAt {
					time.Sleep(50 * time.Millisecond)
				}
				if finishAt > 0 {
					_ = st.FinishOp(ctx, ops[0].ID, "run 7 started", nil, 0, time.Now())
				}
				return
			}
		}
	}
	for _, tc := range []struct {
		name              string
		claimAt, finishAt time.Duration
		want, wantErr     string
		state             string
	}{
		{"nobody applies it", 0, 0, "", "(the request was withdrawn)", store.OpFailed},
		{"applied in time", time.Second, 2 * time.Second, "run 7 started", "", store.OpDone},
		{"claimed at the last moment, recorded after the wait", 2900 * time.Millisecond, 4 * time.Second, "run 7 started", "", store.OpDone},
		{"claimed, its outcome never recorded", time.Second, 0, "", "the scheduler took it (request 1) but recorded no outcome within 6s", store.OpApplying},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := storetest.SQLite(t)
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() { scheduler(st, tc.claimAt, tc.finishAt, stop); close(done) }()
				got, err := QueueOp(ctx, st, op, 3*time.Second)
				close(stop)
				<-done
				if got != tc.want || (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("QueueOp = %q, %v; want %q, an error with %q", got, err, tc.want, tc.wantErr)
				}
				if o, err := st.GetOp(ctx, 1); err != nil || o.State != tc.state {
					t.Errorf("request after it: %+v, %v; want %s", o, err, tc.state)
				}
			})
		})
	}
}
