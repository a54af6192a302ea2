package defs

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"gopkg.in/yaml.v3"
)

// EnvVar is one variable of a task's `env:`: a literal value (which may
// hold templates, rendered at dispatch like a command's arguments) or a
// reference to a secret, resolved at dispatch and never stored.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
	// Secret, when set, names the secret whose value the variable takes;
	// Value is then empty.
	Secret *SecretRef `json:"secret,omitempty"`
	// Template is the parsed Value when it holds template actions; nil for
	// a literal or a secret.
	Template *template.Template `json:"-"`
	Pos      Pos                `json:"-"`
}

// SecretRef names a secret: which provider holds it, and its name there.
// It is written `{secret: NAME}` (the secrets directory) or
// `{secret: PROVIDER:NAME}`, such as `{secret: env:PGPASSWORD}` (the
// server's own environment).
type SecretRef struct {
	Provider string `json:"provider"`
	Name     string `json:"name"`
}

// String renders r as it is written in a file.
func (r SecretRef) String() string { return r.Provider + ":" + r.Name }

// Secret providers, as a reference names them.
const (
	// SecretFile is the directory of files given with --secrets-dir: one
	// file per secret, named after it (the way mounted Kubernetes secrets
	// and systemd credentials look). A reference without a provider names it.
	SecretFile = "file"
	// SecretEnv is the server's own environment.
	SecretEnv = "env"
)

// secretProviders are the providers a reference may name.
var secretProviders = []string{SecretFile, SecretEnv}

// envNameRe is the shape of an environment variable's name.
var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// secretFileRe is the shape of a secret's name in the secrets directory: a
// plain file name, so that a reference never reaches outside the directory.
var secretFileRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// MaxEnvEntry bounds one variable, NAME=VALUE, in bytes: Linux refuses to
// start a program with a longer one (E2BIG).
const MaxEnvEntry = 128<<10 - 1

// ReservedEnvPrefix starts the names of the variables ax sets itself.
const ReservedEnvPrefix = "AX_"

// ParseSecretRef reads a secret reference, `NAME` or `PROVIDER:NAME`.
func ParseSecretRef(s string) (SecretRef, error) {
	prov, name, ok := strings.Cut(s, ":")
	if !ok {
		prov, name = SecretFile, s
	}
	if !slices.Contains(secretProviders, prov) {
		return SecretRef{}, fmt.Errorf("secret %q names the provider %q, which is not one%s: use NAME (a file of --secrets-dir) or env:NAME (the server's environment)",
			s, prov, didYouMean(prov, secretProviders))
	}
	switch {
	case prov == SecretFile && !secretFileRe.MatchString(name):
		return SecretRef{}, fmt.Errorf("secret %q is not a secret's name: use the name of a file of --secrets-dir (letters, digits, _, . and -, not starting with a dot)", s)
	case prov == SecretEnv && !envNameRe.MatchString(name):
		return SecretRef{}, fmt.Errorf("secret %q is not a variable of the server's environment: write env:NAME with NAME of letters, digits and _", s)
	}
	return SecretRef{Provider: prov, Name: name}, nil
}

// Secrets returns every secret the task's env refers to, in the order of
// its variables.
func (t *Task) Secrets() []SecretRef {
	var out []SecretRef
	for _, v := range t.Env {
		if v.Secret != nil {
			out = append(out, *v.Secret)
		}
	}
	return out
}

// env reads an `env:` mapping (of the pipeline, the defaults or a task):
// nil, with its problems reported, for entries that are not usable.
func (p *parser) env(n *yaml.Node, task string) map[string]EnvVar {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, task, "env must be a mapping of variable names to values, such as {REGION: cn-north}, not a %s", kindName(n))
		return nil
	}
	out := map[string]EnvVar{}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, task, "env: names must be plain words, not a %s", kindName(k))
			continue
		}
		name := k.Value
		if line, dup := seen[name]; dup {
			p.errorf(k, task, "env: %q is repeated (first at line %d): keep one", name, line)
			continue
		}
		seen[name] = k.Line
		switch {
		case !envNameRe.MatchString(name):
			p.errorf(k, task, "env: %q is not a valid variable name: use letters, digits and _, not starting with a digit (such as DB_HOST)", name)
			continue
		case strings.HasPrefix(strings.ToUpper(name), ReservedEnvPrefix):
			p.errorf(k, task, "env: %q starts with AX_, which ax keeps for the variables it sets itself (AX_TASK, AX_LOGICAL_TIME, …): choose another name", name)
			continue
		}
		ev := EnvVar{Name: name, Pos: p.pos(v)}
		switch {
		case v.Kind == yaml.MappingNode:
			ref, ok := p.secretRef(v, task, name)
			if !ok {
				continue
			}
			ev.Secret = &ref
		case v.Kind == yaml.ScalarNode && v.Tag != "!!null":
			ev.Value = v.Value
			if strings.ContainsRune(ev.Value, 0) {
				p.errorf(v, task, "env %s holds a NUL byte, which no environment variable can hold: remove it", name)
				continue
			}
			if n := len(name) + 1 + len(ev.Value); n > MaxEnvEntry {
				p.errorf(v, task, "env %s is %d bytes long with its name: a variable may hold at most %d (the kernel's limit); pass large data in a file", name, n, MaxEnvEntry)
				continue
			}
			if strings.Contains(ev.Value, "{{") {
				tmpl, err := newTemplate(name, ev.Value)
				if err != nil {
					p.errorf(v, task, "env %s is not a valid template: %v%s; templates may use %s", name, err, parseErrorHint(err), TemplateHelp)
					continue
				}
				ev.Template = tmpl
			}
		case v.Kind == yaml.ScalarNode:
			p.errorf(v, task, "env %s has no value: give a string (\"\" for an empty one) or {secret: NAME}", name)
			continue
		default:
			p.errorf(v, task, "env %s must be a string or {secret: NAME}, not a %s", name, kindName(v))
			continue
		}
		out[name] = ev
	}
	return out
}

// secretRef reads `{secret: NAME}`, the value of env variable name.
func (p *parser) secretRef(n *yaml.Node, task, name string) (SecretRef, bool) {
	var (
		ref SecretRef
		ok  bool
		at  *yaml.Node
	)
	where := "env " + name
	p.each(n, task, where, []string{"secret"}, func(_ string, _, v *yaml.Node) {
		at = v
		s, good := p.str(v, task, where+" secret")
		if !good {
			return
		}
		r, err := ParseSecretRef(s)
		if err != nil {
			p.errorf(v, task, "%s: %v", where, err)
			return
		}
		ref, ok = r, true
	})
	if at == nil && len(n.Content) == 0 {
		p.errorf(n, task, "%s is an empty mapping: write {secret: NAME} to take a secret, or a string", where)
	}
	return ref, ok
}

// mergeEnv is the variables of each level, later levels winning name by
// name, sorted by name.
func mergeEnv(levels ...map[string]EnvVar) []EnvVar {
	all := map[string]EnvVar{}
	for _, l := range levels {
		for k, v := range l {
			all[k] = v
		}
	}
	if len(all) == 0 {
		return nil
	}
	out := make([]EnvVar, 0, len(all))
	for _, v := range all {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b EnvVar) int { return strings.Compare(a.Name, b.Name) })
	return out
}
