package engine

import (
	"math"
	"strings"
	"testing"
)

// A server's --dispatch-rate and group rates are bounded like the rates an
// operator sets at run time: NaN, infinite, negative, absurdly high or so
// small that nothing would be dispatched again are refused at start, with
// the bounds.
func TestConfigRefusesRatesNoSchedulerCanRunWith(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{DispatchRate: -5}, "DispatchRate -5: give a rate per second from 0 (unlimited) to 1000000"},
		{Config{DispatchRate: math.NaN()}, "DispatchRate NaN: give a rate per second"},
		{Config{DispatchRate: math.Inf(1)}, "DispatchRate +Inf: give a rate per second"},
		{Config{DispatchRate: 1e7}, "DispatchRate 1e+07: give a rate per second"},
		{Config{DispatchRate: 1e-300}, "DispatchRate 1e-300: give a rate per second from 0 (unlimited) to 1000000, and when not 0 at least 0.001"},
		{Config{GroupRates: map[string]float64{"etl": 1e-300}}, "GroupRates etl 1e-300: give a rate per second"},
	} {
		if _, err := c.cfg.withDefaults(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg.DispatchRate, err, c.want)
		}
	}
	for _, ok := range []float64{0, 0.001, 0.5, 1_000_000} {
		if _, err := (Config{DispatchRate: ok}).withDefaults(); err != nil {
			t.Errorf("DispatchRate %v refused: %v", ok, err)
		}
	}
}
