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

// TestWheelWindowSize: the window is one second short of the smallest power
// of two of slots that holds the requested window plus two (the slot being
// processed and the one of the last tick). Worked out by hand: 0 s needs 2
// slots (1 s), 1 s needs 3 → 4 (3 s), 6 s needs 8 (7 s), 14 s needs 16
// (15 s), 5 m needs 302 → 512 (511 s).
func TestWheelWindowSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ window, want time.Duration }{
		{0, time.Second},
		{time.Second, 3 * time.Second},
		{6 * time.Second, 7 * time.Second},
		{14 * time.Second, 15 * time.Second},
		{5 * time.Minute, 511 * time.Second},
	} {
		if got := New(t0, tc.window).Window(); got != tc.want {
			t.Errorf("New(%s).Window() = %s, want %s", tc.window, got, tc.want)
		}
	}
}

// TestWheelEdgesOfTheWindow: the last tick was the second before now, so the
// furthest entry accepted is due Window()-1s after now; one second later is
// refused. The furthest one shares its slot with the second before now and
// still fires at its own time, not at the first Advance.
func TestWheelEdgesOfTheWindow(t *testing.T) {
	t.Parallel()
	w := New(t0, 6*time.Second) // window 7 s: the last tick is t0-1s, the furthest second t0+6s
	if !w.Add(Entry{ID: 1, At: at(6 * time.Second)}) {
		t.Fatal("the furthest second of the window was refused")
	}
	if w.Add(Entry{ID: 2, At: at(7 * time.Second)}) {
		t.Error("one second beyond the window was accepted")
	}
	for s := range 6 {
		if got := collect(w, t0.Add(time.Duration(s)*time.Second)); len(got) != 0 {
			t.Fatalf("at +%ds fired %v, want nothing before +6s", s, got)
		}
	}
	if got := fmt.Sprint(collect(w, t0.Add(6*time.Second))); got != "[1]" {
		t.Errorf("at +6s fired %s, want [1]", got)
	}
}

// TestWheelEntryAtTheLastTick: an entry for the second just processed has
// passed: it is due at the next Advance, even one that moves no further.
func TestWheelEntryAtTheLastTick(t *testing.T) {
	t.Parallel()
	w := New(t0, 5*time.Minute)
	collect(w, t0.Add(10*time.Second))
	if !w.Add(Entry{ID: 7, At: at(10 * time.Second)}) {
		t.Fatal("an entry at the last tick was refused")
	}
	if got := fmt.Sprint(collect(w, t0.Add(10*time.Second))); got != "[7]" {
		t.Errorf("entry at the last tick: due %s at the next Advance, want [7]", got)
	}
	if w.Len() != 0 {
		t.Errorf("len = %d after it fired", w.Len())
	}
}

// TestWheelBeforeNineteenSeventy: fire times before the epoch (negative
// milliseconds) are due at the first whole second at or after them, like
// any other: -5.5 s and -5.001 s are due at -5 s, -5 s at -5 s.
func TestWheelBeforeNineteenSeventy(t *testing.T) {
	t.Parallel()
	start := time.Unix(-10, 0)
	w := New(start, time.Minute)
	for i, ms := range []int64{-5500, -5001, -5000, -4999} {
		if !w.Add(Entry{ID: int64(i), At: ms}) {
			t.Fatalf("entry at %d ms refused", ms)
		}
	}
	if got := collect(w, time.Unix(-6, 0)); len(got) != 0 {
		t.Errorf("at -6 s fired %v, want nothing", got)
	}
	if got := fmt.Sprint(collect(w, time.Unix(-5, 0))); got != "[0 1 2]" {
		t.Errorf("at -5 s fired %s, want [0 1 2]", got)
	}
	if got := fmt.Sprint(collect(w, time.Unix(-4, 0))); got != "[3]" {
		t.Errorf("at -4 s fired %s, want [3]", got)
	}
}

// TestWheelSteadyStateAllocatesNothing: a slot keeps its array for the next
// turn, so one entry a second allocates nothing once every slot has been
// used; a burst's array (over 1024 entries) is dropped once it fired.
func TestWheelSteadyStateAllocatesNothing(t *testing.T) {
	w := New(t0, 6*time.Second) // 8 slots
	now := t0
	due := func(Entry) {}
	step := func() {
		w.Add(Entry{ID: 1, At: now.Add(3 * time.Second).UnixMilli()})
		now = now.Add(time.Second)
		w.Advance(now, due)
	}
	for range 16 { // two turns: every slot has an array
		step()
	}
	if n := testing.AllocsPerRun(100, step); n != 0 {
		t.Errorf("one entry a second allocates %.1f times per second, want 0", n)
	}
	burst := now.Add(2 * time.Second)
	for i := range 2000 {
		w.Add(Entry{ID: int64(i), At: burst.UnixMilli()})
	}
	w.Advance(burst, due)
	if s := w.slots[burst.Unix()&w.mask]; s != nil {
		t.Errorf("after a burst of 2000 fired its slot keeps an array of %d entries, want none", cap(s))
	}
}
