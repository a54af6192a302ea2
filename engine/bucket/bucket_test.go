package bucket

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

// drain simulates the dispatch loop with a fake clock: it takes tokens for n
// dispatches of group, sleeping (in simulated time) for the waits it is
// told, and returns the simulated time it took.
func drain(b *Bucket, group string, n int, now time.Time) (time.Duration, time.Time) {
	start := now
	for done := 0; done < n; {
		if ok, wait := b.Take(group, now); ok {
			done++
		} else {
			now = now.Add(wait)
		}
	}
	return now.Sub(start), now
}

func TestTenThousandAtHundredPerSecond(t *testing.T) {
	t.Parallel()
	b := New(Limits{Global: 100}, t0)
	took, _ := drain(b, "g", 10000, t0)
	// A burst of 100 at once, then 100 a second: 99 seconds for the rest.
	if took < 98*time.Second || took > 100*time.Second {
		t.Errorf("10,000 dispatches at 100/s took %s, want about 99 s", took)
	}
}

func TestGroupAndGlobal(t *testing.T) {
	t.Parallel()
	b := New(Limits{Global: 100, Groups: map[string]float64{"slow": 10}}, t0)
	took, now := drain(b, "slow", 50, t0)
	if took < 3900*time.Millisecond || took > 4100*time.Millisecond {
		t.Errorf("50 at 10/s took %s, want about 4 s", took)
	}
	// Waiting on the throttled group cost no global tokens: the global
	// bucket is full but for the one token the last dispatch took.
	if took, _ := drain(b, "fast", 99, now); took != 0 {
		t.Errorf("99 dispatches of another group took %s, want them at once", took)
	}
	if ok, wait := b.Take("fast", now); ok || wait <= 0 || wait > 10*time.Millisecond {
		t.Errorf("after the burst: ok=%v wait=%s, want a wait of about 10 ms", ok, wait)
	}
}

func TestChangeAtRunTime(t *testing.T) {
	t.Parallel()
	b := New(Limits{Global: 10}, t0)
	_, now := drain(b, "g", 10, t0) // empty the bucket
	b.SetGlobal(1000, now)
	took, now := drain(b, "g", 1000, now)
	if took > 1100*time.Millisecond {
		t.Errorf("after raising the rate to 1000/s, 1000 dispatches took %s", took)
	}
	b.SetGlobal(0, now)
	if took, _ := drain(b, "g", 100000, now); took != 0 {
		t.Errorf("unlimited took %s", took)
	}
	b.SetGroup("g", 5, now)
	b.SetGroup("h", 7, now)
	b.SetGroup("h", 0, now)
	if l := b.Limits(); l.Global != 0 || len(l.Groups) != 1 || l.Groups["g"] != 5 {
		t.Errorf("limits = %+v", l)
	}
}

func TestFractionalRate(t *testing.T) {
	t.Parallel()
	// A breaker may cut a rate of 5/s to one tenth: 0.5/s.
	b := New(Limits{Groups: map[string]float64{"tripped": 0.5}}, t0)
	if took, _ := drain(b, "tripped", 3, t0); took < 3900*time.Millisecond || took > 4100*time.Millisecond {
		t.Errorf("3 at 0.5/s took %s, want about 4 s", took)
	}
}

// TestExactWaits: the wait returned is the time until a whole token, to the
// nanosecond, and a bucket holding exactly one token gives it. At 4/s a
// token takes 250 ms: after the burst of 4, half a token is there 125 ms
// later, so the wait is 125 ms; at 250 ms exactly one token is there.
func TestExactWaits(t *testing.T) {
	t.Parallel()
	b := New(Limits{Global: 4}, t0)
	for i := range 4 {
		if ok, wait := b.Take("g", t0); !ok || wait != 0 {
			t.Fatalf("take %d of the burst: ok=%v wait=%s", i+1, ok, wait)
		}
	}
	if ok, wait := b.Take("g", t0.Add(125*time.Millisecond)); ok || wait != 125*time.Millisecond {
		t.Errorf("half a token: ok=%v wait=%s, want a wait of 125ms", ok, wait)
	}
	if ok, wait := b.Take("g", t0.Add(250*time.Millisecond)); !ok || wait != 0 {
		t.Errorf("exactly one token: ok=%v wait=%s, want it taken", ok, wait)
	}
	// A group's wait is judged the same way, and the longer of the two rules.
	b = New(Limits{Global: 4, Groups: map[string]float64{"slow": 2}}, t0)
	b.Take("slow", t0)
	b.Take("slow", t0)
	if ok, wait := b.Take("slow", t0.Add(250*time.Millisecond)); ok || wait != 250*time.Millisecond {
		t.Errorf("group at 2/s, half a token: ok=%v wait=%s, want 250ms", ok, wait)
	}
}

// TestLiftingTheLimit: a rate set to zero takes effect at once, whatever
// tokens the old limit had left.
func TestLiftingTheLimit(t *testing.T) {
	t.Parallel()
	b := New(Limits{Global: 1, Groups: map[string]float64{"g": 1}}, t0)
	b.Take("g", t0) // both buckets empty
	b.SetGlobal(0, t0)
	b.SetGroup("g", 0, t0)
	for i := range 5 {
		if ok, wait := b.Take("g", t0); !ok || wait != 0 {
			t.Fatalf("take %d after lifting both limits: ok=%v wait=%s", i+1, ok, wait)
		}
	}
	if l := b.Limits(); l.Global != 0 || len(l.Groups) != 0 {
		t.Errorf("limits after lifting = %+v, want none", l)
	}
}
