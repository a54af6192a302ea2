package defs

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// cronSpec is a parsed cron expression: bit sets of the values each field
// allows, the Quartz day operators, and whether the day fields count as
// restricted. Matching is on wall-clock readings (seconds as if in UTC).
type cronSpec struct {
	sec, min uint64 // bits 0-59
	hour     uint32 // bits 0-23
	dom      uint32 // bits 1-31
	month    uint16 // bits 1-12
	dow      uint8  // bits 0-6, Sunday 0

	domStar, dowStar bool // the field's text starts with * or is ?: unrestricted for the either-or rule

	domLast    uint32 // L-n: bit n (L is L-0), n 0-30
	domNearW   uint32 // nW: bit n
	domLastW   bool   // LW
	dowLast    uint8  // nL: bit d, the last weekday d of the month
	dowNth     [7]uint8
	hasDomSpec bool // any of the dom operators above
	hasDowSpec bool // any of the dow operators above

	wildcard bool // minute, hour (or seconds) field starts with *: follows real time across DST

	// empty names a field written as commas only ("1 , * * *"): robfig/cron
	// read it as no value, so it is kept, and named if it never fires.
	empty error
}

// ErrCron is the sentinel of every refused cron expression.
var ErrCron = errors.New("defs: bad cron expression")

// cronError names the field that failed, what it holds, and the fix.
type cronError struct {
	field, text, msg string
}

func (e *cronError) Error() string {
	if e.field == "" {
		return e.msg
	}
	return fmt.Sprintf("%s field %q: %s", e.field, e.text, e.msg)
}

func (e *cronError) Unwrap() error { return ErrCron }

func cronErr(field, text, format string, args ...any) error {
	return &cronError{field: field, text: text, msg: fmt.Sprintf(format, args...)}
}

// cronField describes one field of an expression.
type cronField struct {
	name     string
	min, max int
	names    map[string]int
}

var (
	fSec   = cronField{name: "seconds", min: 0, max: 59}
	fMin   = cronField{name: "minute", min: 0, max: 59}
	fHour  = cronField{name: "hour", min: 0, max: 23}
	fDom   = cronField{name: "day-of-month", min: 1, max: 31}
	fMonth = cronField{name: "month", min: 1, max: 12, names: map[string]int{
		"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12}}
	fDow = cronField{name: "day-of-week", min: 0, max: 7, names: map[string]int{
		"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}}
)

var descriptors = map[string]string{
	"@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
	"@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *", "@hourly": "0 0 * * * *",
}

var dayNames = [7]string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}

// parseCronSpec parses 5 fields, 6 with a leading seconds field, or a
// descriptor (not @every, which the caller handles).
func parseCronSpec(spec string) (*cronSpec, error) {
	if strings.HasPrefix(spec, "@") {
		d, ok := descriptors[strings.ToLower(spec)]
		if !ok {
			return nil, cronErr("", spec, "unknown descriptor %q: use @yearly, @monthly, @weekly, @daily, @hourly or @every 30s", spec)
		}
		return parseCronSpec(d)
	}
	f := strings.Fields(spec)
	switch {
	case len(f) == 7:
		return nil, cronErr("", spec, "%q has 7 fields: a year field is not supported (Quartz); remove it and keep seconds, minute, hour, day of month, month, day of week", spec)
	case len(f) < 5 || len(f) > 7:
		return nil, cronErr("", spec, "%q has %d fields: write 5 (minute hour day-of-month month day-of-week, e.g. \"0 2 * * *\") or 6 with a leading seconds field", spec, len(f))
	case len(f) == 5:
		f = append([]string{"0"}, f...)
	}
	c := &cronSpec{}
	// `?` is the same as `*` (docs/schedules.md), for this rule too.
	star := func(field string) bool { return strings.HasPrefix(field, "*") || strings.HasPrefix(field, "?") }
	c.wildcard = star(f[1]) || star(f[2]) || (len(strings.Fields(spec)) == 6 && star(f[0]))
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var m uint64
	var err error
	m, err = parseField(f[0], fSec)
	add(err)
	c.sec = m
	m, err = parseField(f[1], fMin)
	add(err)
	c.min = m
	m, err = parseField(f[2], fHour)
	add(err)
	c.hour = uint32(m)
	m, err = parseField(f[4], fMonth)
	add(err)
	c.month = uint16(m)
	add(c.parseDom(f[3]))
	add(c.parseDow(f[5], f[3] == "?" || f[5] == "?"))
	for i, fl := range []cronField{fSec, fMin, fHour, fDom, fMonth, fDow} {
		if strings.Trim(f[i], ",") == "" && c.empty == nil {
			c.empty = cronErr(fl.name, f[i], "has no value: write * for every value, or a value %d-%d", fl.min, fl.max)
		}
	}
	if len(errs) > 0 { // every bad field at once, on one line
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return nil, &cronError{msg: strings.Join(msgs, "; ")}
	}
	return c, nil
}

// parseField parses a plain field: lists of *, ?, n, a-b, with /step.
func parseField(text string, f cronField) (uint64, error) {
	var mask uint64
	for item := range strings.SplitSeq(text, ",") {
		if item == "" {
			continue // "1," and "1,,2" as robfig/cron reads them
		}
		m, err := parseItem(item, text, f)
		if err != nil {
			return 0, err
		}
		mask |= m
	}
	return mask, nil
}

func parseItem(item, text string, f cronField) (uint64, error) {
	if strings.ContainsAny(item, "Hh") && !isName(item, f) {
		return 0, cronErr(f.name, text, "H (a hashed value, Jenkins syntax) is not supported: write the value, e.g. 17")
	}
	rng, stepText, hasStep := strings.Cut(item, "/")
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepText)
		if err != nil || n < 1 {
			return 0, cronErr(f.name, text, "step %q is not a positive number: write e.g. */15", stepText)
		}
		step = n
	}
	lo, hi := f.min, f.max
	if f.name == fDow.name {
		hi = 6
	}
	switch {
	case rng == "*" || rng == "?":
	default:
		a, b, isRange := strings.Cut(rng, "-")
		var err error
		if lo, err = fieldValue(a, text, f); err != nil {
			return 0, err
		}
		hi = lo
		if isRange {
			if hi, err = fieldValue(b, text, f); err != nil {
				return 0, err
			}
		} else if hasStep { // "a/n" means a to the end, every n
			hi = f.max
			if f.name == fDow.name {
				hi = 6
			}
		}
	}
	if f.name == fDow.name {
		// 7 is Sunday too (Quartz and most crons): 1-7 is MON-SUN.
		if hi == 7 && lo == 7 {
			lo, hi = 0, 0
		} else if hi == 7 && lo > 0 {
			return wrapMask(lo, 6, 0, 0, step, f), nil
		} else if lo == 7 {
			lo = 0
		}
	}
	if lo > hi {
		if f.name == fDow.name || f.name == fMonth.name {
			max := f.max
			if f.name == fDow.name {
				max = 6
			}
			return wrapMask(lo, max, f.min, hi, step, f), nil
		}
		return 0, cronErr(f.name, text, "range %d-%d runs backwards: only day of week and month wrap around; write %d-%d,%d-%d", lo, hi, lo, f.max, f.min, hi)
	}
	var m uint64
	for v := lo; v <= hi; v += step {
		m |= 1 << v
	}
	return m, nil
}

// wrapMask is the range lo..max then min..hi, every step counted across the wrap.
func wrapMask(lo, max, min, hi, step int, f cronField) uint64 {
	var m uint64
	n := 0
	for v := lo; v <= max; v++ {
		if n%step == 0 {
			m |= 1 << v
		}
		n++
	}
	for v := min; v <= hi; v++ {
		if n%step == 0 {
			m |= 1 << v
		}
		n++
	}
	return m
}

func isName(item string, f cronField) bool {
	for n := range f.names {
		if strings.Contains(strings.ToUpper(item), n) {
			return true
		}
	}
	return false
}

// fieldValue reads one number or name of field f.
func fieldValue(s, text string, f cronField) (int, error) {
	if v, ok := f.names[strings.ToUpper(s)]; ok {
		return v, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		hint := fmt.Sprintf("write a number %d-%d", f.min, f.max)
		if f.names != nil {
			hint += " or a name"
			if f.name == fDow.name {
				hint += " (SUN, MON, … SAT)"
			} else {
				hint += " (JAN … DEC)"
			}
		}
		switch {
		case strings.EqualFold(s, "L") || strings.HasSuffix(strings.ToUpper(s), "W") || strings.Contains(s, "#"):
			hint = "L, W and # belong to day of month (L, L-3, 15W, LW) or day of week (5L, FRIL, MON#2), alone in their list item"
		}
		return 0, cronErr(f.name, text, "%q is not a value: %s", s, hint)
	}
	if f.name == fHour.name && n == 24 {
		return 0, cronErr(f.name, text, "hour 24 does not exist: hours are 0-23; write 0 for midnight")
	}
	if n < f.min || n > f.max {
		return 0, cronErr(f.name, text, "%d is out of range: write %d-%d", n, f.min, f.max)
	}
	return n, nil
}

// parseDom parses day of month, with L, L-n, nW and LW.
func (c *cronSpec) parseDom(text string) error {
	c.domStar = strings.HasPrefix(text, "*") || text == "?"
	var plain []string
	for item := range strings.SplitSeq(text, ",") {
		u := strings.ToUpper(item)
		switch {
		case u == "":
			continue
		case u == "L":
			c.domLast |= 1
		case u == "LW":
			c.domLastW = true
		case strings.HasPrefix(u, "L-"):
			n, err := strconv.Atoi(u[2:])
			if err != nil || n < 0 || n > 30 {
				return cronErr(fDom.name, text, "%q: L-n needs n 0-30 (L-3 is three days before the last day)", item)
			}
			c.domLast |= 1 << n
		case strings.HasSuffix(u, "W") && len(u) > 1:
			n, err := strconv.Atoi(u[:len(u)-1])
			if err != nil || n < 1 || n > 31 {
				return cronErr(fDom.name, text, "%q: nW needs a day 1-31 (15W is the weekday nearest the 15th)", item)
			}
			c.domNearW |= 1 << n
		default:
			plain = append(plain, item)
			continue
		}
		c.hasDomSpec = true
	}
	m, err := parsePlain(plain, text, fDom)
	c.dom = uint32(m)
	return err
}

// parseDow parses day of week, with nL and d#k; quartz is set when the
// expression uses ?, Quartz's "no specific value".
func (c *cronSpec) parseDow(text string, quartz bool) error {
	c.dowStar = strings.HasPrefix(text, "*") || text == "?"
	if quartz && numericWeekday(text) {
		return cronErr(fDow.name, text, "numbers with ? are Quartz syntax, where Sunday is 1 (cron counts Sunday 0, so this would fire a day late): write names instead: %s", quartzFix(text))
	}
	var plain []string
	for item := range strings.SplitSeq(text, ",") {
		u := strings.ToUpper(item)
		switch {
		case u == "":
			continue
		case strings.Contains(u, "#"):
			d, k, _ := strings.Cut(u, "#")
			dv, err := fieldValue(d, text, fDow)
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(k)
			if err != nil || n < 1 || n > 5 {
				return cronErr(fDow.name, text, "%q: d#k needs k 1-5 (MON#2 is the second Monday)", item)
			}
			c.dowNth[dv%7] |= 1 << n
		case u == "L":
			return cronErr(fDow.name, text, "L alone in day of week is ambiguous: write SAT for Saturdays, or 5L (FRIL) for the last Friday of the month")
		case strings.HasSuffix(u, "L") && len(u) > 1:
			dv, err := fieldValue(u[:len(u)-1], text, fDow)
			if err != nil {
				return err
			}
			c.dowLast |= 1 << (dv % 7)
		default:
			plain = append(plain, item)
			continue
		}
		c.hasDowSpec = true
	}
	m, err := parsePlain(plain, text, fDow)
	c.dow = uint8(m&0x7f | m>>7&1) // bit 7 is Sunday too
	return err
}

// parsePlain parses the plain items of a day field (those without L, W or
// #) as one list; an error names the whole field's text, not just the
// plain part. No plain items match nothing (0).
func parsePlain(plain []string, text string, f cronField) (uint64, error) {
	if len(plain) == 0 {
		return 0, nil
	}
	m, err := parseField(strings.Join(plain, ","), f)
	if err != nil {
		var ce *cronError
		if errors.As(err, &ce) {
			ce.text = text
		}
		return 0, err
	}
	return m, nil
}

// numericWeekday reports whether a day-of-week field names a day by number
// (not counting the k of d#k or a /step).
func numericWeekday(text string) bool {
	for item := range strings.SplitSeq(text, ",") {
		item, _, _ = strings.Cut(item, "/")
		item, _, _ = strings.Cut(item, "#")
		if strings.ContainsAny(item, "0123456789") {
			return true
		}
	}
	return false
}

// quartzFix rewrites a Quartz day-of-week field (Sunday 1) with names. A
// field with a 0 cannot be Quartz's: it is named by cron's numbers.
func quartzFix(text string) string {
	var b strings.Builder
	num, verbatim := -1, false
	shift := 6 // Quartz: 1 is SUN
	for item := range strings.SplitSeq(text, ",") {
		for v := range strings.SplitSeq(strings.SplitN(strings.SplitN(item, "/", 2)[0], "#", 2)[0], "-") {
			if v == "0" {
				shift = 0
			}
		}
	}
	flush := func() {
		if num >= 0 {
			if verbatim {
				b.WriteString(strconv.Itoa(num))
			} else {
				b.WriteString(dayNames[(num+shift)%7])
			}
			num = -1
		}
	}
	for _, r := range text {
		if r >= '0' && r <= '9' {
			if num < 0 {
				num = 0
			}
			num = num*10 + int(r-'0')
			continue
		}
		flush()
		switch r {
		case '#', '/':
			verbatim = true
		case ',', '-':
			verbatim = false
		}
		b.WriteRune(r)
	}
	flush()
	return b.String()
}

// daysIn returns the number of days of month m in year y.
func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// dayMatch reports whether day d of month m in year y matches; wd1 is the
// weekday of the 1st, last the month's length.
func (c *cronSpec) dayMatch(d, wd1, last int) bool {
	wd := (wd1 + d - 1) % 7
	domOK := c.dom&(1<<d) != 0
	if !domOK && c.hasDomSpec {
		domOK = c.domSpecMatch(d, wd, wd1, last)
	}
	dowOK := c.dow&(1<<wd) != 0
	if !dowOK && c.hasDowSpec {
		dowOK = c.dowLast&(1<<wd) != 0 && d+7 > last || c.dowNth[wd]&(1<<((d-1)/7+1)) != 0
	}
	if c.domStar || c.dowStar {
		return domOK && dowOK
	}
	return domOK || dowOK
}

func (c *cronSpec) domSpecMatch(d, wd, wd1, last int) bool {
	if n := last - d; n >= 0 && c.domLast&(1<<n) != 0 {
		return true
	}
	if c.domLastW && d == nearestWeekday(last, wd1, last) {
		return true
	}
	if c.domNearW != 0 && wd != 0 && wd != 6 {
		// The day nW names lies within two days of the weekday it lands on;
		// a day beyond the month's end (31W in April) names none.
		for n := max(1, d-2); n <= min(last, d+2); n++ {
			if c.domNearW&(1<<n) != 0 && nearestWeekday(n, wd1, last) == d {
				return true
			}
		}
	}
	return false
}

// nearestWeekday returns the weekday (Monday to Friday) nearest to day n
// of a month of last days whose 1st is weekday wd1, never leaving the
// month: a Saturday moves to Friday (or Monday the 3rd, for the 1st), a
// Sunday to Monday (or Friday, for the last day).
func nearestWeekday(n, wd1, last int) int {
	switch (wd1 + n - 1) % 7 {
	case 6: // Saturday
		if n == 1 {
			return 3
		}
		return n - 1
	case 0: // Sunday
		if n == last {
			return n - 2
		}
		return n + 1
	}
	return n
}

// searchYears bounds the search for the next matching day: the Gregorian
// calendar repeats every 400 years, so a day that matches nowhere in 401
// years matches never.
const searchYears = 401

// nextWall returns the first wall-clock reading (Unix seconds of the
// reading taken as UTC) at or after w that matches, or false if none does.
func (c *cronSpec) nextWall(w int64) (int64, bool) {
	t := time.Unix(w, 0).UTC()
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	end := y + searchYears
	for y <= end {
		if c.month&(1<<mo) == 0 {
			y, mo, d, h, mi, s = nextMonth(y, mo)
			continue
		}
		last := daysIn(y, mo)
		wd1 := int(time.Date(y, mo, 1, 0, 0, 0, 0, time.UTC).Weekday())
		for ; d <= last; d, h, mi, s = d+1, 0, 0, 0 {
			if !c.dayMatch(d, wd1, last) {
				continue
			}
			if hh, mm, ss, ok := c.timeOfDay(h, mi, s); ok {
				return time.Date(y, mo, d, hh, mm, ss, 0, time.UTC).Unix(), true
			}
		}
		y, mo, d, h, mi, s = nextMonth(y, mo)
	}
	return 0, false
}

func nextMonth(y int, mo time.Month) (int, time.Month, int, int, int, int) {
	if mo == 12 {
		return y + 1, 1, 1, 0, 0, 0
	}
	return y, mo + 1, 1, 0, 0, 0
}

// timeOfDay returns the first matching time of day at or after h:m:s.
func (c *cronSpec) timeOfDay(h, m, s int) (int, int, int, bool) {
	for h < 24 {
		nh := nextBit(uint64(c.hour), h)
		if nh < 0 {
			return 0, 0, 0, false
		}
		if nh != h {
			h, m, s = nh, 0, 0
		}
		for m < 60 {
			nm := nextBit(c.min, m)
			if nm < 0 {
				break
			}
			if nm != m {
				m, s = nm, 0
			}
			if ns := nextBit(c.sec, s); ns >= 0 {
				return h, m, ns, true
			}
			m, s = m+1, 0
		}
		h, m, s = h+1, 0, 0
	}
	return 0, 0, 0, false
}

// nextBit returns the lowest set bit of mask at or above from, or -1.
func nextBit(mask uint64, from int) int {
	if from > 63 {
		return -1
	}
	m := mask >> from << from
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(m)
}
