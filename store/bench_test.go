package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// cycle is a legal loop through the table: SCHEDULED → RUNNING → SUCCESS → SCHEDULED.
var cycle = [][2]axtype.State{{axtype.Scheduled, axtype.Running}, {axtype.Running, axtype.Success}, {axtype.Success, axtype.Scheduled}}

// benchInstances creates n SCHEDULED instances and takes the lease, so that
// transitions pay for fencing as the engine's do.
func benchInstances(b *testing.B, s *store.Store, n int) ([]axtype.Instance, int64) {
	b.Helper()
	ctx := context.Background()
	var defs []store.TaskDef
	var news []store.NewInstance
	for i := range n {
		id := fmt.Sprintf("b.t%d", i)
		defs = append(defs, store.TaskDef{ID: id, Pipeline: "b", Name: fmt.Sprintf("t%d", i), Group: "g", Priority: 3, Hash: "h", Definition: []byte("{}")})
		news = append(news, store.NewInstance{TaskID: id, Group: "g", Priority: 3, State: axtype.Scheduled, NextFireAt: storetest.T0})
	}
	if _, err := s.SyncDefinitions(ctx, store.SyncParams{Pipelines: []store.PipelineDef{{Name: "b", Hash: "h", Definition: []byte("{}"), Tasks: defs}}, Now: storetest.T0}); err != nil {
		b.Fatal(err)
	}
	_, ins, err := s.CreateRun(ctx, store.CreateRunParams{Pipeline: "b", Trigger: "b", Kind: axtype.RunSchedule, LogicalTime: storetest.T0, Now: storetest.T0, Instances: news})
	if err != nil {
		b.Fatal(err)
	}
	l, err := s.AcquireLease(ctx, store.LeaseParams{Holder: "bench", TTL: time.Hour, Now: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	return ins, l.Epoch
}

// raw is the baseline: the least a CAS transition with history can cost on
// the same database — UPDATE … WHERE version = ? plus the history INSERT in
// one transaction, nothing else.
func raw(ctx context.Context, s *store.Store, id, version int64, from, to axtype.State, now int64) error {
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.ExecContext(ctx, s.Bind("UPDATE instances SET state = ?, version = version + 1, updated_at = ? WHERE id = ? AND version = ? AND state = ?"),
		string(to), now, id, version, string(from)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.Bind("INSERT INTO history (instance_id, run_id, task_id, ticket, from_state, to_state, reason, actor, epoch, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
		id, 1, "b.t1", nil, string(from), string(to), "bench", "bench", 1, now); err != nil {
		return err
	}
	return tx.Commit()
}

// BenchmarkTransition compares single transitions through the store (fenced,
// with history and counters) with the raw baseline, interleaved in one loop
// so that both see the same machine. Metric ratio = store rate ÷ raw rate.
func BenchmarkTransition(b *testing.B) {
	for name, open := range storetest.All() {
		b.Run(name, func(b *testing.B) {
			s := open(b)
			ins, epoch := benchInstances(b, s, 2)
			ctx := context.Background()
			mine, base := ins[0], ins[1]
			var tStore, tRaw time.Duration
			i := 0
			for b.Loop() {
				step := cycle[i%3]
				now := time.Now()
				v, err := s.Transition(ctx, store.TransitionParams{InstanceID: mine.ID, Version: mine.Version, From: step[0], To: step[1],
					Epoch: epoch, Now: now, Actor: "bench", Reason: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				mine.Version = v
				mid := time.Now()
				if err := raw(ctx, s, base.ID, base.Version, step[0], step[1], now.UnixMilli()); err != nil {
					b.Fatal(err)
				}
				base.Version++
				tStore += mid.Sub(now)
				tRaw += time.Since(mid)
				i++
			}
			n := float64(i)
			b.ReportMetric(n/tStore.Seconds(), "store-tx/s")
			b.ReportMetric(n/tRaw.Seconds(), "raw-tx/s")
			b.ReportMetric(tRaw.Seconds()/tStore.Seconds(), "ratio")
		})
	}
}

// BenchmarkTransitionBatch compares 100 transitions in one TransitionBatch
// with the same 100 as single transitions. Metric speedup = batched rate ÷ single rate.
func BenchmarkTransitionBatch(b *testing.B) {
	const n = 100
	for name, open := range storetest.All() {
		b.Run(name, func(b *testing.B) {
			s := open(b)
			ins, epoch := benchInstances(b, s, 2*n)
			ctx := context.Background()
			batched, single := ins[:n], ins[n:]
			var tBatch, tSingle time.Duration
			i := 0
			for b.Loop() {
				step := cycle[i%3]
				now := time.Now()
				ps := make([]store.TransitionParams, n)
				for k, in := range batched {
					ps[k] = store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: step[0], To: step[1], Epoch: epoch, Now: now, Actor: "bench"}
				}
				res, err := s.TransitionBatch(ctx, ps)
				if err != nil {
					b.Fatal(err)
				}
				for k := range batched {
					if res[k].Err != nil {
						b.Fatal(res[k].Err)
					}
					batched[k].Version = res[k].Version
				}
				mid := time.Now()
				for k, in := range single {
					v, err := s.Transition(ctx, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: step[0], To: step[1], Epoch: epoch, Now: now, Actor: "bench"})
					if err != nil {
						b.Fatal(err)
					}
					single[k].Version = v
				}
				tBatch += mid.Sub(now)
				tSingle += time.Since(mid)
				i++
			}
			total := float64(i * n)
			b.ReportMetric(total/tBatch.Seconds(), "batched-tx/s")
			b.ReportMetric(total/tSingle.Seconds(), "single-tx/s")
			b.ReportMetric(tSingle.Seconds()/tBatch.Seconds(), "speedup")
		})
	}
}
