package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// attemptLines reads back an attempt's stored output as "stream: text".
func attemptLines(t *testing.T, st *store.Store, instance int64, attempt int) []string {
	t.Helper()
	chunks, err := st.LogChunks(context.Background(), instance, attempt, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range chunks {
		lines, err := runner.DecodeLines(c.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			out = append(out, l.Stream.String()+": "+string(l.Text))
		}
	}
	return out
}

// A command that prints on both streams and fails, then succeeds on its
// retry: both attempts' output is kept apart, in order, with its exit status
// and the executor that ran it.
func TestOutputOfEveryAttemptIsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mark := filepath.Join(t.TempDir(), "tried")
		e := setup(t, Config{}, nil, fmt.Sprintf(`pipeline: o
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - name: flaky
    retry: {count: 1, interval: 1s}
    command: ["sh", "-c", "if [ -e %[1]s ]; then echo second try; echo all good >&2; else touch %[1]s; echo first try; echo 'disk full' >&2; exit 3; fi"]
`, mark))
		if _, err := e.do(Trigger{Target: "o.flaky"}); err != nil {
			t.Fatal(err)
		}
		sleep(5 * time.Second)
		e.stop()
		ins := e.instances(store.InstanceFilter{TaskID: "o.flaky"})
		if len(ins) != 1 || ins[0].State != axtype.Success || ins[0].Attempt != 2 {
			t.Fatalf("instances %+v, want one SUCCESS after 2 attempts", ins)
		}
		id := ins[0].ID
		if ins[0].Executor != runner.Local() {
			t.Errorf("instance executor %q, want %q", ins[0].Executor, runner.Local())
		}
		for attempt, want := range map[int][]string{
			1: {"stdout: first try", "stderr: disk full"},
			2: {"stdout: second try", "stderr: all good"},
		} {
			got := attemptLines(t, e.st, id, attempt)
			// Within a stream the order is kept; across the two pipes it is the order of arrival.
			if len(got) != 2 || !contains(got, want[0]) || !contains(got, want[1]) {
				t.Errorf("attempt %d output %q, want %q", attempt, got, want)
			}
		}
		as, err := e.st.Attempts(context.Background(), id)
		if err != nil || len(as) != 2 {
			t.Fatalf("attempt records %+v %v", as, err)
		}
		if as[0].Status != "failed" || as[0].ExitCode == nil || *as[0].ExitCode != 3 || as[0].Error != "exit status 3: disk full" {
			t.Errorf("attempt 1 record %+v, want failed with exit status 3", as[0])
		}
		if as[1].Status != "success" || as[1].ExitCode == nil || *as[1].ExitCode != 0 || as[1].Executor != runner.Local() {
			t.Errorf("attempt 2 record %+v, want success with exit status 0 on %s", as[1], runner.Local())
		}
		if as[0].LogBytes != int64(len("first try")+len("disk full")) || as[0].LogDropped != 0 {
			t.Errorf("attempt 1 kept %d bytes, dropped %d", as[0].LogBytes, as[0].LogDropped)
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// While a function runs, what it logged is written every LogFlush: a crash
// of the scheduler keeps the chunks written before it.
func TestOutputChunksWrittenWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		e := setup(t, Config{}, map[string]func(context.Context, runner.Attempt) error{
			"c.slow": func(ctx context.Context, a runner.Attempt) error {
				log := runner.Logger(ctx)
				for i := range 3 {
					log.Info("step", "n", i)
					time.Sleep(2 * time.Second)
				}
				select { // the scheduler "crashes" here: nothing more is written
				case <-release:
				case <-ctx.Done():
				}
				return errors.New("never reached in the test")
			},
		}, `pipeline: c
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: slow, function: record, timeout: 1h}
`)
		if _, err := e.do(Trigger{Target: "c.slow"}); err != nil {
			t.Fatal(err)
		}
		sleep(7 * time.Second)
		ins := e.instances(store.InstanceFilter{TaskID: "c.slow"})
		if len(ins) != 1 || ins[0].State != axtype.Running {
			t.Fatalf("instances %+v, want one RUNNING", ins)
		}
		// Read as another process would, from the store, while it runs.
		got := attemptLines(t, e.st, ins[0].ID, 1)
		if len(got) != 3 || !strings.Contains(got[0], "msg=step n=0") || !strings.Contains(got[2], "msg=step n=2") {
			t.Errorf("output stored while running: %q, want the three steps", got)
		}
		chunks, _ := e.st.LogChunks(context.Background(), ins[0].ID, 1, 0, 0)
		if len(chunks) < 2 {
			t.Errorf("%d chunks, want one per second with output (3)", len(chunks))
		}
		close(release)
		e.stop()
	})
}

// Output over LogMax keeps its tail in the store: the oldest chunks are
// trimmed and the attempt records how much was dropped.
func TestOutputOverTheLimitKeepsTheTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{LogMax: 8 << 10}, map[string]func(context.Context, runner.Attempt) error{
			"b.big": func(ctx context.Context, a runner.Attempt) error {
				w := runner.OutputFrom(ctx).Writer(runner.StreamStdout)
				// Half a second off the flush's whole seconds, so a flush never
				// falls at the same fake instant as a write: the chunks are the
				// ten-line seconds, whatever order synctest wakes them in.
				time.Sleep(500 * time.Millisecond)
				for i := range 100 {
					fmt.Fprintf(w, "%s %04d\n", strings.Repeat("z", 95), i) // 100 bytes of text a line
					if i%10 == 9 {
						time.Sleep(time.Second) // ten chunks of ten lines
					}
				}
				return nil
			},
		}, `pipeline: b
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: big, function: record}
`)
		if _, err := e.do(Trigger{Target: "b.big"}); err != nil {
			t.Fatal(err)
		}
		sleep(15 * time.Second)
		e.stop()
		in := e.instances(store.InstanceFilter{TaskID: "b.big"})[0]
		got := attemptLines(t, e.st, in.ID, 1)
		as, _ := e.st.Attempts(context.Background(), in.ID)
		if len(as) != 1 {
			t.Fatalf("attempts %+v", as)
		}
		// 10,000 bytes of text written ten lines a second, in chunks of one
		// or two seconds (as the flush falls): whole chunks are trimmed from
		// the front while what is kept exceeds 8 KiB; the last lines stay.
		n := int64(len(got))
		if n*100 != as[0].LogBytes || as[0].LogBytes+as[0].LogDropped != 10000 || as[0].LogBytes > 8<<10 || as[0].LogBytes < 8<<10-2000 {
			t.Errorf("kept %d lines (%d bytes), dropped %d; want the 10,000 bytes split, at most 8 KiB kept", n, as[0].LogBytes, as[0].LogDropped)
		}
		if !strings.HasSuffix(last(got), " 0099") || !strings.HasSuffix(first(got), fmt.Sprintf(" %04d", 100-n)) {
			t.Errorf("kept %d lines from %q to %q, want the last ones", n, first(got), last(got))
		}
	})
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// A command printing 50 MiB through a real engine: the store keeps its last
// LogMax bytes, the attempt records the rest as dropped, and the process
// allocates nothing like the 50 MiB while capturing it.
func TestFiftyMiBPrinterKeepsTheLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("prints 50 MiB")
	}
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, `pipeline: big
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: print, command: ["sh", "-c", "head -c 52428800 /dev/zero | tr '\\0' x | fold -w 99"]}
`)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if _, err := e.do(Trigger{Target: "big.print"}); err != nil {
			t.Fatal(err)
		}
		sleep(5 * time.Second)
		runtime.ReadMemStats(&after)
		e.stop()
		in := e.instances(store.InstanceFilter{TaskID: "big.print"})[0]
		as, err := e.st.Attempts(context.Background(), in.ID)
		if err != nil || len(as) != 1 || in.State != axtype.Success {
			t.Fatalf("instance %+v, attempts %+v %v", in, as, err)
		}
		if as[0].LogBytes > runner.DefaultLogMax || as[0].LogBytes < runner.DefaultLogMax/2 || as[0].LogBytes+as[0].LogDropped != 50<<20 {
			t.Errorf("kept %d, dropped %d: want at most the last MiB kept and the rest of the 50 MiB counted", as[0].LogBytes, as[0].LogDropped)
		}
		t.Logf("kept %d, dropped %d, allocated %d KiB", as[0].LogBytes, as[0].LogDropped, (after.TotalAlloc-before.TotalAlloc)>>10)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 24<<20 {
			t.Errorf("allocated %d MiB while a command printed 50 MiB, want well under it", alloc>>20)
		}
	})
}

// The limit is one rule for output that arrives at once and output that
// arrives over many flushes: an attempt's stored records (each line's bytes
// plus its 5-byte header) stay within LogMax. The in-memory buffer counted
// headers while the store's trim counted only the text, so a task printing
// short lines slowly kept more than twice what the same lines printed at
// once kept, and more than LogMax in the store.
func TestOutputLimitCountsTheSameSlowOrFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{LogMax: 8 << 10}, map[string]func(context.Context, runner.Attempt) error{
			"s.slow": func(ctx context.Context, a runner.Attempt) error {
				w := runner.OutputFrom(ctx).Writer(runner.StreamStdout)
				for i := range 2000 {
					fmt.Fprintf(w, "%04d\n", i) // 4 bytes of text, a 9-byte record
					if i%100 == 99 {
						time.Sleep(time.Second) // twenty chunks of 100 lines
					}
				}
				return nil
			},
		}, `pipeline: s
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: slow, function: record}
`)
		if _, err := e.do(Trigger{Target: "s.slow"}); err != nil {
			t.Fatal(err)
		}
		sleep(30 * time.Second)
		e.stop()
		in := e.instances(store.InstanceFilter{TaskID: "s.slow"})[0]
		got := attemptLines(t, e.st, in.ID, 1)
		as, _ := e.st.Attempts(context.Background(), in.ID)
		if len(as) != 1 {
			t.Fatalf("attempts %+v", as)
		}
		// 8192 / 9 = 910 records fit; whole chunks of 100 lines (or 200, as
		// the flush falls) are trimmed, so at least 910 - 200 stay.
		n := int64(len(got))
		if n*9 > 8<<10 || n < 710 || as[0].LogBytes != n*4 || as[0].LogBytes+as[0].LogDropped != 8000 {
			t.Errorf("kept %d lines (%d stored bytes, %d text), dropped %d; want at most 8 KiB stored, 8000 text bytes in all", n, n*9, as[0].LogBytes, as[0].LogDropped)
		}
		if !strings.HasSuffix(last(got), " 1999") {
			t.Errorf("last line %q, want 1999", last(got))
		}
	})
}

// txCounter counts the store's write transactions by what they do, through
// the store's fault seam (it never fails one unless fail says so).
type txCounter struct {
	mu   sync.Mutex
	n    map[string]int
	fail func(what string) error
}

func countTx(st *store.Store) *txCounter {
	c := &txCounter{n: map[string]int{}}
	store.SetFault(st, func(what string) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.n[what]++
		if c.fail != nil {
			return c.fail(what)
		}
		return nil
	})
	return c
}

func (c *txCounter) get(what string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[what]
}

// An attempt's record (and its last output) commits in the transaction that
// records its result: attempts that end cost no transaction of their own,
// and one that printed nothing leaves no chunk. (The throughput regression
// of R41: one more transaction per attempt, before its result.)
func TestAttemptRecordCommitsWithItsResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, map[string]func(context.Context, runner.Attempt) error{
			"s.loud": func(ctx context.Context, a runner.Attempt) error {
				fmt.Fprintln(runner.OutputFrom(ctx).Writer(runner.StreamStdout), "hello")
				return nil
			},
		}, `pipeline: s
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: a, function: record}
  - {name: b, function: record}
  - {name: loud, function: record}
`)
		c := countTx(e.st)
		if _, err := e.do(Trigger{Target: "s"}); err != nil {
			t.Fatal(err)
		}
		sleep(5 * time.Second)
		e.stop()
		if n := c.get("write task output"); n != 0 {
			t.Errorf("%d transaction(s) wrote task output on their own; want 0: each attempt's record and last output commit with its result", n)
		}
		ctx := context.Background()
		for _, task := range []string{"s.a", "s.b", "s.loud"} {
			ins := e.instances(store.InstanceFilter{TaskID: task})
			if len(ins) != 1 || ins[0].State != axtype.Success {
				t.Fatalf("%s: instances %+v, want one SUCCESS", task, ins)
			}
			as, err := e.st.Attempts(ctx, ins[0].ID)
			if err != nil || len(as) != 1 || as[0].Status != "success" || as[0].Attempt != 1 {
				t.Fatalf("%s: attempts %+v (%v), want attempt 1, success", task, as, err)
			}
			with, err := e.st.LogAttempts(ctx, ins[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			if task == "s.loud" {
				if got := attemptLines(t, e.st, ins[0].ID, 1); len(got) != 1 || got[0] != "stdout: hello" || as[0].LogBytes != 5 {
					t.Errorf("%s: output %q, %d bytes; want [stdout: hello], 5 bytes", task, got, as[0].LogBytes)
				}
			} else if len(with) != 0 || as[0].LogBytes != 0 {
				t.Errorf("%s printed nothing: attempts with output %v, %d bytes; want none", task, with, as[0].LogBytes)
			}
		}
	})
}

// When the transaction of a result and its attempt's output fails, the next
// one records the result alone: the output is lost (as a failed write of
// output always cost), never the result, and the failed write left nothing.
func TestFailedOutputWriteCostsOnlyTheOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		e := setup(t, Config{}, map[string]func(context.Context, runner.Attempt) error{
			"f.x": func(ctx context.Context, a runner.Attempt) error {
				fmt.Fprintln(runner.OutputFrom(ctx).Writer(runner.StreamStdout), "short")
				<-release
				return nil
			},
		}, `pipeline: f
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: x, function: record}
`)
		if _, err := e.do(Trigger{Target: "f.x"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		c := countTx(e.st)
		failed := 0
		c.fail = func(what string) error {
			if what == "transition batch" && failed == 0 {
				failed++
				return errors.New("disk on fire")
			}
			return nil
		}
		close(release)
		synctest.Wait()
		c.mu.Lock()
		n := failed
		c.mu.Unlock()
		if n != 1 {
			t.Fatalf("the result's transaction failed %d time(s), want 1", n)
		}
		ins := e.instances(store.InstanceFilter{TaskID: "f.x"})
		as, err := e.st.Attempts(context.Background(), ins[0].ID)
		if err != nil || len(as) != 0 || len(attemptLines(t, e.st, ins[0].ID, 1)) != 0 {
			t.Errorf("after the failed write: attempts %+v (%v), output %q; want nothing written", as, err, attemptLines(t, e.st, ins[0].ID, 1))
		}
		sleep(3 * time.Second)
		e.stop()
		ins = e.instances(store.InstanceFilter{TaskID: "f.x"})
		if len(ins) != 1 || ins[0].State != axtype.Success {
			t.Fatalf("instances %+v, want one SUCCESS: the result is recorded without its output", ins)
		}
		if as, _ := e.st.Attempts(context.Background(), ins[0].ID); len(as) != 0 {
			t.Errorf("attempts %+v, want none: its write failed", as)
		}
	})
}

// Output whose write fails while the attempt runs (the store unavailable
// for a moment, or the lease lost) is written again with the next flush or
// with the result: every line is stored and none counted dropped. Before,
// the chunks of a failed flush were lost and counted as dropped.
func TestFailedFlushIsWrittenAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, map[string]func(context.Context, runner.Attempt) error{
			"c.steps": func(ctx context.Context, a runner.Attempt) error {
				log := runner.Logger(ctx)
				for i := range 4 {
					log.Info("step", "n", i)
					time.Sleep(2 * time.Second)
				}
				return nil
			},
		}, `pipeline: c
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: steps, function: record, timeout: 1h}
`)
		c := countTx(e.st)
		c.fail = func(what string) error {
			if what == "write task output" && c.n[what] <= 2 { // the first two flushes (c.mu held)
				return errDiskFull
			}
			return nil
		}
		if _, err := e.do(Trigger{Target: "c.steps"}); err != nil {
			t.Fatal(err)
		}
		sleep(12 * time.Second)
		ins := e.instances(store.InstanceFilter{TaskID: "c.steps"})
		if len(ins) != 1 || ins[0].State != axtype.Success {
			t.Fatalf("instances %+v, want one SUCCESS", ins)
		}
		if n := c.get("write task output"); n < 3 {
			t.Fatalf("%d flushes, want the two that fail and more: the test needs a failed flush", n)
		}
		got := attemptLines(t, e.st, ins[0].ID, 1)
		if len(got) != 4 {
			t.Errorf("stored output %q, want the four steps", got)
		}
		as, err := e.st.Attempts(context.Background(), ins[0].ID)
		if err != nil || len(as) != 1 || as[0].LogDropped != 0 {
			t.Errorf("attempt records %+v (%v), want one with nothing dropped", as, err)
		}
		e.stop()
	})
}
