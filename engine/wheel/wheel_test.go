package wheel

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

func at(d time.Duration) int64 { return t0.Add(d).UnixMilli() }

func collect(w *Wheel, now time.Time) []int64 {
	var ids []int64
	w.Advance(now, func(e Entry) { ids = append(ids, e.ID) })
	return ids
}

func TestWheelFiresEachSecondInOrder(t *testing.T) {
	t.Parallel()
	w := New(t0, 5*time.Minute)
	for i, d := range []time.Duration{3 * time.Second, 1500 * time.Millisecond, 1 * time.Second, 3*time.Second + 999*time.Millisecond, 299 * time.Second} {
		if !w.Add(Entry{ID: int64(i), At: at(d)}) {
			t.Fatalf("entry %d at %s refused", i, d)
		}
	}
	if w.Len() != 5 {
		t.Fatalf("len = %d", w.Len())
	}
	steps := []struct {
		now  time.Duration
		want string
	}{
		{0, "[]"},
		{999 * time.Millisecond, "[]"},
		{time.Second, "[2]"},
		{2 * time.Second, "[1]"}, // 1.5 s is due at the first tick at or after it, never before
		{3 * time.Second, "[0]"},
		{4 * time.Second, "[3]"},
		{298 * time.Second, "[]"},
		{299 * time.Second, "[4]"},
	}
	for _, s := range steps {
		if got := fmt.Sprint(collect(w, t0.Add(s.now))); got != s.want {
			t.Errorf("at +%s: due %s, want %s", s.now, got, s.want)
		}
	}
	if w.Len() != 0 {
		t.Errorf("len after all fired = %d", w.Len())
	}
}

func TestWheelRefusesBeyondWindowAndTakesLate(t *testing.T) {
	t.Parallel()
	w := New(t0, 5*time.Minute)
	if w.Window() < 5*time.Minute {
		t.Fatalf("window = %s", w.Window())
	}
	if w.Add(Entry{ID: 1, At: at(w.Window() + 2*time.Second)}) {
		t.Error("an entry beyond the window was accepted")
	}
	collect(w, t0.Add(10*time.Second))
	// Loaded after its time passed (a top-up after a stall): due at once.
	w.Add(Entry{ID: 2, At: at(5 * time.Second)})
	if got := fmt.Sprint(collect(w, t0.Add(10*time.Second))); got != "[2]" {
		t.Errorf("late entry: %s", got)
	}
}

// TestWheelCatchesUpMissedTicks: a stall (or a clock jump) of many seconds,
// even longer than a turn of the wheel, loses nothing.
func TestWheelCatchesUpMissedTicks(t *testing.T) {
	t.Parallel()
	w := New(t0, 5*time.Minute)
	for i := range 300 {
		w.Add(Entry{ID: int64(i), At: at(time.Duration(i) * time.Second)})
	}
	got := collect(w, t0.Add(time.Hour))
	if len(got) != 300 {
		t.Fatalf("after a one-hour stall %d of 300 entries fired", len(got))
	}
	seen := map[int64]bool{}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("entry %d fired twice", id)
		}
		seen[id] = true
	}
	if got := collect(w, t0.Add(time.Hour)); len(got) != 0 {
		t.Errorf("fired again: %v", got)
	}
	// A clock that goes back fires nothing and breaks nothing.
	w.Add(Entry{ID: 1000, At: at(time.Hour + 2*time.Second)})
	if got := collect(w, t0); len(got) != 0 {
		t.Errorf("backwards clock fired %v", got)
	}
	if got := fmt.Sprint(collect(w, t0.Add(time.Hour+2*time.Second))); got != "[1000]" {
		t.Errorf("after the clock came back: %s", got)
	}
}

func TestWheelManyInOneSecond(t *testing.T) {
	t.Parallel()
	w := New(t0, 5*time.Minute)
	const n = 10000
	for i := range n {
		w.Add(Entry{ID: int64(i), At: at(time.Minute)})
	}
	got := collect(w, t0.Add(time.Minute))
	if len(got) != n || got[0] != 0 || got[n-1] != n-1 {
		t.Fatalf("fired %d entries (first %d, last %d)", len(got), got[0], got[len(got)-1])
	}
}

// BenchmarkWheelAdd reports the cost of one insertion and the heap bytes per
// entry held, against a bare []int64 of the same length (the baseline).
func BenchmarkWheelAdd(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var (
				perEntry, bare float64
				adding         time.Duration
			)
			for b.Loop() {
				before := heapAlloc()
				start := time.Now()
				w := New(t0, 5*time.Minute)
				for i := range n {
					w.Add(Entry{ID: int64(i), Version: 1, At: at(time.Duration(i%300) * time.Second)})
				}
				adding += time.Since(start)
				perEntry = float64(heapAlloc()-before) / float64(n)
				before = heapAlloc()
				ids := make([]int64, 0)
				for i := range n {
					ids = append(ids, int64(i))
				}
				bare = float64(heapAlloc()-before) / float64(n)
				keep(w, ids)
			}
			b.ReportMetric(perEntry, "B/entry")
			b.ReportMetric(bare, "B/int64")
			b.ReportMetric(perEntry/bare, "x-bare")
			b.ReportMetric(float64(adding.Nanoseconds())/float64(b.N*n), "ns/add")
		})
	}
}
