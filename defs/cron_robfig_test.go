package defs

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// TestCronAgreesWithRobfig: random expressions that robfig/cron (the
// parser ax used before) accepted and could fire stay accepted, and in UTC,
// where no DST rule applies, fire at the same times — except where ax
// follows cron on purpose: a day field starting with * but not * alone
// (*/2) counts as unrestricted. The only ones refused are the Quartz trap
// (? with a numeric day of week) and those with a field of commas only that
// then never fires.
func TestCronAgreesWithRobfig(t *testing.T) {
	t.Parallel()
	p := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	r := rand.New(rand.NewPCG(13, 2026))
	items := []string{"*", "?", "0", "1", "5", "7", "12", "23", "31", "59", "*/5", "1-5", "5-1", "0-6", "1/2", "3-9/3",
		"MON", "mon-fri", "JAN", "jan-mar", "1,2", "1-3,7", "SUN-SAT", "*/7", "2/3", ",", "1,", "15,L"}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	compared := 0
	for range 20_000 {
		f := make([]string, 5+r.IntN(2))
		for i := range f {
			f[i] = items[r.IntN(len(items))]
		}
		spec := strings.Join(f, " ")
		old, err := p.Parse(spec)
		if err != nil || old.Next(from).IsZero() {
			continue
		}
		s, err := ParseSchedule(spec, time.UTC, from)
		if err != nil {
			if !strings.Contains(err.Error(), "has no value") && !strings.Contains(err.Error(), "Quartz syntax") {
				t.Errorf("%q: robfig/cron accepted it, ax refuses: %v", spec, err)
			}
			continue
		}
		dom, dow := f[len(f)-3], f[len(f)-1]
		if strings.HasPrefix(dom, "*") && dom != "*" || strings.HasPrefix(dow, "*") && dow != "*" {
			continue
		}
		a, b := from, from
		for range 5 {
			a, b = old.Next(a), s.Next(b)
			if !a.Equal(b) {
				t.Errorf("%q in UTC: robfig/cron fires at %s, ax at %s", spec, a, b)
				break
			}
		}
		compared++
	}
	if compared < 1000 {
		t.Errorf("only %d expressions compared", compared)
	}
}
