package engine

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// A task released by its upstream but held by its delay: explain names the
// delay and when it releases it, and does not say nothing holds it back.
func TestExplainNamesTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, `pipeline: od
timezone: UTC
schedule: "@every 1h"
tasks:
  - {name: extract, function: record}
  - {name: report, depends_on: [extract], delay: 10m, function: record}
`)
		ctx := context.Background()
		sleep(58 * time.Minute) // the 1h run is created ahead: extract waits for its fire time
		x, err := e.eng.ExplainUTC(ctx, "od.extract")
		if want := "scheduled for " + start.Add(time.Hour).UTC().Format(time.RFC3339) + ", in the wheel"; err != nil || x.Verdict != want {
			t.Errorf("explain extract before its fire time: verdict %q (%v), want %q", x.Verdict, err, want)
		}
		sleep(4 * time.Minute) // the 1h run went out; extract succeeded, report waits for its delay
		rep := e.instances(store.InstanceFilter{TaskID: "od.report", States: []axtype.State{axtype.Scheduled}, Ascending: true, Limit: 1})
		if len(rep) != 1 || !rep[0].NextFireAt.Equal(start.Add(time.Hour+10*time.Minute)) {
			t.Fatalf("report: %+v; want SCHEDULED for +1h10m", rep)
		}
		x, err = e.eng.ExplainUTC(ctx, "od.report")
		if err != nil {
			t.Fatal(err)
		}
		want := "delay 10m: releases at " + start.Add(time.Hour+10*time.Minute).UTC().Format(time.RFC3339)
		if x.Verdict != want {
			t.Errorf("explain report: verdict %q, want %q; findings %+v", x.Verdict, want, x.Findings)
		}
		e.stop()
	})
}

// The root failures of a run are those not caused by an upstream of the
// same run: a wait that timed out, a failure propagated from another
// pipeline and a kill are roots; a propagated failure is not.
func TestStatusNamesRootFailures(t *testing.T) {
	ins := []axtype.Instance{
		{TaskID: "p.a", Pipeline: "p", State: axtype.Failed, Error: "FAILED after 2 attempt(s): exit status 1"},
		{TaskID: "p.b", Pipeline: "p", State: axtype.Failed, Error: "upstream p.a failed"},
		{TaskID: "p.c", Pipeline: "p", State: axtype.Failed, Error: "upstream p.b was skipped"},
		{TaskID: "p.d", Pipeline: "p", State: axtype.Failed, Error: "upstream q.x failed"},
		{TaskID: "p.e", Pipeline: "p", State: axtype.Failed, Error: "upstream q.y not done after 24h"},
		{TaskID: "p.f", Pipeline: "p", State: axtype.Killed},
		{TaskID: "p.g", Pipeline: "p", State: axtype.Success},
	}
	s := StatusOf(ins, nil)
	var got []string
	for _, f := range s.Roots {
		got = append(got, f.Task+": "+f.Error)
	}
	want := "p.a: FAILED after 2 attempt(s): exit status 1 | p.d: upstream q.x failed | p.e: upstream q.y not done after 24h | p.f: killed"
	if strings.Join(got, " | ") != want || s.State != RunFailed {
		t.Errorf("state %s, roots:\n %s\nwant\n %s", s.State, strings.Join(got, " | "), want)
	}
}
