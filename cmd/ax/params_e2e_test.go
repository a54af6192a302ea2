package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// paramsPipelines writes the pipelines of TestParamsEndToEnd: load runs a
// shell script (started through env) with a param in it and writes what
// it ran to record; typed declares typed params; off is disabled.
func paramsPipelines(t *testing.T) (dir, record string) {
	t.Helper()
	dir = t.TempDir()
	record = filepath.Join(dir, "record.txt")
	files := map[string]string{
		"load.yaml": fmt.Sprintf(`pipeline: load
timezone: UTC
schedule: none
tasks:
  - name: load
    params: {region: cn}
    command: ["env", "AX_X=1", "sh", "-c", "echo load --region {{ .Params.region }} > %s"]
`, record),
		"typed.yaml": `pipeline: typed
timezone: UTC
schedule: none
params:
  batch: {type: int, default: 100, description: rows per batch}
  region: {type: enum, values: [cn, us], default: cn}
tasks:
  - {name: a, command: ["true"]}
`,
		"off.yaml": "pipeline: off\ntimezone: UTC\ndisabled: true\nschedule: \"@every 1s\"\ntasks:\n  - {name: a, command: [\"true\"]}\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, record
}

// A param spliced into a shell script is quoted (the injection
// runs nothing); a param of the wrong type, an unknown enum value, an
// undeclared or oversized param, a disabled pipeline and a delay not ahead
// are refused through the CLI and the API with nothing stored; --in
// stores a run that fires later.
func TestParamsEndToEnd(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "ax.db")
	dir, record := paramsPipelines(t)
	addr := freeAddr(t)
	srv := startServer(t, db, dir, "--listen", addr)
	st := openStore(t, db)
	waitPrimary(t, addr)
	server := "http://" + addr
	owned := filepath.Join(dir, "owned")
	if code, out := axCmd(t, "trigger", "load.load", "--param", "region=cn; touch "+owned, "--server", server); code != 0 {
		t.Fatalf("trigger: exit %d\n%s", code, out)
	}
	waitFor(t, func() bool {
		ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "load.load"})
		return len(ins) == 1 && ins[0].State.Terminal()
	})
	if data, _ := os.ReadFile(record); string(data) != "load --region cn; touch "+owned+"\n" {
		t.Errorf("the script printed %q", data)
	}
	if _, err := os.Stat(owned); err == nil {
		t.Errorf("the param's second command ran")
	}
	refusals := []struct {
		args []string
		want string
	}{
		{[]string{"trigger", "typed", "--param", "batch=many"}, `param "batch" is an int: "many" is not a whole number`},
		{[]string{"trigger", "typed", "--param", "region=jp"}, `param "region" is one of cn, us: "jp" is not`},
		{[]string{"trigger", "typed", "--param", "regoin=cn"}, `param "regoin": no task run declares it (did you mean "region"?)`},
		{[]string{"trigger", "typed", "--param", "region=" + strings.Repeat("x", 5000)}, `param "region" is 5000 bytes long; give at most 4096 bytes`},
		{[]string{"trigger", "off"}, "pipeline off is disabled (disabled: true in " + filepath.Join(dir, "off.yaml")},
		{[]string{"trigger", "typed", "--in", "-5m"}, `--in "-5m": the delay is not ahead`},
		{[]string{"trigger", "typed", "--in", "9000h"}, `in 9000h0m0s: give at most`},
	}
	for _, c := range refusals {
		code, out := axCmd(t, append(c.args, "--server", server)...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("ax %s: exit %d\n%s\nwant %q", strings.Join(c.args, " "), code, out, c.want)
		}
	}
	resp, err := http.Post(server+"/api/v1/pipelines/typed/trigger", "application/json", strings.NewReader(`{"params": {"batch": "1e3"}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `param \"batch\" is an int: \"1e3\" is not a whole number`) {
		t.Errorf("API trigger with a wrong type: %d %s", resp.StatusCode, body)
	}
	for _, p := range []string{"typed", "off"} {
		if runs, _ := st.Runs(context.Background(), p, 10); len(runs) != 0 {
			t.Errorf("refused triggers stored %d runs of %s", len(runs), p)
		}
	}
	if code, out := axCmd(t, "status", "--server", server); code != 0 || !strings.Contains(out, "pipeline off (1 tasks): disabled, it never fires (disabled: true)") {
		t.Errorf("ax status: exit %d\n%s", code, out)
	}
	if code, out := axCmd(t, "next", filepath.Join(dir, "off.yaml"), "-n", "1", "--from", "2026-01-01T00:00:00Z"); code != 0 || out != "2026-01-01T00:00:01Z  # disabled: does not fire\n" {
		t.Errorf("ax next: exit %d\n%q", code, out)
	}
	before := time.Now()
	if code, out := axCmd(t, "trigger", "typed", "--in", "10m", "--param", "batch=5", "--server", server); code != 0 {
		t.Fatalf("trigger --in: exit %d\n%s", code, out)
	}
	ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "typed.a"})
	if len(ins) != 1 || ins[0].State != axtype.Scheduled || ins[0].NextFireAt.Before(before.Add(10*time.Minute-time.Second)) ||
		ins[0].NextFireAt.After(time.Now().Add(10*time.Minute)) {
		t.Errorf("after trigger --in 10m: %+v", ins)
	}
	// A delayed run is stored, not a timer: a server killed before its
	// time and started again runs it then.
	if code, out := axCmd(t, "trigger", "load.load", "--in", "3s", "--server", server); code != 0 {
		t.Fatalf("trigger --in 3s: exit %d\n%s", code, out)
	}
	asked := time.Now()
	srv.crash(t)
	startServer(t, db, dir, "--listen", addr)
	waitFor(t, func() bool {
		ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "load.load"})
		return len(ins) == 2 && ins[0].State == axtype.Success
	})
	ins, _ = st.Instances(context.Background(), store.InstanceFilter{TaskID: "load.load"})
	if started := ins[0].StartedAt; started.Before(asked.Add(2 * time.Second)) {
		t.Errorf("the run delayed by 3s started %s after the trigger", started.Sub(asked))
	}
}
