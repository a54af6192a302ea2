package defs

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/ax-sched/ax/axtype"
	"gopkg.in/yaml.v3"
)

// Options tunes parsing.
type Options struct {
	// Now is the reference time for checks that look ahead, such as whether a
	// cron expression can ever fire. Zero means time.Now().
	Now time.Time
	// Functions are the names of the functions the binary that will run
	// the pipelines registers: a `function:` naming another is an error.
	// Nil means not checked (a program that registers its own).
	Functions []string
}

// nameRe is the shape of pipeline, task and group names: no dots, because a
// dot separates pipeline and task in `other_pipeline.task`.
var nameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// ValidName reports whether s has the shape of a pipeline, task or group
// name.
func ValidName(s string) bool { return nameRe.MatchString(s) }

// functionRe is the shape of a registered function name.
var functionRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:/-]*$`)

// Keys of each mapping of the format, in the order they are documented.
var (
	pipelineKeys = []string{"pipeline", "group", "timezone", "schedule", "disabled", "misfire", "overlap", "params", "env", "defaults", "tasks"}
	taskKeys     = []string{"name", "group", "depends_on", "cron", "disabled", "delay", "manual", "priority", "max_running", "timeout", "wait_timeout", "sla", "retry", "breaker", "misfire", "overlap", "function", "http", "command", "params", "env", "working_dir", "outputs"}
	retryKeys    = []string{"count", "interval", "backoff", "factor", "max_interval", "jitter"}
	breakerKeys  = []string{"window", "min_outcomes", "ratio"}
	depKeys      = []string{"task", "match", "offset"}
	// noDefault are task keys that make no sense as a default of every task.
	noDefault = map[string]string{
		"name":       "each task needs its own name",
		"depends_on": "set it on each task that waits",
		"cron":       "set a pipeline `schedule:` or a `cron:` on a root task",
		"manual":     "set it on the tasks that wait for an operator",
		"outputs":    "declare them on each task that gives them",
		"disabled":   "set it on the pipeline, or on a task with its own cron",
	}
)

// ParseFile reads and parses the pipeline file at path. See [Parse].
func ParseFile(path string, opts Options) (*Pipeline, Errors) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, Errors{{Pos: Pos{File: path, Line: 1, Col: 1}, Msg: fmt.Sprintf("cannot read file: %v", err), Severity: SevError}}
	}
	return Parse(path, data, opts)
}

// Parse parses one pipeline file. It returns the pipeline, with every default
// applied, as far as it could be read (nil when not even its name could), and
// every problem found. The pipeline is valid only when the errors hold no
// problem of severity error. Parse never panics, whatever data holds.
func Parse(file string, data []byte, opts Options) (*Pipeline, Errors) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	p := &parser{file: file, now: opts.Now, funcs: opts.Functions}
	if l := utf8.RuneCountInString(file); l > axtype.MaxFileLen {
		p.errorf(nil, "", "the file's path is %d characters long: use at most %d (the store keeps it in a column of %d); move the file up", l, axtype.MaxFileLen, axtype.MaxFileLen)
	}
	pl := p.parse(data)
	if pl != nil {
		p.checkSize(pl)
	}
	p.errs.Sort()
	return pl, p.errs
}

// checkSize reports a pipeline whose definition, as the store keeps it
// (JSON), is larger than the store's column.
func (p *parser) checkSize(pl *Pipeline) {
	b, err := json.Marshal(pl)
	if err != nil { // params were checked to marshal; nothing else can fail
		return
	}
	if len(b) > axtype.MaxDefinitionBytes {
		p.errs = append(p.errs, &Error{Pos: pl.Pos, Pipeline: pl.Name, Severity: SevError,
			Msg: fmt.Sprintf("the pipeline's definition is %d bytes as JSON: the store keeps at most %d; split it into pipelines, or move large params out of the file", len(b), axtype.MaxDefinitionBytes)})
	}
}

type parser struct {
	file  string
	now   time.Time
	funcs []string // registered functions; nil: not checked
	errs  Errors
	pl    string     // pipeline name, once known
	reads []readRef  // what templates read of upstreams' outputs, checked by checkReads
	arith []arithRef // params scripts print inside $(( … )), checked by checkArith
}

func (p *parser) pos(n *yaml.Node) Pos {
	if n == nil {
		return Pos{File: p.file, Line: 1, Col: 1}
	}
	return Pos{File: p.file, Line: max(n.Line, 1), Col: max(n.Column, 1)}
}

func (p *parser) errorf(n *yaml.Node, task, format string, args ...any) {
	p.errs = append(p.errs, &Error{Pos: p.pos(n), Pipeline: p.pl, Task: task, Msg: fmt.Sprintf(format, args...), Severity: SevError})
}

var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (p *parser) parse(data []byte) *Pipeline {
	if len(bytes.TrimSpace(data)) == 0 {
		p.errorf(nil, "", "file is empty: a pipeline needs at least `pipeline:` (its name) and `tasks:`")
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) { // only comments
			p.errorf(nil, "", "file is empty: a pipeline needs at least `pipeline:` (its name) and `tasks:`")
		} else {
			p.syntaxError(err)
		}
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.errorf(&extra, "", "a second YAML document (after ---): put one pipeline in each file")
	} else if !errors.Is(err, io.EOF) {
		p.syntaxError(err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			p.errorf(nil, "", "file is empty: a pipeline needs at least `pipeline:` (its name) and `tasks:`")
			return nil
		}
		root = root.Content[0]
	}
	root = deref(root)
	if root.Kind != yaml.MappingNode {
		p.errorf(root, "", "a pipeline file must be a mapping with `pipeline:` and `tasks:`, not a %s", kindName(root))
		return nil
	}
	return p.pipeline(root)
}

func (p *parser) syntaxError(err error) {
	msg := err.Error()
	line := 1
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	p.errs = append(p.errs, &Error{Pos: Pos{File: p.file, Line: line, Col: 1}, Msg: "YAML syntax error: " + msg, Severity: SevError})
}

// deref follows YAML aliases (bounded: an alias of an alias is followed a few times).
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 8; i++ {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "empty value"
		}
		return fmt.Sprintf("scalar %q", n.Value)
	}
	return "YAML node"
}

// each walks the pairs of a mapping: it reports repeated keys, unknown keys
// (with a suggestion) and merge keys, and calls fn for the others.
func (p *parser) each(n *yaml.Node, task, where string, known []string, fn func(key string, k, v *yaml.Node)) {
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, task, "%s: keys must be plain words, not a %s", where, kindName(k))
			continue
		}
		key := k.Value
		if key == "<<" {
			p.errorf(k, task, "%s: YAML merge keys (<<) are not supported: put shared settings under `defaults:`", where)
			continue
		}
		if line, dup := seen[key]; dup {
			p.errorf(k, task, "%s: key %q is repeated (first at line %d): keep one", where, key, line)
			continue
		}
		seen[key] = k.Line
		if !contains(known, key) {
			p.errorf(k, task, "%s: unknown key %q%s; known keys: %s", where, key, didYouMean(key, known), strings.Join(known, ", "))
			continue
		}
		fn(key, k, v)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *parser) str(n *yaml.Node, task, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errorf(n, task, "%s must be a string, not a %s", field, kindName(n))
		return "", false
	}
	return n.Value, true
}

// name reads a pipeline, task or group name. It returns the string and
// false when it is not a valid name (the string is "" when it is not one),
// so that the rest of a file can still be checked under it.
func (p *parser) name(n *yaml.Node, task, field string) (string, bool) {
	s, ok := p.str(n, task, field)
	if !ok {
		return "", false
	}
	if !nameRe.MatchString(s) {
		p.errorf(n, task, "%s %q is not a valid name: use letters, digits, _ and -, starting with a letter or _ (no dots)", field, s)
		return s, false
	}
	if l := utf8.RuneCountInString(s); l > axtype.MaxNameLen {
		// Still the name: the rest of the file is checked under it.
		p.errorf(n, task, "%s %q is %d characters long: use at most %d (the store keeps names in columns of %d)",
			field, abbrev(s), l, axtype.MaxNameLen, axtype.MaxNameLen)
	}
	return s, true
}

// abbrev shortens a long value for a message: its first 20 characters and "…".
func abbrev(s string) string {
	if r := []rune(s); len(r) > 20 {
		return string(r[:20]) + "…"
	}
	return s
}

func (p *parser) integer(n *yaml.Node, task, field string) (int, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		p.errorf(n, task, "%s must be a whole number, not a %s", field, kindName(n))
		return 0, false
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 32)
	if err != nil {
		p.errorf(n, task, "%s %s is out of range", field, n.Value)
		return 0, false
	}
	return int(v), true
}

func (p *parser) boolean(n *yaml.Node, task, field string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		p.errorf(n, task, "%s must be true or false, not a %s", field, kindName(n))
		return false, false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		p.errorf(n, task, "%s must be true or false: %v", field, err)
		return false, false
	}
	return b, true
}

// duration reads a Go duration string. A bare number is refused because its
// unit would be a guess.
// atLeastSecond reads a duration field that must be one second or more
// (timeout, wait_timeout, sla): nil, with the error recorded, when it is not
// a duration or is shorter; what names what the field means in that error.
func (p *parser) atLeastSecond(n *yaml.Node, task, field, what string) *time.Duration {
	d, ok := p.duration(n, task, field)
	if !ok {
		return nil
	}
	if d < time.Second {
		p.errorf(n, task, "%s %q is too short: use at least \"1s\"%s", field, n.Value, what)
		return nil
	}
	return &d
}

func (p *parser) duration(n *yaml.Node, task, field string) (time.Duration, bool) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		p.errorf(n, task, "%s %s has no unit: write a duration such as \"%ss\" or \"5m\"", field, n.Value, n.Value)
		return 0, false
	}
	s, ok := p.str(n, task, field)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.errorf(n, task, "%s %q is not a duration: write a number with a unit, such as \"30s\", \"5m\" or \"1h30m\"", field, s)
		return 0, false
	}
	if d < 0 {
		p.errorf(n, task, "%s %q is negative: durations must be zero or more", field, s)
		return 0, false
	}
	return d, true
}

func (p *parser) misfire(n *yaml.Node, task string) (Misfire, bool) {
	s, ok := p.str(n, task, "misfire")
	if !ok {
		return "", false
	}
	switch m := Misfire(s); m {
	case MisfireFireOnce, MisfireSkip, MisfireFireAll:
		return m, true
	}
	p.errorf(n, task, "misfire %q is not a policy: use fire_once, skip or fire_all%s", s, didYouMean(s, []string{"fire_once", "skip", "fire_all"}))
	return "", false
}

func (p *parser) overlap(n *yaml.Node, task string) (Overlap, bool) {
	s, ok := p.str(n, task, "overlap")
	if !ok {
		return "", false
	}
	switch o := Overlap(s); o {
	case OverlapSkip, OverlapWait, OverlapAllow:
		return o, true
	}
	p.errorf(n, task, "overlap %q is not a policy: use skip, wait or allow%s", s, didYouMean(s, []string{"skip", "wait", "allow"}))
	return "", false
}

func (p *parser) location(n *yaml.Node) (*time.Location, string, bool) {
	s, ok := p.str(n, "", "timezone")
	if !ok {
		return nil, "", false
	}
	if s == "" || s == "Local" {
		p.errorf(n, "", "timezone %q is not allowed: name an IANA zone such as Asia/Shanghai or UTC", s)
		return nil, "", false
	}
	loc, err := time.LoadLocation(s)
	if err != nil {
		p.errorf(n, "", "unknown time zone %q: use an IANA name such as Asia/Shanghai, Europe/Berlin or UTC", s)
		return nil, "", false
	}
	return loc, s, true
}

// rawTask is a task (or the defaults) as written, with nil meaning "not set".
type rawTask struct {
	node      *yaml.Node
	name      string // "" when it is not a valid name
	raw       string // the name as written, valid or not
	group     *string
	deps      []Dep
	depsNode  *yaml.Node
	cron      *yaml.Node
	disabled  *yaml.Node
	delay     *time.Duration
	manual    *bool
	priority  *int
	maxRun    *int
	timeout   *time.Duration
	waitLimit *time.Duration
	sla       *time.Duration
	retryN    *int
	retryIv   *time.Duration
	retryBk   *Backoff
	retryF    *float64
	retryMax  *time.Duration
	retryJit  *float64
	retryNode *yaml.Node
	brkWindow *time.Duration
	brkMin    *int
	brkRatio  *float64
	misfire   *Misfire
	overlap   *Overlap
	execs     []execField
	params    map[string]any
	hasParams bool
	env       map[string]EnvVar
	workDir   *yaml.Node
	outputs   []string
}

type execField struct {
	kind ExecutorKind
	key  *yaml.Node
	val  *yaml.Node
}

func ptr[T any](v T) *T { return &v }

func (p *parser) pipeline(root *yaml.Node) *Pipeline {
	pl := &Pipeline{Pos: p.pos(root), File: p.file, byName: map[string]*Task{}}
	var (
		defaults  rawTask
		plEnv     map[string]EnvVar
		tasksNode *yaml.Node
		schedNode *yaml.Node
		nameOK    bool
	)
	p.each(root, "", "pipeline", pipelineKeys, func(key string, k, v *yaml.Node) {
		switch key {
		case "pipeline":
			// A bad name is reported; the file is still checked under it.
			pl.Name, _ = p.name(v, "", "pipeline")
			nameOK = pl.Name != ""
			p.pl = pl.Name
		case "group":
			if g, ok := p.name(v, "", "group"); ok {
				pl.Group = g
			}
		case "timezone":
			if loc, s, ok := p.location(v); ok {
				pl.Location, pl.Timezone = loc, s
			}
		case "schedule":
			schedNode = v
		case "disabled":
			pl.Disabled, _ = p.boolean(v, "", "disabled")
		case "params":
			pl.Params = p.pipelineParams(v)
		case "misfire":
			if m, ok := p.misfire(v, ""); ok {
				pl.Misfire = m
			}
		case "overlap":
			if o, ok := p.overlap(v, ""); ok {
				pl.Overlap = o
			}
		case "env":
			plEnv = p.env(v, "")
		case "defaults":
			if v.Kind != yaml.MappingNode {
				p.errorf(v, "", "defaults must be a mapping of task fields, not a %s", kindName(v))
				return
			}
			defaults = p.task(v, true)
		case "tasks":
			tasksNode = v
		}
	})
	if !hasKey(root, "pipeline") {
		p.errorf(root, "", "missing `pipeline:`: give the pipeline a unique name")
	}
	if pl.Group == "" {
		pl.Group = DefaultGroup
	}
	pl.env = plEnv
	pipelineDefaults(pl, root)
	if schedNode != nil {
		if s, ok := p.str(schedNode, "", "schedule"); ok {
			pl.ScheduleSpec = s
			pl.SchedulePos = p.pos(schedNode)
			if s == ScheduleNone {
				return p.finish(pl, tasksNode, root, &defaults, nameOK)
			}
			sched, err := ParseSchedule(s, pl.Location, p.now)
			if err != nil {
				p.errorf(schedNode, "", "schedule %v", err)
				pl.ScheduleBroken = true
			} else {
				pl.Schedule = sched
			}
		}
	}
	return p.finish(pl, tasksNode, root, &defaults, nameOK)
}

// pipelineDefaults gives pl the zone, misfire and overlap policies its
// file leaves out.
func pipelineDefaults(pl *Pipeline, root *yaml.Node) {
	if pl.Location == nil {
		pl.ZoneDefault = !hasKey(root, "timezone")
		pl.Location, pl.Timezone = time.UTC, DefaultTimezone
		if loc, err := time.LoadLocation(DefaultTimezone); err == nil {
			pl.Location = loc
		}
		if hasKey(root, "timezone") {
			pl.Timezone = "" // invalid zone already reported; keep UTC for the rest of the checks
		}
	}
	if pl.Misfire == "" {
		pl.Misfire = MisfireFireOnce
	}
	if pl.Overlap == "" {
		pl.Overlap = OverlapSkip
	}
}

// finish reads the tasks of pl and returns it, or nil when it has no name.
func (p *parser) finish(pl *Pipeline, tasksNode, root *yaml.Node, defaults *rawTask, nameOK bool) *Pipeline {
	p.tasks(pl, tasksNode, root, defaults)
	if !nameOK {
		return nil
	}
	return pl
}

func hasKey(n *yaml.Node, key string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}

func (p *parser) tasks(pl *Pipeline, n, root *yaml.Node, defaults *rawTask) {
	if n == nil {
		p.errorf(root, "", "missing `tasks:`: list at least one task")
		return
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "", "tasks must be a list (each item starting with `- name:`), not a %s", kindName(n))
		return
	}
	if len(n.Content) == 0 {
		p.errorf(n, "", "tasks is empty: list at least one task")
		return
	}
	raws := make([]rawTask, 0, len(n.Content))
	var rejected []rawTask // a bad or repeated name: checked, not kept
	firstLine := map[string]int{}
	for _, item := range n.Content {
		item = deref(item)
		if item.Kind != yaml.MappingNode {
			p.errorf(item, "", "each task must be a mapping starting with `name:`, not a %s", kindName(item))
			continue
		}
		rt := p.task(item, false)
		if rt.name == "" {
			rt.name = rt.raw
			rejected = append(rejected, rt)
			continue
		}
		if line, dup := firstLine[rt.name]; dup {
			p.errorf(item, rt.name, "duplicate task name (first defined at line %d): task names must be unique in a pipeline", line)
			rejected = append(rejected, rt)
			continue
		}
		firstLine[rt.name] = item.Line
		raws = append(raws, rt)
	}
	names := make([]string, len(raws))
	known := make(map[string]bool, len(raws))
	for i := range raws {
		names[i] = raws[i].name
		known[names[i]] = true
	}
	for i := range raws {
		t := p.resolve(pl, &raws[i], defaults, names, known)
		pl.Tasks = append(pl.Tasks, t)
		pl.byName[t.Name] = t
	}
	p.checkReads(pl)
	p.checkArith(pl)
	// Their fields are checked like the others', so that one run reports
	// every problem of the file.
	for i := range rejected {
		p.resolve(pl, &rejected[i], defaults, names, known)
	}
}

// task reads one task mapping, or the defaults when isDefaults.
func (p *parser) task(n *yaml.Node, isDefaults bool) rawTask {
	rt := rawTask{node: n}
	label := "" // the task name in errors, once known
	if !isDefaults {
		label = p.taskName(n, &rt)
	}
	where := "task"
	if isDefaults {
		where = "defaults"
	}
	p.each(n, label, where, taskKeys, func(key string, k, v *yaml.Node) {
		if why, bad := noDefault[key]; isDefaults && bad {
			p.errorf(k, "", "defaults: %q cannot have a default: %s", key, why)
			return
		}
		switch key {
		case "name":
			// read above
		case "group":
			if g, ok := p.name(v, label, "group"); ok {
				rt.group = &g
			}
		case "depends_on":
			rt.depsNode = v
			rt.deps = p.deps(v, label)
		case "cron":
			rt.cron = v
		case "disabled":
			if _, ok := p.boolean(v, label, "disabled"); ok {
				rt.disabled = v
			}
		case "delay":
			if d, ok := p.duration(v, label, "delay"); ok {
				rt.delay = &d
			}
		case "manual":
			if b, ok := p.boolean(v, label, "manual"); ok {
				rt.manual = &b
			}
		case "priority", "max_running":
			p.taskRank(key, v, label, &rt)
		case "timeout":
			rt.timeout = p.atLeastSecond(v, label, "timeout", "")
		case "wait_timeout":
			rt.waitLimit = p.atLeastSecond(v, label, "wait_timeout", " (it is how long an instance may wait for its upstreams after its logical time)")
		case "sla":
			rt.sla = p.atLeastSecond(v, label, "sla", " (how long after its logical time an instance should have succeeded)")
		case "retry":
			p.retry(v, label, &rt)
		case "breaker":
			p.breaker(v, label, &rt)
		case "misfire":
			if m, ok := p.misfire(v, label); ok {
				rt.misfire = &m
			}
		case "overlap":
			if o, ok := p.overlap(v, label); ok {
				rt.overlap = &o
			}
		case "function", "http", "command":
			rt.execs = append(rt.execs, execField{kind: ExecutorKind(key), key: k, val: v})
		case "params", "env", "outputs", "working_dir":
			p.taskInput(key, v, label, &rt)
		}
	})
	if len(rt.execs) > 1 {
		kinds := make([]string, len(rt.execs))
		for i, e := range rt.execs {
			kinds[i] = fmt.Sprintf("%s at line %d", e.kind, e.key.Line)
		}
		p.errorf(rt.execs[1].key, label, "has %d executors (%s): keep exactly one of function, http, command", len(rt.execs), strings.Join(kinds, ", "))
	}
	return rt
}

// taskRank reads a task's priority and max_running.
func (p *parser) taskRank(key string, v *yaml.Node, label string, rt *rawTask) {
	n, ok := p.integer(v, label, key)
	switch {
	case !ok:
	case key == "priority" && (n < 1 || n > 5):
		p.errorf(v, label, "priority %d is out of range: use 1 (highest) to 5 (lowest)", n)
	case key == "priority":
		rt.priority = &n
	case n < 1 || n > MaxRunningLimit:
		p.errorf(v, label, "max_running %d is out of range: use 1 to %d (leave it out for no cap)", n, MaxRunningLimit)
	default:
		rt.maxRun = &n
	}
}

// taskName reads the name of task mapping n into rt (raw as written, name
// when valid) and returns it for errors ("" when invalid).
func (p *parser) taskName(n *yaml.Node, rt *rawTask) string {
	label := ""
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" {
			s, ok := p.name(deref(n.Content[i+1]), "", "task name")
			if ok {
				rt.name, label = s, s
			}
			rt.raw = s
		}
	}
	if !hasKey(n, "name") {
		p.errorf(n, "", "task without `name:`: every task needs a unique name")
	}
	return label
}

// taskInput reads what a task is given and gives: params, env, outputs,
// working_dir.
func (p *parser) taskInput(key string, v *yaml.Node, label string, rt *rawTask) {
	switch key {
	case "params":
		if v.Kind != yaml.MappingNode {
			p.errorf(v, label, "params must be a mapping of names to values, not a %s", kindName(v))
			return
		}
		var m map[string]any
		if err := v.Decode(&m); err != nil {
			p.errorf(v, label, "params cannot be read: %v", err)
			return
		}
		if _, err := json.Marshal(m); err != nil {
			p.errorf(v, label, "params must be plain values (strings, numbers, lists, mappings with string keys): %v", err)
			return
		}
		if !p.paramSizes(v, label) {
			return
		}
		rt.params, rt.hasParams = m, true
	case "env":
		rt.env = p.env(v, label)
	case "outputs":
		rt.outputs = p.outputs(v, label)
	case "working_dir":
		if s, ok := p.str(v, label, "working_dir"); ok {
			if strings.TrimSpace(s) == "" {
				p.errorf(v, label, "working_dir is empty: leave it out to run in the directory of the pipeline file, or give a directory")
				return
			}
			rt.workDir = v
		}
	}
}

func (p *parser) retry(v *yaml.Node, task string, rt *rawTask) {
	if v.Kind != yaml.MappingNode {
		p.errorf(v, task, "retry must be a mapping such as {count: 3, interval: 30s}, not a %s", kindName(v))
		return
	}
	p.each(v, task, "retry", retryKeys, func(key string, k, v *yaml.Node) {
		switch key {
		case "count":
			if c, ok := p.integer(v, task, "retry count"); ok {
				if c < 0 {
					p.errorf(v, task, "retry count %d is negative: use 0 for no retry", c)
				} else {
					rt.retryN = &c
				}
			}
		case "interval":
			if d, ok := p.duration(v, task, "retry interval"); ok {
				if d < time.Second {
					p.errorf(v, task, "retry interval %q is too short: use at least \"1s\"", v.Value)
				} else {
					rt.retryIv = &d
				}
			}
		default:
			p.retryTuning(key, v, task, rt)
		}
	})
	rt.retryNode = v
}

// retryTuning reads the keys of `retry:` that tune its backoff.
func (p *parser) retryTuning(key string, v *yaml.Node, task string, rt *rawTask) {
	switch key {
	case "backoff":
		b := Backoff(v.Value)
		if v.Kind != yaml.ScalarNode || !slices.Contains([]Backoff{BackoffSeed, BackoffFixed, BackoffExponential}, b) {
			p.errorf(v, task, "retry backoff %q is not a backoff: use seed (the interval twice, then doubling), fixed or exponential", v.Value)
			return
		}
		rt.retryBk = &b
	case "factor":
		if f, ok := p.number(v, task, "retry factor", "2"); ok {
			if f <= 1 || f > 10 {
				p.errorf(v, task, "retry factor %s is out of range: use a number above 1 and at most 10, such as 2", v.Value)
				return
			}
			rt.retryF = &f
		}
	case "max_interval":
		if d, ok := p.duration(v, task, "retry max_interval"); ok {
			if d < time.Second {
				p.errorf(v, task, "retry max_interval %q is too short: use at least \"1s\"", v.Value)
				return
			}
			rt.retryMax = &d
		}
	case "jitter":
		if j, ok := p.number(v, task, "retry jitter", "0.2"); ok {
			if j < 0 || j > 1 {
				p.errorf(v, task, "retry jitter %s is out of range: use a share of the wait from 0 to 1, such as 0.2", v.Value)
				return
			}
			rt.retryJit = &j
		}
	}
}

// number reads a YAML number (an int or a float); example is shown when it is not one.
func (p *parser) number(v *yaml.Node, task, field, example string) (float64, bool) {
	f, err := strconv.ParseFloat(v.Value, 64)
	if v.Kind != yaml.ScalarNode || (v.Tag != "!!float" && v.Tag != "!!int") || err != nil {
		p.errorf(v, task, "%s must be a number such as %s, not %q", field, example, v.Value)
		return 0, false
	}
	return f, true
}

// checkRetry checks the keys of t's retry policy against each other once
// the defaults are applied: node is the `retry:` that set the last of them.
func (p *parser) checkRetry(t *Task, node *yaml.Node) {
	r := t.Retry
	switch {
	case node == nil:
	case r.Factor != 0 && r.Backoff != BackoffExponential:
		p.errorf(node, t.Name, "retry factor %g applies only to backoff: exponential (backoff is %s): remove factor, or set backoff: exponential", r.Factor, cmp.Or(r.Backoff, BackoffSeed))
	case r.MaxInterval != 0 && r.Backoff == BackoffFixed:
		p.errorf(node, t.Name, "retry max_interval has no effect with backoff: fixed (every wait is the interval): remove it")
	case r.MaxInterval != 0 && r.MaxInterval < r.Interval:
		p.errorf(node, t.Name, "retry max_interval %s is shorter than the interval %s: every wait would be max_interval; raise it or lower the interval", r.MaxInterval, r.Interval)
	}
}

// breaker reads `breaker: {window: 5m, min_outcomes: 10, ratio: 0.5}`.
func (p *parser) breaker(v *yaml.Node, task string, rt *rawTask) {
	if v.Kind != yaml.MappingNode {
		p.errorf(v, task, "breaker must be a mapping such as {window: 5m, min_outcomes: 10, ratio: 0.5}, not a %s", kindName(v))
		return
	}
	p.each(v, task, "breaker", breakerKeys, func(key string, k, v *yaml.Node) {
		switch key {
		case "window":
			if d, ok := p.duration(v, task, "breaker window"); ok {
				if d < 10*time.Second {
					p.errorf(v, task, "breaker window %q is too short: use at least \"10s\" (outcomes are counted in 10-second buckets)", v.Value)
				} else {
					rt.brkWindow = &d
				}
			}
		case "min_outcomes":
			if n, ok := p.integer(v, task, "breaker min_outcomes"); ok {
				if n < 1 || n > 10000 {
					p.errorf(v, task, "breaker min_outcomes %d is out of range: use 1 to 10000", n)
				} else {
					rt.brkMin = &n
				}
			}
		case "ratio":
			r, ok := p.number(v, task, "breaker ratio", "0.5")
			switch {
			case !ok:
			case r <= 0 || r >= 1:
				p.errorf(v, task, "breaker ratio %s is out of range: use a failure ratio above 0 and below 1, such as 0.5", v.Value)
			default:
				rt.brkRatio = &r
			}
		}
	})
}

func (p *parser) deps(v *yaml.Node, task string) []Dep {
	if v.Kind != yaml.SequenceNode {
		p.errorf(v, task, "depends_on must be a list such as [sync_orders], not a %s", kindName(v))
		return nil
	}
	var deps []Dep
	seen := map[string]bool{}
	for _, item := range v.Content {
		item = deref(item)
		var d Dep
		var rule *yaml.Node // where match or offset is written
		if item.Kind == yaml.MappingNode {
			if item, rule = p.depMapping(item, task, &d); item == nil {
				continue
			}
		}
		s, ok := p.str(item, task, "depends_on entry")
		if !ok {
			continue
		}
		d.Task, d.Pos = s, p.pos(item)
		if pipe, name, cross := strings.Cut(s, "."); cross {
			d.Pipeline, d.Task = pipe, name
			if !nameRe.MatchString(pipe) || !nameRe.MatchString(name) {
				p.errorf(item, task, "depends_on %q is not a task reference: write `task` or `other_pipeline.task`", s)
				continue
			}
		} else if !nameRe.MatchString(s) {
			p.errorf(item, task, "depends_on %q is not a task reference: write `task` or `other_pipeline.task`", s)
			continue
		} else if rule != nil {
			p.errorf(rule, task, "depends_on %q is in the same pipeline: match and offset apply to a dependency on another pipeline (other_pipeline.task); remove them", s)
			continue
		}
		if seen[s] {
			p.errorf(item, task, "depends_on lists %q twice: keep one", s)
			continue
		}
		seen[s] = true
		deps = append(deps, d)
	}
	return deps
}

// depMapping reads a depends_on entry written as a mapping, {task:
// other_pipeline.task, match: exact, offset: -1d}, into d. It returns the
// task node (nil when the entry is unusable, its errors reported) and the
// key of its match or offset (nil when it has neither).
func (p *parser) depMapping(n *yaml.Node, task string, d *Dep) (name, rule *yaml.Node) {
	bad := false
	p.each(n, task, "depends_on entry", depKeys, func(key string, k, v *yaml.Node) {
		if key != "task" && rule == nil {
			rule = k
		}
		switch key {
		case "task":
			name = v
		case "match":
			s, ok := p.str(v, task, "depends_on match")
			switch {
			case !ok:
				bad = true
			case !contains(Matches, s):
				p.errorf(v, task, "depends_on match %q is not a match rule: use %s", s, strings.Join(Matches, ", "))
				bad = true
			default:
				d.Match = Match(s)
			}
		case "offset":
			s, ok := p.str(v, task, "depends_on offset")
			if !ok {
				bad = true
				return
			}
			o, err := ParseOffset(s)
			if err != nil {
				p.errorf(v, task, "depends_on %v", err)
				bad = true
			}
			d.Offset = o
		}
	})
	if name == nil {
		p.errorf(n, task, "depends_on entry has no task: write {task: other_pipeline.task, match: interval}")
		return nil, nil
	}
	if bad {
		return nil, nil
	}
	return name, rule
}

// resolve applies the defaults and the pipeline's settings to rt and checks
// what needs the whole pipeline: dependencies, executors, cron.
func (p *parser) resolve(pl *Pipeline, rt, def *rawTask, names []string, known map[string]bool) *Task {
	t := &Task{
		Name:        rt.name,
		Pipeline:    pl.Name,
		Group:       pick(rt.group, def.group, pl.Group),
		Delay:       pick(rt.delay, def.delay, 0),
		Manual:      pick(rt.manual, nil, false),
		Priority:    pick(rt.priority, def.priority, DefaultPriority),
		MaxRunning:  pick(rt.maxRun, def.maxRun, 0),
		Timeout:     pick(rt.timeout, def.timeout, DefaultTimeout),
		WaitTimeout: pick(rt.waitLimit, def.waitLimit, 0),
		SLA:         pick(rt.sla, def.sla, 0),
		Retry:       pickRetry(rt, def),
		Breaker: Breaker{
			Window:      pick(rt.brkWindow, def.brkWindow, 0),
			MinOutcomes: pick(rt.brkMin, def.brkMin, 0),
			Ratio:       pick(rt.brkRatio, def.brkRatio, 0),
		},
		Misfire: pick(rt.misfire, def.misfire, pl.Misfire),
		Overlap: pick(rt.overlap, def.overlap, pl.Overlap),
		Pos:     p.pos(rt.node),
	}
	if def.hasParams || rt.hasParams {
		t.Params = make(map[string]any, len(def.params)+len(rt.params))
		for k, v := range def.params {
			t.Params[k] = v
		}
		for k, v := range rt.params {
			t.Params[k] = v
		}
	}
	p.mergeParams(pl, t, rt)
	t.Env = mergeEnv(pl.env, def.env, rt.env)
	t.Outputs = rt.outputs
	p.checkRetry(t, cmp.Or(rt.retryNode, def.retryNode))
	p.resolveDeps(pl, t, rt.deps, names, known)
	p.taskCron(pl, t, rt)
	p.taskDisabled(t, rt)
	execs := rt.execs
	if len(execs) == 0 {
		execs = def.execs
	}
	if len(execs) == 0 {
		p.errorf(rt.node, t.Name, "has no executor: add one of `function:` (a registered Go function), `http:` (an executor URL) or `command:` (an argv list)")
	}
	// Each executor written is checked, also when there are two (an error of
	// its own): the task keeps the first.
	for k, ex := range execs {
		e := p.executor(ex, t.Name)
		if k == 0 {
			t.Executor = e
		}
		p.checkTemplates(t, pl, e, ex)
	}
	p.workingDir(pl, t, rt, def)
	p.checkEnvTemplates(t, pl)
	return t
}

// pickRetry is the retry policy of rt, each field from the defaults when
// rt leaves it out.
func pickRetry(rt, def *rawTask) Retry {
	return Retry{
		Count:       pick(rt.retryN, def.retryN, DefaultRetryCount),
		Interval:    pick(rt.retryIv, def.retryIv, DefaultRetryInterval),
		Backoff:     pick(rt.retryBk, def.retryBk, ""),
		Factor:      pick(rt.retryF, def.retryF, 0),
		MaxInterval: pick(rt.retryMax, def.retryMax, 0),
		Jitter:      pick(rt.retryJit, def.retryJit, 0),
	}
}

// resolveDeps sets t's upstreams from deps, each checked: not itself, its
// own pipeline not named, a task of the pipeline.
func (p *parser) resolveDeps(pl *Pipeline, t *Task, deps []Dep, names []string, known map[string]bool) {
	for _, d := range deps {
		switch {
		case (d.Pipeline == "" || d.Pipeline == pl.Name) && d.Task == t.Name:
			p.errorf(posNode(d.Pos), t.Name, "depends on itself: remove %q from depends_on", d.String())
		case d.Pipeline == pl.Name:
			p.errorf(posNode(d.Pos), t.Name, "depends_on %q names its own pipeline: write %q", d.String(), d.Task)
		case d.Pipeline == "" && !known[d.Task]:
			p.errorf(posNode(d.Pos), t.Name, "depends_on %q: no such task%s", d.Task, didYouMean(d.Task, names))
		default:
			t.DependsOn = append(t.DependsOn, d)
		}
	}
}

// taskCron reads rt's own cron onto t.
func (p *parser) taskCron(pl *Pipeline, t *Task, rt *rawTask) {
	if rt.cron != nil {
		if len(rt.deps) > 0 {
			p.errorf(rt.cron, t.Name, "has both cron and depends_on: a task with upstreams fires when they succeed; remove one of them")
		}
		if s, ok := p.str(rt.cron, t.Name, "cron"); ok {
			sched, err := ParseSchedule(s, pl.Location, p.now)
			switch {
			case err != nil:
				p.errorf(rt.cron, t.Name, "cron %v", err)
				pl.ScheduleBroken = true
			case len(rt.deps) == 0:
				t.Cron, t.Schedule = s, sched
			}
		}
	}
}

// checkTemplates reports each command argument of e (read from f) whose
// template cannot execute: an error now, not at run time.
func (p *parser) checkTemplates(t *Task, pl *Pipeline, e Executor, f execField) {
	for i, tmpl := range e.Templates {
		if tmpl == nil {
			continue
		}
		whys, refs := checkTemplate(tmpl, t, pl, templateSchedule(t, pl))
		for _, why := range whys {
			p.errorf(deref(f.val.Content[i]), t.Name, "command argument %d cannot be expanded: %s; templates may use %s", i, why, TemplateHelp)
		}
		p.noteReads(t, deref(f.val.Content[i]), fmt.Sprintf("command argument %d", i), refs)
	}
}

// templateSchedule is the schedule a task's templates are checked with:
// its own cron's, or else its pipeline's.
func templateSchedule(t *Task, pl *Pipeline) *Schedule {
	if t.Schedule != nil {
		return t.Schedule
	}
	return pl.Schedule
}

// checkEnvTemplates reports each env value of t whose template cannot
// execute.
func (p *parser) checkEnvTemplates(t *Task, pl *Pipeline) {
	for _, v := range t.Env {
		if v.Template == nil {
			continue
		}
		whys, refs := checkTemplate(v.Template, t, pl, templateSchedule(t, pl))
		for _, why := range whys {
			p.errorf(posNode(v.Pos), t.Name, "env %s cannot be expanded: %s; templates may use %s", v.Name, why, TemplateHelp)
		}
		p.noteReads(t, posNode(v.Pos), "env "+v.Name, refs)
	}
}

// workingDir sets t's working_dir from the task or the defaults: a task of
// another kind than command that sets its own is an error (a default
// applies to the command tasks only).
func (p *parser) workingDir(pl *Pipeline, t *Task, rt, def *rawTask) {
	n := rt.workDir
	if n == nil {
		if def.workDir == nil || t.Executor.Kind != ExecCommand {
			return
		}
		n = def.workDir
	} else if t.Executor.Kind != "" && t.Executor.Kind != ExecCommand {
		p.errorf(n, t.Name, "working_dir applies to command tasks, and this one is a %s task: remove it", t.Executor.Kind)
		return
	}
	t.WorkingDir = n.Value
	if !strings.Contains(n.Value, "{{") {
		return
	}
	tmpl, err := newTemplate(t.Name, n.Value)
	if err != nil {
		p.errorf(n, t.Name, "working_dir is not a valid template: %v%s; templates may use %s", err, parseErrorHint(err), TemplateHelp)
		return
	}
	whys, refs := checkTemplate(tmpl, t, pl, templateSchedule(t, pl))
	for _, why := range whys {
		p.errorf(n, t.Name, "working_dir cannot be expanded: %s; templates may use %s", why, TemplateHelp)
	}
	p.noteReads(t, n, "working_dir", refs)
	t.WorkingDirTemplate = tmpl
}

// quoteScript makes the script of a shell command (`sh -c SCRIPT`) quote
// the params and upstream outputs it prints.
func (p *parser) quoteScript(e Executor, n *yaml.Node, task string) {
	i := ScriptArg(e.Command)
	if i < 0 || i >= len(e.Templates) || e.Templates[i] == nil {
		return
	}
	problems, ints := quoteScript(e.Templates[i])
	for _, why := range problems {
		p.errorf(deref(n.Content[i]), task, "command argument %d, a shell script, cannot quote the values it prints: %s", i, why)
	}
	for _, name := range ints {
		p.arith = append(p.arith, arithRef{task: task, node: deref(n.Content[i]), param: name})
	}
}

// arithRef is a param a task's script prints inside $(( … )).
type arithRef struct {
	task  string
	node  *yaml.Node
	param string
}

// checkArith refuses a param printed inside a script's arithmetic unless
// it is an int: any other value, quoted or not, breaks or runs the script.
func (p *parser) checkArith(pl *Pipeline) {
	refs := p.arith
	p.arith = nil
	for _, r := range refs {
		t := pl.byName[r.task]
		if t == nil {
			continue
		}
		isInt := false
		if i := slices.IndexFunc(pl.Params, func(s ParamSpec) bool { return s.Name == r.param }); i >= 0 {
			isInt = pl.Params[i].Type == ParamInt
		} else {
			_, isInt = t.Params[r.param].(int)
		}
		if !isInt {
			p.errorf(r.node, r.task, "command argument, a shell script, prints {{ .Params.%s }} inside $(( … )) arithmetic: declare the param type int (it is then checked and printed as a number), or pass it through env: and use \"$NAME\"", r.param)
		}
	}
}

// posNode makes a node that carries only a position, for errors at a Dep.
func posNode(pos Pos) *yaml.Node { return &yaml.Node{Line: pos.Line, Column: pos.Col} }

func pick[T any](v, def *T, fallback T) T {
	if v != nil {
		return *v
	}
	if def != nil {
		return *def
	}
	return fallback
}

func (p *parser) executor(f execField, task string) Executor {
	e := Executor{Kind: f.kind}
	switch f.kind {
	case ExecFunction:
		s, ok := p.str(f.val, task, "function")
		if !ok {
			return e
		}
		if !functionRe.MatchString(s) {
			p.errorf(f.val, task, "function %q is not a valid function name: use the name it was registered under, such as build_report", s)
			return e
		}
		if p.funcs != nil && !contains(p.funcs, s) {
			p.errorf(f.val, task, "function %q is not registered in this ax binary%s; it registers %s", s, didYouMean(s, p.funcs), strings.Join(p.funcs, ", "))
		}
		e.Function = s
	case ExecHTTP:
		s, ok := p.str(f.val, task, "http")
		if !ok {
			return e
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.errorf(f.val, task, "http %q is not an executor URL: write http://host:port/path", s)
			return e
		}
		if l := utf8.RuneCountInString(s); l > axtype.MaxURLLen {
			p.errorf(f.val, task, "http URL is %d characters long: use at most %d (the store keeps the executor's address in a column of %d)",
				l, axtype.MaxURLLen, axtype.MaxURLLen)
		}
		e.URL = s
	case ExecCommand:
		if f.val.Kind != yaml.SequenceNode {
			p.errorf(f.val, task, "command must be an argv list such as [\"sh\", \"-c\", \"clean --date {{ .LogicalTime }}\"], not a %s", kindName(f.val))
			return e
		}
		if len(f.val.Content) == 0 {
			p.errorf(f.val, task, "command is empty: give the program and its arguments, such as [\"sh\", \"-c\", \"...\"]")
			return e
		}
		// Every argument is checked; Command and Templates stay indexed like
		// the list, with "" and nil for an argument in error (the file is
		// invalid then, and never run).
		for i, a := range f.val.Content {
			a = deref(a)
			s, ok := p.str(a, task, "command argument")
			if ok && i == 0 && strings.TrimSpace(s) == "" {
				p.errorf(a, task, "command has an empty program name: the first item is the program to run")
			}
			e.Command = append(e.Command, s)
			var tmpl *template.Template
			if strings.Contains(s, "{{") {
				var err error
				tmpl, err = newTemplate(task, s)
				if err != nil {
					p.errorf(a, task, "command argument %d is not a valid template: %v%s; templates may use %s", i, err, parseErrorHint(err), TemplateHelp)
					tmpl = nil
				}
			}
			e.Templates = append(e.Templates, tmpl)
		}
		p.quoteScript(e, f.val, task)
	}
	return e
}
