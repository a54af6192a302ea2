package defs

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ParamType is the type of a pipeline's param: what a trigger may give it.
type ParamType string

// Param types.
const (
	ParamString ParamType = "string"
	ParamInt    ParamType = "int"
	ParamBool   ParamType = "bool"
	ParamDate   ParamType = "date" // a calendar date, 2006-01-02
	ParamEnum   ParamType = "enum" // one of Values
)

// paramTypes are the types a param may have, as written.
var paramTypes = []string{string(ParamString), string(ParamInt), string(ParamBool), string(ParamDate), string(ParamEnum)}

var paramKeys = []string{"type", "default", "description", "values"}

// ParamSpec is one param of a pipeline's `params:`: every task of the
// pipeline gets it (its templates as .Params.NAME, a command as
// AX_PARAM_NAME), with Default unless a trigger or a backfill gives
// another value, which must be of Type.
type ParamSpec struct {
	Name        string    `json:"name"`
	Type        ParamType `json:"type"`
	Default     any       `json:"default"`
	Description string    `json:"description,omitempty"`
	// Values are the values an enum may take.
	Values []string `json:"values,omitempty"`
	Pos    Pos      `json:"-"`
}

// Parse reads s, a value given by a trigger, as a value of the param: an
// error says what is wrong and what to give.
func (ps ParamSpec) Parse(s string) (any, error) {
	switch ps.Type {
	case ParamInt:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("param %q is an int: %q is not a whole number", ps.Name, s)
		}
		return n, nil
	case ParamBool:
		b, err := strconv.ParseBool(s)
		if err != nil || (s != "true" && s != "false") {
			return nil, fmt.Errorf("param %q is a bool: give true or false, not %q", ps.Name, s)
		}
		return b, nil
	case ParamDate:
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return nil, fmt.Errorf("param %q is a date: give YYYY-MM-DD, such as 2026-12-01, not %q", ps.Name, s)
		}
		return s, nil
	case ParamEnum:
		if !slices.Contains(ps.Values, s) {
			return nil, fmt.Errorf("param %q is one of %s: %q is not%s", ps.Name, strings.Join(ps.Values, ", "), s, didYouMean(s, ps.Values))
		}
		return s, nil
	}
	return s, nil
}

// Param returns the pipeline's param called name, or nil.
func (p *Pipeline) Param(name string) *ParamSpec {
	for i := range p.Params {
		if p.Params[i].Name == name {
			return &p.Params[i]
		}
	}
	return nil
}

// CheckGiven refuses params a trigger or a backfill gives for tasks of
// pipeline p: a name no task of them declares (with a suggestion), or a
// value that is not of its param's type.
func CheckGiven(p *Pipeline, tasks []*Task, given map[string]string) error {
	declared := map[string]bool{}
	for _, t := range tasks {
		for k := range t.Params {
			declared[k] = true
		}
	}
	names := slices.Sorted(maps.Keys(declared))
	for _, k := range slices.Sorted(maps.Keys(given)) {
		if !declared[k] {
			if len(names) == 0 {
				return fmt.Errorf("param %q: %s declares no params; declare it under params: in %s", k, p.Name, p.File)
			}
			return fmt.Errorf("param %q: no task run declares it%s; declared: %s", k, didYouMean(k, names), strings.Join(names, ", "))
		}
		if spec := p.Param(k); spec != nil {
			if _, err := spec.Parse(given[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// TypedParams returns params (a task's, with a run's values over them)
// with each value a trigger gave as text turned into its param's type, so
// that `{{ if .Params.full }}` sees the bool false, not the text "false".
func (p *Pipeline) TypedParams(params map[string]any) map[string]any {
	if p == nil || len(p.Params) == 0 {
		return params
	}
	var out map[string]any
	for _, spec := range p.Params {
		s, ok := params[spec.Name].(string)
		if !ok || (spec.Type != ParamInt && spec.Type != ParamBool) {
			continue
		}
		v, err := spec.Parse(s)
		if err != nil {
			continue // checked at the trigger
		}
		if out == nil {
			out = maps.Clone(params)
		}
		out[spec.Name] = v
	}
	if out == nil {
		return params
	}
	return out
}

// pipelineParams reads a pipeline's `params:`, a mapping of names to
// {type, default, description, values}.
func (p *parser) pipelineParams(n *yaml.Node) []ParamSpec {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "", "params must be a mapping of names to {type, default, description}, not a %s", kindName(n))
		return nil
	}
	var out []ParamSpec
	p.paramEnvClashes(n, "")
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		if !nameRe.MatchString(k.Value) {
			p.errorf(k, "", "param name %q: use letters, digits, _ and -, starting with a letter or _", k.Value)
			continue
		}
		if slices.ContainsFunc(out, func(s ParamSpec) bool { return s.Name == k.Value }) {
			p.errorf(k, "", "params: %q is repeated: keep one", k.Value)
			continue
		}
		if spec, ok := p.paramSpec(k.Value, v); ok {
			out = append(out, spec)
		}
	}
	return out
}

// paramSpec reads one param's mapping.
func (p *parser) paramSpec(name string, v *yaml.Node) (ParamSpec, bool) {
	spec := ParamSpec{Name: name, Pos: p.pos(v)}
	where := fmt.Sprintf("param %q", name)
	if v.Kind != yaml.MappingNode {
		p.errorf(v, "", "%s must be a mapping such as {type: string, default: cn, description: \"...\"}, not a %s", where, kindName(v))
		return spec, false
	}
	var def, values *yaml.Node
	ok := true
	p.each(v, "", where, paramKeys, func(key string, _, val *yaml.Node) {
		switch key {
		case "type":
			s, good := p.str(val, "", where+" type")
			switch {
			case !good:
				ok = false
			case !slices.Contains(paramTypes, s):
				p.errorf(val, "", "%s: type %q is not a param type: use %s%s", where, s, strings.Join(paramTypes, ", "), didYouMean(s, paramTypes))
				ok = false
			default:
				spec.Type = ParamType(s)
			}
		case "default":
			def = val
		case "description":
			spec.Description, _ = p.str(val, "", where+" description")
		case "values":
			values = val
		}
	})
	if !hasKey(v, "type") {
		p.errorf(v, "", "%s has no type: give one of %s", where, strings.Join(paramTypes, ", "))
		return spec, false
	}
	if !ok {
		return spec, false
	}
	if !p.enumValues(&spec, values, v, where) {
		return spec, false
	}
	if def == nil {
		p.errorf(v, "", "%s has no default: give one, which scheduled runs and triggers without --param %s=... take", where, name)
		return spec, false
	}
	return spec, p.paramDefault(&spec, def, where)
}

// enumValues reads the values of an enum param; other types take none.
func (p *parser) enumValues(spec *ParamSpec, values, v *yaml.Node, where string) bool {
	if spec.Type != ParamEnum {
		if values != nil {
			p.errorf(values, "", "%s: values apply to an enum param, and this one is a %s: remove them", where, spec.Type)
			return false
		}
		return true
	}
	if values == nil || values.Kind != yaml.SequenceNode || len(values.Content) == 0 {
		p.errorf(v, "", "%s is an enum: list its values, such as values: [cn, us, eu]", where)
		return false
	}
	for _, item := range values.Content {
		s, good := p.str(deref(item), "", where+" value")
		if !good {
			return false
		}
		if slices.Contains(spec.Values, s) {
			p.errorf(item, "", "%s lists the value %q twice: keep one", where, s)
			return false
		}
		spec.Values = append(spec.Values, s)
	}
	return true
}

// paramDefault reads the default of spec, which must be of its type.
func (p *parser) paramDefault(spec *ParamSpec, def *yaml.Node, where string) bool {
	if def.Kind != yaml.ScalarNode || def.Tag == "!!null" {
		p.errorf(def, "", "%s: default must be a %s, not a %s", where, spec.Type, kindName(def))
		return false
	}
	switch {
	case spec.Type == ParamInt && def.Tag != "!!int", spec.Type == ParamBool && def.Tag != "!!bool":
		p.errorf(def, "", "%s: default %q is not of type %s", where, def.Value, spec.Type)
		return false
	case spec.Type == ParamString && def.Tag != "!!str":
		p.errorf(def, "", "%s: default %s is not a string: quote it (\"%s\")", where, def.Value, def.Value)
		return false
	}
	v, err := spec.Parse(def.Value)
	if err != nil {
		p.errorf(def, "", "default: %v", err)
		return false
	}
	spec.Default = v
	return true
}

// mergeParams gives t the pipeline's params, each with its default,
// beside its own; a task param of the same name is an error.
func (p *parser) mergeParams(pl *Pipeline, t *Task, rt *rawTask) {
	for _, spec := range pl.Params {
		if _, own := rt.params[spec.Name]; own {
			p.errorf(rt.node, t.Name, "param %q is declared by the pipeline (line %d) and by the task: remove the task's, or rename it", spec.Name, spec.Pos.Line)
			continue
		}
		if t.Params == nil {
			t.Params = map[string]any{}
		}
		t.Params[spec.Name] = spec.Default
	}
}

// paramSizes reports a task param whose value is longer than a command's
// environment can carry (each scalar param is exported as AX_PARAM_NAME):
// such a task could never start, so it is an error now.
func (p *parser) paramSizes(n *yaml.Node, task string) bool {
	ok := p.paramEnvClashes(n, task)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		if !nameRe.MatchString(k.Value) {
			p.errorf(k, task, "param name %q: use letters, digits, _ and -, starting with a letter or _", k.Value)
			ok = false
		}
		if v.Kind == yaml.ScalarNode && len("AX_PARAM_")+len(k.Value)+1+len(v.Value) > MaxEnvEntry {
			p.errorf(v, task, "param %q is %d bytes: a command's environment takes at most %d per variable (%s); read large values from a file instead",
				k.Value, len(v.Value), MaxEnvEntry, ParamEnvName(k.Value))
			ok = false
		}
	}
	return ok
}

// ParamEnvName is the environment variable that carries param name to a
// command: AX_PARAM_ and the name upper-cased, each '-' made '_'
// (region-id is AX_PARAM_REGION_ID).
func ParamEnvName(name string) string {
	return "AX_PARAM_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// paramEnvClashes reports two params of the mapping n that would share
// one environment variable (r and R, a-b and a_b): the command could see
// only one of them.
func (p *parser) paramEnvClashes(n *yaml.Node, task string) bool {
	ok := true
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		env := ParamEnvName(k.Value)
		if first, dup := seen[env]; dup && first.Value != k.Value {
			p.errorf(k, task, "param %q and param %q (line %d) both reach a command as %s: rename one", k.Value, first.Value, first.Line, env)
			ok = false
			continue
		}
		seen[env] = k
	}
	return ok
}
