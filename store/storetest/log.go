package storetest

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ax-sched/ax/store"
)

// testTaskOutput: chunks of output by attempt come back in order and intact
// (binary too), trims drop the oldest, attempts are recorded once per
// number, and a stale epoch writes nothing at all.
func testTaskOutput(t *testing.T, s *store.Store) {
	in := Seed(t, s)["a.x"]
	l := acquire(t, s, "p1", T0)
	binary := []byte{1, 0, 0, 0, 3, 0xff, 0x00, 0xfe} // a record of 3 bytes that are not text
	big := bytes.Repeat([]byte("0123456789abcdef"), 40000)
	f := s.Fence(l.Epoch)
	w := store.LogWrite{Chunks: []store.LogChunk{
		{InstanceID: in.ID, Attempt: 1, Seq: 1, Text: 3, Data: binary, At: T0},
		{InstanceID: in.ID, Attempt: 1, Seq: 2, Text: int64(len(big)), Data: big, At: T0.Add(time.Second)},
		{InstanceID: in.ID, Attempt: 2, Seq: 1, Text: 1, Data: []byte("x"), At: T0.Add(2 * time.Second)},
	}}
	if err := f.WriteLogs(ctx(), w); err != nil {
		t.Fatal(err)
	}
	// A chunk written again (a retried write whose first outcome was not
	// known) replaces the first, with the same bytes; nothing fails.
	if err := f.WriteLogs(ctx(), store.LogWrite{Chunks: w.Chunks[2:]}); err != nil {
		t.Fatalf("the same chunk written again: %v", err)
	}
	if again, _ := s.LogChunks(ctx(), in.ID, 2, 0, 0); len(again) != 1 || string(again[0].Data) != "x" {
		t.Errorf("attempt 2 after its chunk was written again: %+v, want the one chunk", again)
	}
	got, err := s.LogChunks(ctx(), in.ID, 1, 0, 0)
	if err != nil || len(got) != 2 || !bytes.Equal(got[0].Data, binary) || !bytes.Equal(got[1].Data, big) || !got[1].At.Equal(T0.Add(time.Second)) {
		t.Fatalf("attempt 1 chunks = %d %v", len(got), err)
	}
	if after, _ := s.LogChunks(ctx(), in.ID, 1, 1, 0); len(after) != 1 || after[0].Seq != 2 {
		t.Errorf("chunks after seq 1 = %+v", after)
	}
	if nums, err := s.LogAttempts(ctx(), in.ID); err != nil || len(nums) != 2 || nums[0] != 1 || nums[1] != 2 {
		t.Errorf("attempts with output = %v %v", nums, err)
	}
	// Trim the first chunk, and record the attempt twice (the second wins).
	code := 3
	if _, err := s.LatestAttempt(ctx(), "a.x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("latest attempt before any is recorded: %v, want ErrNotFound", err)
	}
	rec := store.AttemptRecord{InstanceID: in.ID, Attempt: 1, RunID: in.RunID, TaskID: "a.x", Ticket: "t1", Executor: "local:h",
		Argv: []string{"sh", "-c", "echo 'a \"b\"' ünï"}, Status: "failed", ExitCode: &code, Error: "exit status 3", StartedAt: T0, EndedAt: T0.Add(2 * time.Second), LogBytes: int64(len(big)), LogDropped: 3}
	if err := f.WriteLogs(ctx(), store.LogWrite{Trims: []store.LogTrim{{InstanceID: in.ID, Attempt: 1, BeforeSeq: 2}},
		Attempts: []store.AttemptRecord{rec, rec},
		Procs:    []store.ProcRecord{{Ticket: "t1", InstanceID: in.ID, RunID: in.RunID, Host: "h", Boot: "boot-1", PidNS: "pid:[1]", Pgid: 4242, Start: 7, At: T0}}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LogChunks(ctx(), in.ID, 1, 0, 0); len(got) != 1 || got[0].Seq != 2 {
		t.Errorf("after the trim: %d chunks", len(got))
	}
	as, err := s.Attempts(ctx(), in.ID)
	if err != nil || len(as) != 1 || as[0].ExitCode == nil || *as[0].ExitCode != 3 || as[0].Executor != "local:h" || !as[0].StartedAt.Equal(T0) || as[0].LogDropped != 3 {
		t.Fatalf("attempts = %+v %v", as, err)
	}
	if !slices.Equal(as[0].Argv, rec.Argv) {
		t.Errorf("the attempt's recorded command = %q, want %q", as[0].Argv, rec.Argv)
	}
	rec2 := store.AttemptRecord{InstanceID: in.ID, Attempt: 2, RunID: in.RunID, TaskID: "a.x", Ticket: "t2", Executor: "http://x/dispatch", Status: "success", EndedAt: T0.Add(3 * time.Second)}
	if err := f.WriteLogs(ctx(), store.LogWrite{Attempts: []store.AttemptRecord{rec2}}); err != nil {
		t.Fatal(err)
	}
	if last, err := s.LatestAttempt(ctx(), "a.x"); err != nil || last.Attempt != 2 || last.Argv != nil || last.Executor != rec2.Executor {
		t.Errorf("latest attempt of a.x = %+v %v; want attempt 2, no command", last, err)
	}
	// The record carries where the command ran: its process group's.
	if a := as[0]; a.Host != "h" || a.BootID != "boot-1" || a.Pgid != 4242 || a.Pid != 0 {
		t.Errorf("attempt's process: host %q, boot %q, pgid %d, pid %d; want h, boot-1, 4242, 0", a.Host, a.BootID, a.Pgid, a.Pid)
	}
	// A stale epoch: nothing of the write lands.
	err = s.Fence(l.Epoch+7).WriteLogs(ctx(), store.LogWrite{Chunks: []store.LogChunk{{InstanceID: in.ID, Attempt: 3, Seq: 1, Data: []byte("late"), At: T0}},
		Attempts: []store.AttemptRecord{{InstanceID: in.ID, Attempt: 3, EndedAt: T0}}})
	if !errors.Is(err, store.ErrNotLeader) {
		t.Errorf("stale epoch: %v, want ErrNotLeader", err)
	}
	if got, _ := s.LogChunks(ctx(), in.ID, 3, 0, 0); len(got) != 0 {
		t.Errorf("a fenced write left %d chunks", len(got))
	}
	if as, _ := s.Attempts(ctx(), in.ID); len(as) != 2 {
		t.Errorf("a fenced write left an attempt: %+v", as)
	}
	testRunOutputs(t, s, f, in.ID, in.RunID)
}

// testRunOutputs: a run's outputs are those of each task's attempt that
// succeeded last; a failed attempt's are never read.
func testRunOutputs(t *testing.T, s *store.Store, f *store.Fence, instance, run int64) {
	t.Helper()
	recs := []store.AttemptRecord{
		{InstanceID: instance, Attempt: 10, RunID: run, TaskID: "a.x", Ticket: "t3", Status: "success", EndedAt: T0, Outputs: map[string]string{"rows": "12", "note": "a=b ü"}},
		{InstanceID: instance, Attempt: 11, RunID: run, TaskID: "a.x", Ticket: "t4", Status: "failed", EndedAt: T0, Outputs: map[string]string{"rows": "bad"}},
	}
	if err := f.WriteLogs(ctx(), store.LogWrite{Attempts: recs}); err != nil {
		t.Fatal(err)
	}
	got, err := s.RunOutputs(ctx(), run, []string{"a.x", "a.none"})
	if err != nil || len(got) != 1 || got["a.x"]["rows"] != "12" || got["a.x"]["note"] != "a=b ü" {
		t.Errorf("run outputs after a success and a failure = %v %v; want a.x rows=12 (the failed attempt's never)", got, err)
	}
	rerun := store.AttemptRecord{InstanceID: instance, Attempt: 12, RunID: run, TaskID: "a.x", Ticket: "t5", Status: "success", EndedAt: T0, Outputs: map[string]string{"rows": "40"}}
	if err := f.WriteLogs(ctx(), store.LogWrite{Attempts: []store.AttemptRecord{rerun}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.RunOutputs(ctx(), run, []string{"a.x"}); err != nil || len(got["a.x"]) != 1 || got["a.x"]["rows"] != "40" {
		t.Errorf("run outputs after a rerun = %v %v; want the rerun's rows=40 alone", got, err)
	}
	if as, err := s.Attempts(ctx(), instance); err != nil || len(as) != 5 || as[2].Outputs["rows"] != "12" || as[0].Outputs != nil {
		t.Errorf("attempt records: %+v %v; want attempt 10's outputs kept and none on attempt 1", as, err)
	}
}
