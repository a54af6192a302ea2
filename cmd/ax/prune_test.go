package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/store"
)

// endedRun writes a manual run of shop.sync that ended at `at` (SUCCESS),
// as an old run would be.
func endedRun(t *testing.T, st *store.Store, at time.Time) int64 {
	t.Helper()
	ctx := context.Background()
	run, ins, err := st.CreateRun(ctx, store.CreateRunParams{Pipeline: "shop", Trigger: "shop.sync", Kind: axtype.RunManual, LogicalTime: at, Now: at,
		Instances: []store.NewInstance{{TaskID: "shop.sync", Group: "etl", State: axtype.Scheduled, NextFireAt: at}}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.Transition(ctx, store.TransitionParams{InstanceID: ins[0].ID, Version: ins[0].Version, From: axtype.Scheduled, To: axtype.Running, Now: at, Actor: "t", Reason: "t"})
	if err == nil {
		_, err = st.Transition(ctx, store.TransitionParams{InstanceID: ins[0].ID, Version: v, From: axtype.Running, To: axtype.Success, Now: at, Actor: "t", Reason: "t"})
	}
	if err != nil {
		t.Fatal(err)
	}
	return run.ID
}

// ax prune --dry-run counts what would go and deletes nothing; ax prune
// runs a pass on the primary; bad periods are refused and change nothing.
func TestPruneDryRunAndNow(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Retain: 30 * 24 * time.Hour})
	old := endedRun(t, e.St, time.Now().Add(-40*24*time.Hour))
	recent := endedRun(t, e.St, time.Now().Add(-2*24*time.Hour))
	ax := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runAx(t, append(args, "--server", e.Srv.URL)...)
		if code != want {
			t.Fatalf("ax %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out + errOut
	}
	before := e.State()
	out := ax(cli.ExitOK, "prune", "--dry-run")
	if !strings.Contains(out, "would prune 1 run(s) that ended before") || !strings.Contains(out, "(retain 720h0m0s): 1 instance(s), 3 history row(s)") {
		t.Errorf("dry run:\n%s", out)
	}
	out = ax(cli.ExitOK, "prune", "--dry-run", "--retain", "1d")
	if !strings.Contains(out, "would prune 2 run(s)") {
		t.Errorf("dry run with 1d:\n%s", out)
	}
	for _, c := range []struct {
		path string
		want string
	}{
		{"/api/v1/prune?retain=-1d", `retain="-1d": give a period such as 30d`},
		{"/api/v1/prune?retain=soon", `retain="soon": give a period`},
		{"/api/v1/prune?keep=1d", `unknown query parameter "keep"`},
		// The period given is 0 or wraps around: not "this server keeps
		// everything" (this server keeps 30 days).
		{"/api/v1/prune?retain=0", `retain=0 keeps everything: nothing would be pruned; give retain=30d`},
		{"/api/v1/prune?retain=213504d", `retain="213504d": give a period such as 30d`},
	} {
		code, body := e.Call("GET", c.path, "")
		if code != http.StatusBadRequest || !strings.Contains(apitest.DecodeJSON[map[string]string](t, body)["error"], c.want) {
			t.Errorf("GET %s: %d %s, want 400 %q", c.path, code, body, c.want)
		}
	}
	ax(cli.ExitUsage, "prune", "--retain", "1d")
	ax(cli.ExitUsage, "prune", "--dry-run", "--retain", "forever")
	if after := e.State(); after != before {
		t.Errorf("dry runs and bad requests changed the store:\n%s\n%s", before, after)
	}
	out = ax(cli.ExitOK, "prune")
	if !strings.Contains(out, "pruned 1 run(s)") {
		t.Errorf("prune:\n%s", out)
	}
	if _, err := e.St.Run(context.Background(), old); err == nil {
		t.Errorf("the old run is still there")
	}
	if _, err := e.St.Run(context.Background(), recent); err != nil {
		t.Errorf("the recent run was pruned: %v", err)
	}
	acts, _ := e.St.Actions(context.Background(), store.LogFilter{Action: "prune"})
	if len(acts) != 1 || !strings.Contains(acts[0].Detail, `"runs":1`) {
		t.Errorf("prune actions: %+v", acts)
	}
	// A pass an operator asked for is theirs in the action log, like every
	// other operation (the timer's passes are the scheduler's).
	if len(acts) == 1 && !strings.HasPrefix(acts[0].Actor, "operator") {
		t.Errorf("prune by ax prune recorded as cli.Actor %q, reason %q; want operator (the CLI's operator:$USER)", acts[0].Actor, acts[0].Reason)
	}
}

func TestParseRetainAndSize(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{{"30d", 30 * 24 * time.Hour, true}, {"0", 0, true}, {"12h", 12 * time.Hour, true}, {"1.5d", 36 * time.Hour, true},
		{"-1d", 0, false}, {"0d", 0, false}, {"x", 0, false}, {"", 0, false},
		// The longest period a time.Duration holds is 106751 days (2^63-1 ns,
		// 106751.99 days): one day more used to wrap around to a negative
		// period (the server refused to start with "Retain -2562047h…", the
		// dry run said "keeps everything"); tiny ones rounded down to 0.
		{"106751d", 106751 * 24 * time.Hour, true}, {"106752d", 0, false}, {"213504d", 0, false},
		{"200000d", 0, false}, {"Infd", 0, false}, {"NaNd", 0, false}, {"1e-20d", 0, false},
		{"2562048h", 0, false}} {
		got, err := api.ParseRetain(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("api.ParseRetain(%q) = %v, %v", c.in, got, err)
		}
	}
	for _, c := range []struct {
		in   string
		want int
	}{{"1MiB", 1 << 20}, {"256KiB", 256 << 10}, {"65536", 65536}, {"2MB", 2000000}, {"0", 0}, {"lots", 0}, {"-1KiB", 0}} {
		got, err := parseSize(c.in)
		if got != c.want || (err == nil) != (c.want != 0) {
			t.Errorf("parseSize(%q) = %d, %v", c.in, got, err)
		}
	}
}

// ax prune --dry-run --store with --retain 0 (or an overflowing period)
// says what is wrong with the flag instead of "--retain <nil>".
func TestPruneStoreRefusesRetainZero(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "ax.db")
	for _, c := range []struct{ retain, want string }{
		{"0", `--retain 0 keeps everything: nothing would be pruned; give a period such as 30d`},
		{"200000d", `--retain "200000d": give a period such as 30d, 12h or 90m`},
	} {
		code, out, errOut := runAx(t, "prune", "--dry-run", "--store", db, "--retain", c.retain)
		if code != cli.ExitUsage || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "<nil>") {
			t.Errorf("--retain %s: exit %d, want %d with %q\n%s%s", c.retain, code, cli.ExitUsage, c.want, out, errOut)
		}
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Errorf("--retain %s: a refused dry run created the store (%v)", c.retain, err)
		}
	}
}

// An operator's pass over more than it can prune in its time (pruning is
// paced: batches of 2 runs, at least 50 ms apart) stops at the limit, says
// more remains, and has pruned whole batches; the next pass goes on from
// there.
func TestPruneNowStopsAtItsBudget(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Retain: 30 * 24 * time.Hour, PruneBudget: time.Second})
	var old []int64
	for i := range 300 { // 150 batches: at least 7.5 s of pauses
		old = append(old, endedRun(t, e.St, time.Now().Add(-40*24*time.Hour+time.Duration(i)*time.Minute)))
	}
	left := func() int {
		n := 0
		for _, id := range old {
			if _, err := e.St.Run(context.Background(), id); err == nil {
				n++
			}
		}
		return n
	}
	code, out, errOut := runAx(t, "prune", "--server", e.Srv.URL)
	if code != cli.ExitOK || !strings.Contains(out, "more remains: this pass stopped at its time limit") {
		t.Fatalf("ax prune over 300 runs with a 1 s limit: exit %d\n%s%s", code, out, errOut)
	}
	first := left()
	if first == 0 || first == 300 || first%2 != 0 {
		t.Errorf("after the first pass %d of 300 old runs are left: want whole batches of 2 pruned and some left", first)
	}
	if code, out, errOut := runAx(t, "prune", "--server", e.Srv.URL); code != cli.ExitOK || left() >= first {
		t.Errorf("the second pass pruned nothing more (%d left): exit %d\n%s%s", left(), code, out, errOut)
	}
}
