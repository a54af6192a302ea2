package engine

import (
	"fmt"
	"time"
)

// MaxTriggerDelay bounds a trigger's --in: a run further ahead belongs on
// a schedule.
const MaxTriggerDelay = 366 * 24 * time.Hour

// ParseDelay reads a trigger's --in (a Go duration, "10m"); withAt says
// --at is given too, which it excludes.
func ParseDelay(s string, withAt bool) (time.Duration, error) {
	if withAt {
		return 0, fmt.Errorf("in %q: give --in or --at, not both (--at a time to come delays the run too)", s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("in %q: give a delay such as 10m or 2h30m", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("in %q: the delay is not ahead; give a time to come, such as 10m", s)
	}
	if err := checkDelay(Trigger{In: d}); err != nil {
		return 0, err
	}
	return d, nil
}

// checkDelay refuses a trigger whose delay is not ahead or too far ahead.
func checkDelay(r Trigger) error {
	switch {
	case r.In < 0:
		return fmt.Errorf("in %s: the delay is negative; give a time to come, such as 10m", r.In)
	case r.In > MaxTriggerDelay:
		return fmt.Errorf("in %s: give at most %s (366 days); put a run further ahead on a schedule", r.In, MaxTriggerDelay)
	case r.In > 0 && !r.At.IsZero():
		return fmt.Errorf("in %s: give --in or --at, not both", r.In)
	}
	return nil
}
