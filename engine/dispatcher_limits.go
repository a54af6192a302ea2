package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/bucket"
	"github.com/ax-sched/ax/store"
)

// limitsSetting is the setting that keeps the limits set at run time, so
// that a restart or a takeover applies them too.
const limitsSetting = "dispatch_limits"

// MaxRate bounds every dispatch rate (per second) an operator may set: a
// higher one is a typo, not a limit.
const MaxRate = 1_000_000

// MinRate is the smallest rate other than 0 (unlimited), one dispatch in
// 1,000 s: a smaller one (1e-300, a typo for 1e300 or for 0) would stop
// dispatch for good while looking like a limit.
const MinRate = 0.001

// checkRate refuses a dispatch rate (per second) no limit can be: negative,
// not finite, above MaxRate, or positive below MinRate. It is the one rule
// for the server's configured rates and those set at run time.
func checkRate(r float64) error {
	if r == 0 || (r >= MinRate && r <= MaxRate) {
		return nil // also false for NaN
	}
	return fmt.Errorf("give a rate per second from 0 (unlimited) to %d, and when not 0 at least %v", MaxRate, MinRate)
}

// Limits are the dispatch limits in force: rates per second (global and
// per group, a token bucket) and concurrency caps (global on local
// attempts, per group). Zero is unlimited.
type Limits struct {
	bucket.Limits
	Pools
}

// checkLimits refuses what no limit can be: a negative, non-finite or absurd
// rate or cap, or an unknown group. Nothing is applied when one is refused.
func (d *dispatcher) checkLimits(r SetLimits) error {
	if r.Global == nil && len(r.Groups) == 0 && r.MaxRunning == nil && len(r.GroupMaxRunning) == 0 {
		return errors.New("limits: give global, groups, max_running or group_max_running")
	}
	badCap := func(n int) bool { return n < 0 || n > MaxRunningBound }
	if r.Global != nil {
		if err := checkRate(*r.Global); err != nil {
			return fmt.Errorf("limits: global rate %v: %w", *r.Global, err)
		}
	}
	if r.MaxRunning != nil && badCap(*r.MaxRunning) {
		return fmt.Errorf("limits: max_running %d: give a number of attempts from 0 (unlimited) to %d", *r.MaxRunning, MaxRunningBound)
	}
	groups := map[string]bool{}
	var names []string
	for _, t := range d.sched.tasks {
		if !groups[t.def.Group] {
			groups[t.def.Group] = true
			names = append(names, t.def.Group)
		}
	}
	for _, g := range slices.Sorted(maps.Keys(r.Groups)) {
		if !groups[g] {
			return fmt.Errorf("limits: no group %q%s", g, defs.DidYouMean(g, names))
		}
		if err := checkRate(r.Groups[g]); err != nil {
			return fmt.Errorf("limits: group %s rate %v: %w", g, r.Groups[g], err)
		}
	}
	for _, g := range slices.Sorted(maps.Keys(r.GroupMaxRunning)) {
		if !groups[g] {
			return fmt.Errorf("limits: no group %q%s", g, defs.DidYouMean(g, names))
		}
		if n := r.GroupMaxRunning[g]; badCap(n) {
			return fmt.Errorf("limits: group %s max_running %d: give a number of attempts from 0 (unlimited) to %d", g, n, MaxRunningBound)
		}
	}
	return nil
}

// setLimits changes the token bucket's rates and the concurrency caps,
// without a restart, and stores them. Bad values and unknown groups
// are refused and change nothing.
func (d *dispatcher) setLimits(ctx context.Context, r SetLimits, now time.Time) (string, error) {
	if err := d.checkLimits(r); err != nil {
		return "", err
	}
	if r.Global != nil {
		d.bucket.SetGlobal(*r.Global, now)
	}
	for g, r := range r.Groups {
		d.bucket.SetGroup(g, r, now)
	}
	d.pool.set(r.MaxRunning, r.GroupMaxRunning)
	l := d.limits()
	b, _ := json.Marshal(storedForm(l))
	if err := d.host.w().SetSetting(ctx, limitsSetting, string(b), now); err != nil {
		return "", fmt.Errorf("limits: applied but not stored (a restart would lose them): %w", err)
	}
	d.host.publishLimits(l)
	d.soon() // a raised cap lets waiting work out at once
	return "limits now " + describeLimits(l), nil
}

// limits returns the limits in force.
func (d *dispatcher) limits() Limits {
	return Limits{Limits: d.bucket.Limits(), Pools: d.pool.limits()}
}

// ErrBadStoredLimits is StoredLimits's error for a stored value it cannot
// read: the configured limits apply.
var ErrBadStoredLimits = errors.New("engine: stored limits unreadable")

// storedLimits is how the limits in force after an operator's change are
// stored: every field written, so that a lifted cap (0) or a lifted group
// (absent from a present map) reads back as lifted, not as "not stored".
// A field missing from a stored value (one written before caps existed)
// leaves the configured limit alone.
type storedLimits struct {
	Global          *float64           `json:"global"`
	Groups          map[string]float64 `json:"groups"`
	MaxRunning      *int               `json:"max_running"`
	GroupMaxRunning map[string]int     `json:"group_max_running"`
}

func storedForm(l Limits) storedLimits {
	s := storedLimits{Global: &l.Global, Groups: l.Groups, MaxRunning: &l.MaxRunning, GroupMaxRunning: l.GroupMaxRunning}
	if s.Groups == nil {
		s.Groups = map[string]float64{}
	}
	if s.GroupMaxRunning == nil {
		s.GroupMaxRunning = map[string]int{}
	}
	return s
}

// over returns the limits in force when s is applied over configured ones.
func (s storedLimits) over(configured Limits) Limits {
	l := configured
	if s.Global != nil {
		l.Global = *s.Global
	}
	if s.Groups != nil {
		l.Groups = s.Groups
	}
	if s.MaxRunning != nil {
		l.MaxRunning = *s.MaxRunning
	}
	if s.GroupMaxRunning != nil {
		l.GroupMaxRunning = s.GroupMaxRunning
	}
	return l
}

// settingsReader reads the store's settings.
type settingsReader interface {
	Settings(ctx context.Context) (map[string]string, error)
}

func readStoredLimits(ctx context.Context, st settingsReader) (s storedLimits, ok bool, err error) {
	set, err := st.Settings(ctx)
	if err != nil {
		return storedLimits{}, false, fmt.Errorf("engine: read stored limits: %w", err)
	}
	raw, ok := set[limitsSetting]
	if !ok {
		return storedLimits{}, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return storedLimits{}, false, fmt.Errorf("%w: %q: %v", ErrBadStoredLimits, raw, err)
	}
	return s, true, nil
}

// StoredLimits returns the limits an operator set at run time, which the
// primary applies over its configured ones; ok is false when none was set.
// A limit the stored value does not name (one stored before caps existed)
// is zero here and the configured one applies.
func StoredLimits(ctx context.Context, st *store.Store) (l Limits, ok bool, err error) {
	s, ok, err := readStoredLimits(ctx, st)
	if err != nil || !ok {
		return Limits{}, ok, err
	}
	return s.over(Limits{}), true, nil
}

// loadLimits applies the limits stored by an earlier setLimits, if any:
// they win over the configured ones, a lifted one included. Unreadable ones
// are logged and ignored.
func (d *dispatcher) loadLimits(ctx context.Context, now time.Time) error {
	s, ok, err := readStoredLimits(ctx, d.settings)
	switch {
	case errors.Is(err, ErrBadStoredLimits):
		d.log.Warn("stored_limits_ignored", "err", err.Error())
	case err != nil:
		return err
	case ok:
		d.applyLimits(s.over(d.limits()), now)
		d.log.Info("limits_from_store", "limits", describeLimits(d.limits()))
	}
	d.host.publishLimits(d.limits())
	return nil
}

// applyLimits puts l in force as a whole: a group rate or cap in force now
// but not in l is lifted.
func (d *dispatcher) applyLimits(l Limits, now time.Time) {
	cur := d.limits()
	d.bucket.SetGlobal(l.Global, now)
	for g := range cur.Groups {
		if _, ok := l.Groups[g]; !ok {
			d.bucket.SetGroup(g, 0, now)
		}
	}
	for g, r := range l.Groups {
		d.bucket.SetGroup(g, r, now)
	}
	caps := maps.Clone(l.GroupMaxRunning)
	for g := range cur.GroupMaxRunning {
		if _, ok := caps[g]; !ok {
			if caps == nil {
				caps = map[string]int{}
			}
			caps[g] = 0
		}
	}
	d.pool.set(&l.MaxRunning, caps)
}

// publishLimits puts the limits in force in Stats.
func (e *Engine) publishLimits(l Limits) {
	e.statsMu.Lock()
	e.stats.Limits = l
	e.statsMu.Unlock()
}

func describeLimits(l Limits) string {
	rate := func(r float64) string {
		if r <= 0 {
			return "unlimited"
		}
		return strconv.FormatFloat(r, 'g', -1, 64) + "/s"
	}
	parts := []string{"global " + rate(l.Global)}
	gs := make([]string, 0, len(l.Groups))
	for g := range l.Groups {
		gs = append(gs, g)
	}
	slices.Sort(gs)
	for _, g := range gs {
		parts = append(parts, "group "+g+" "+rate(l.Groups[g]))
	}
	running := func(n int) string {
		if n <= 0 {
			return "unlimited"
		}
		return strconv.Itoa(n)
	}
	parts = append(parts, "max running "+running(l.MaxRunning)+" local")
	for _, g := range slices.Sorted(maps.Keys(l.GroupMaxRunning)) {
		parts = append(parts, "group "+g+" max running "+running(l.GroupMaxRunning[g]))
	}
	return strings.Join(parts, ", ")
}
