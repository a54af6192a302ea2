package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// zones are the time zones schedules are generated in: each has DST days
// (Lord Howe shifts by 30 minutes, Santiago changes at midnight) but UTC.
var zones = []string{"America/New_York", "Europe/Berlin", "Australia/Sydney", "Australia/Lord_Howe", "America/Santiago", "UTC"}

// cronForm is one generated schedule, kept in the parts the independent
// expectation (expect.go) needs: the seconds, minute and hour fields, each
// "*", "*/N" or a number; day, month and weekday are always "*".
type cronForm struct {
	text  string        // as written in the file
	every time.Duration // @every D; zero for cron forms
	sec   string        // "" for 5-field forms (then second 0)
	min   string
	hour  string
}

// wildcard reports whether the form follows real time (issue 13's Debian
// rule): its minute or hour field, or a 6-field form's seconds, starts with *.
func (c cronForm) wildcard() bool {
	return c.every > 0 || strings.HasPrefix(c.min, "*") || strings.HasPrefix(c.hour, "*") || strings.HasPrefix(c.sec, "*")
}

// genTask is one generated task.
type genTask struct {
	name     string
	deps     []string // same pipeline: names; other pipelines: "p.t"
	cron     *cronForm
	manual   bool
	timeout  time.Duration
	retries  int
	interval time.Duration
	group    string
	misfire  string
	overlap  string
	http     bool // an HTTP task: its late and duplicate results come through the inbox
	// maxRunning is the task's own max_running (0: none; the pipeline's
	// defaults may still give one).
	maxRunning int
	// delay is the task's delay: it starts no earlier than its run's fire
	// time plus it (0: none).
	delay time.Duration
}

// genPipeline is one generated pipeline file.
type genPipeline struct {
	name     string
	zone     string
	group    string
	schedule *cronForm
	misfire  string
	overlap  string
	tasks    []*genTask
	// maxRunning is the max_running of the pipeline's defaults (0: none).
	maxRunning int
}

// spec is everything the generator decided for a seed.
type spec struct {
	pipelines []*genPipeline
	start     time.Time // the simulated start: shortly before a DST change of some zone
	rate      float64   // the engine's global dispatch rate; 0 is unlimited
	groups    map[string]float64
	standby   bool // a second engine waits as standby from the start
	// groupCaps are the engines' configured caps on the attempts of a
	// group running at once (Config.GroupMaxRunning); see drawCaps.
	groupCaps map[string]int
}

var (
	misfires = []string{"fire_once", "skip", "fire_all"}
	overlaps = []string{"skip", "wait", "allow"}
	groups   = []string{"etl", "ops", "default"}
)

// pick returns a random element of xs.
func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// genCron draws a schedule. fast forms (seconds) are only given to small
// pipelines, so that a seed stays within its dispatch budget.
func genCron(r *rand.Rand, fast bool) *cronForm {
	divs := []int{1, 2, 5, 10, 15, 20, 30}
	fast = fast && r.IntN(3) == 0
	switch n := r.IntN(10); {
	case fast && n < 2:
		d := pick(r, []int{1, 2, 5, 10, 30})
		return &cronForm{text: fmt.Sprintf("@every %ds", d), every: time.Duration(d) * time.Second}
	case fast && n < 5:
		d := pick(r, divs)
		return &cronForm{text: fmt.Sprintf("*/%d * * * * *", d), sec: fmt.Sprintf("*/%d", d), min: "*", hour: "*"}
	case n < 7:
		d := pick(r, []int{1, 2, 5, 10, 15, 30})
		return &cronForm{text: fmt.Sprintf("*/%d * * * *", d), min: fmt.Sprintf("*/%d", d), hour: "*"}
	case n < 8:
		m := pick(r, []int{0, 15, 30})
		return &cronForm{text: fmt.Sprintf("%d * * * *", m), min: fmt.Sprint(m), hour: "*"}
	default: // fixed: around the hours DST changes happen at
		h, m := pick(r, []int{0, 1, 2, 3}), pick(r, []int{0, 15, 30, 45})
		if r.IntN(3) == 0 {
			s := pick(r, []int{0, 30})
			return &cronForm{text: fmt.Sprintf("%d %d %d * * *", s, m, h), sec: fmt.Sprint(s), min: fmt.Sprint(m), hour: fmt.Sprint(h)}
		}
		return &cronForm{text: fmt.Sprintf("%d %d * * *", m, h), min: fmt.Sprint(m), hour: fmt.Sprint(h)}
	}
}

// generate draws the pipelines of a seed: a few pipelines, one in a few
// large (up to 300 tasks, scheduled rarely), cross-pipeline edges to
// earlier pipelines, manual gates, every misfire and overlap policy.
func generate(r *rand.Rand, restrict restrictions) *spec {
	s := &spec{groups: map[string]float64{}}
	np := 1 + r.IntN(4)
	for i := range np {
		p := &genPipeline{name: fmt.Sprintf("p%d", i), zone: pick(r, zones), group: pick(r, groups),
			misfire: pick(r, misfires), overlap: pick(r, overlaps)}
		n := 1 + r.IntN(8)
		big := r.IntN(12) == 0
		if big {
			n = 50 + r.IntN(251)
		}
		kind := r.IntN(3) // 0: pipeline schedule, 1: independent crons, 2: unscheduled
		if kind == 0 {
			p.schedule = genCron(r, n <= 4)
			if big && p.schedule.every > 0 || big && strings.HasPrefix(p.schedule.sec, "*") {
				p.schedule = &cronForm{text: "0 * * * *", min: "0", hour: "*"}
			}
		}
		for j := range n {
			t := &genTask{name: fmt.Sprintf("t%d", j), timeout: time.Duration(3+r.IntN(28)) * time.Second}
			if r.IntN(3) == 0 {
				t.retries, t.interval = 1+r.IntN(3), time.Duration(1+r.IntN(10))*time.Second
			}
			if r.IntN(4) == 0 {
				t.group = pick(r, groups)
			}
			t.http = r.IntN(4) == 0
			if kind == 1 && (j == 0 || r.IntN(2) == 0) {
				t.cron = genCron(r, !big)
				t.misfire, t.overlap = pick(r, misfires), pick(r, overlaps)
			} else if j > 0 && kind == 1 {
				// a chain behind the previous task: one schedule reaches it
				t.deps = []string{fmt.Sprintf("t%d", j-1)}
			} else if j > 0 {
				// depend on up to three earlier tasks: the graph stays acyclic
				for range 1 + r.IntN(3) {
					d := fmt.Sprintf("t%d", r.IntN(j))
					if big {
						d = fmt.Sprintf("t%d", max(0, j-1-r.IntN(min(j, 10))))
					}
					if !contains(t.deps, d) {
						t.deps = append(t.deps, d)
					}
				}
				if !restrict.noManual && r.IntN(15) == 0 {
					t.manual = true
				}
			}
			p.tasks = append(p.tasks, t)
		}
		// cross-pipeline edges to an earlier pipeline's task (acyclic by order)
		if i > 0 && r.IntN(2) == 0 {
			up := s.pipelines[r.IntN(i)]
			t := p.tasks[r.IntN(len(p.tasks))]
			if t.cron == nil && (len(t.deps) > 0 || p.schedule != nil || kind == 2) {
				t.deps = append(t.deps, up.name+"."+pick(r, up.tasks).name)
			}
		}
		s.pipelines = append(s.pipelines, p)
	}
	if r.IntN(3) == 0 {
		s.rate = float64(20 + r.IntN(200))
	}
	if r.IntN(4) == 0 {
		s.groups[pick(r, groups)] = float64(10 + r.IntN(50))
	}
	s.standby = r.IntN(3) == 0
	s.start = dstStart(r, pick(r, zones[:len(zones)-1]))
	return s
}

// drawCaps gives some seeds concurrency caps: a max_running on a
// few tasks, in a pipeline's defaults, and on a group in the engines'
// configuration. It draws from a source of its own (r, from the seed), so
// the worlds generate draws stay those of the seeds recorded before caps
// were drawn, but for the caps.
func drawCaps(r *rand.Rand, s *spec) {
	if r.IntN(3) != 0 {
		return
	}
	for _, p := range s.pipelines {
		if r.IntN(4) == 0 {
			p.maxRunning = 1 + r.IntN(3)
		}
		for _, t := range p.tasks {
			if r.IntN(4) == 0 {
				t.maxRunning = 1 + r.IntN(2)
			}
		}
	}
	if r.IntN(2) == 0 {
		s.groupCaps = map[string]int{pick(r, groups): 1 + r.IntN(4)}
	}
}

// drawSlow gives one HTTP task in three a timeout longer than
// runner.Silence (40–120 s) and at least one retry, so that an executor
// that falls silent may still run an attempt when the scheduler stops
// hearing from it, while a retry could run elsewhere (I1 covers silent
// executors that come back). It draws from a source of its own (r, from the
// seed), so the generator's draws stay those of the seeds recorded before.
func drawSlow(r *rand.Rand, s *spec) {
	for _, p := range s.pipelines {
		for _, t := range p.tasks {
			if !t.http || r.IntN(3) != 0 {
				continue
			}
			t.timeout = time.Duration(40+r.IntN(81)) * time.Second
			if t.retries == 0 {
				t.retries, t.interval = 1, time.Second
			}
		}
	}
}

// drawDelay gives one task in six a `delay:` of 1 to 20 s (under the
// minute of fires the misfire check leaves out before a crash), so that
// I10 (no start before the run's fire time plus the delay) is exercised
// by it. It draws from a source of its own (r, from the seed), so the
// generator's draws stay those of the seeds recorded before.
func drawDelay(r *rand.Rand, s *spec) {
	for _, p := range s.pipelines {
		for _, t := range p.tasks {
			if r.IntN(6) == 0 {
				t.delay = time.Duration(1+r.IntN(20)) * time.Second
			}
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// dstStart returns an instant shortly (up to two hours) before one of the
// zone's DST changes in 2026 or 2027, found by walking the zone's offsets
// with the standard library (not with the code under test).
func dstStart(r *rand.Rand, zone string) time.Time {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		panic(err)
	}
	var changes []time.Time
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, off := t.In(loc).Zone()
	for ; t.Year() < 2028; t = t.Add(15 * time.Minute) {
		if _, o := t.In(loc).Zone(); o != off {
			changes, off = append(changes, t), o
		}
	}
	c := pick(r, changes)
	return c.Add(-time.Duration(1+r.IntN(120)) * time.Minute).Truncate(time.Second)
}

// yaml renders p as a pipeline file.
func (p *genPipeline) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline: %s\ngroup: %s\ntimezone: %s\n", p.name, p.group, p.zone)
	if p.schedule != nil {
		fmt.Fprintf(&b, "schedule: %q\n", p.schedule.text)
	}
	fmt.Fprintf(&b, "misfire: %s\noverlap: %s\n", p.misfire, p.overlap)
	if p.maxRunning > 0 {
		fmt.Fprintf(&b, "defaults:\n  max_running: %d\n", p.maxRunning)
	}
	b.WriteString("tasks:\n")
	for _, t := range p.tasks {
		exec := "function: sim"
		if t.http {
			exec = "http: http://127.0.0.1:9/sim" // served in-process by the simulator
		}
		fmt.Fprintf(&b, "  - name: %s\n    %s\n    timeout: %s\n", t.name, exec, t.timeout)
		if len(t.deps) > 0 {
			fmt.Fprintf(&b, "    depends_on: [%s]\n", strings.Join(t.deps, ", "))
		}
		if t.cron != nil {
			fmt.Fprintf(&b, "    cron: %q\n", t.cron.text)
		}
		if t.misfire != "" {
			fmt.Fprintf(&b, "    misfire: %s\n    overlap: %s\n", t.misfire, t.overlap)
		}
		if t.manual {
			b.WriteString("    manual: true\n")
		}
		if t.retries > 0 {
			fmt.Fprintf(&b, "    retry: {count: %d, interval: %s}\n", t.retries, t.interval)
		}
		if t.group != "" {
			fmt.Fprintf(&b, "    group: %s\n", t.group)
		}
		if t.maxRunning > 0 {
			fmt.Fprintf(&b, "    max_running: %d\n", t.maxRunning)
		}
		if t.delay > 0 {
			fmt.Fprintf(&b, "    delay: %s\n", t.delay)
		}
	}
	return b.String()
}
