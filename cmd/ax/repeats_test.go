package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// TestRepeatsTellsRetriedFromDuplicates: the chaos count of executions run
// more than once. Work whose attempt failed because its executor died
// under it, and whose retry ran it again by policy, is counted apart
// ; a ticket executed twice, or work run again after its attempt
// succeeded or failed for any other reason, is a true duplicate.
func TestRepeatsTellsRetriedFromDuplicates(t *testing.T) {
	t.Parallel()
	st := openStore(t, filepath.Join(t.TempDir(), "ax.db"))
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	def := store.PipelineDef{Name: "e2e", File: "e2e.yaml", Hash: "h", Definition: []byte(`{}`),
		Tasks: []store.TaskDef{{ID: "e2e.record", Pipeline: "e2e", Name: "record", Group: "default", Priority: 3, Hash: "h", Definition: []byte(`{}`)}}}
	if _, err := st.SyncDefinitions(ctx, store.SyncParams{Pipelines: []store.PipelineDef{def}, Now: now}); err != nil {
		t.Fatal(err)
	}
	// Each logical time: the reasons its attempts ended with, in order (the
	// last one runs on); its tickets are lt-1, lt-2, …
	cases := map[int][]string{
		1: {"failed: retry 1 of 5 at T: interrupted: the executor process ended while this work ran (it restarted on its state dir)"},
		2: {"failed: retry 1 of 5 at T: executor http://x restarted (registered again as b2): the attempt it ran is gone"},
		3: {"timeout: retry 1 of 5 at T: timeout: no result within 8s"},
		4: {},
		5: {},
	}
	executions := map[int][]int{1: {1, 2}, 2: {1, 2}, 3: {1, 2}, 4: {1, 1}, 5: {1}} // attempts whose work took effect, in order
	var lines []string
	lt := func(i int) time.Time { return now.Add(time.Duration(i) * time.Second) }
	tk := func(i, att int) string { return fmt.Sprintf("lt%d-%d", i, att) }
	for i := 1; i <= 5; i++ {
		_, ins, err := st.CreateRun(ctx, store.CreateRunParams{Pipeline: "e2e", Trigger: "e2e", Kind: axtype.RunSchedule, LogicalTime: lt(i), Actor: "t", Now: now,
			Instances: []store.NewInstance{{TaskID: "e2e.record", State: axtype.Scheduled, NextFireAt: lt(i)}}})
		if err != nil {
			t.Fatal(err)
		}
		in, from := ins[0], axtype.Scheduled
		for att := 1; att <= len(cases[i])+1; att++ {
			ticket := tk(i, att)
			v, err := st.Transition(ctx, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: from, To: axtype.Running, Now: now, Actor: "t", Reason: "dispatch",
				Set: store.Changes{Ticket: &ticket, Attempt: &att, StartedAt: &now}})
			if err != nil {
				t.Fatal(err)
			}
			in.Version = v
			if att > len(cases[i]) {
				break
			}
			if in.Version, err = st.Transition(ctx, store.TransitionParams{InstanceID: in.ID, Version: v, From: axtype.Running, To: axtype.Retrying, Now: now, Actor: "t",
				Reason: cases[i][att-1], Set: store.Changes{NextFireAt: &now}}); err != nil {
				t.Fatal(err)
			}
			from = axtype.Retrying
		}
		for _, att := range executions[i] {
			lines = append(lines, fmt.Sprintf("record %s %s", lt(i).Format(time.RFC3339), tk(i, att)))
		}
	}
	record := filepath.Join(t.TempDir(), "executions.txt")
	if err := os.WriteFile(record, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dups, retried, runs := repeats(t, st, record)
	if runs != 5 {
		t.Errorf("runs %d, want 5", runs)
	}
	want := map[string]int{lt(1).Format(time.RFC3339): 1, lt(2).Format(time.RFC3339): 1}
	if fmt.Sprint(retried) != fmt.Sprint(want) {
		t.Errorf("retried by policy %v, want %v", retried, want)
	}
	if len(dups) != 2 || !strings.Contains(dups[0]+dups[1], "ended \"RETRYING: timeout: retry 1 of 5") || !strings.Contains(dups[0]+dups[1], "ticket lt4-1 executed again") {
		t.Errorf("true duplicates:\n%s\nwant two: lt3 (its attempt timed out, no executor died) and lt4 (one ticket twice)", strings.Join(dups, "\n"))
	}
}
