package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ax-sched/ax/defs"
)

// EnvSpec is what an attempt's environment is made of: its task's `env:`
// as written, and the schedule that fires the task (for the templates'
// .LogicalTime.Prev and .Next; nil when none does).
type EnvSpec struct {
	Vars     []defs.EnvVar
	Schedule *defs.Schedule
}

// EnvExecutor is an executor that gives each attempt its environment before
// inner runs it: the task's env with its templates rendered and its
// secrets resolved, at dispatch, into Attempt.Env. The secrets' values are
// given to the attempt's Output (see WithOutput) to mask, and masked in the
// error it reports. An env that cannot be made (a missing secret, a
// template that fails) fails the attempt, naming the variable and the
// secret, without running it; the attempt is retried per its policy, so a
// secret added meanwhile is found. (Routed does the same itself, see
// Routed.WithEnv: the engine asks it for capabilities a wrapper would hide.)
type EnvExecutor struct {
	inner Executor
	env   envSource
}

var _ Executor = (*EnvExecutor)(nil)

// NewEnvExecutor returns inner behind the environment of spec, with secrets
// resolved by secrets.
func NewEnvExecutor(inner Executor, spec func(Attempt) (EnvSpec, error), secrets Secrets) *EnvExecutor {
	return &EnvExecutor{inner: inner, env: envSource{spec: spec, secrets: secrets}}
}

// Execute resolves the attempt's env and runs it on the inner executor.
func (w *EnvExecutor) Execute(ctx context.Context, a Attempt) (Result, error) {
	return w.env.run(ctx, a, w.inner.Execute)
}

// envSource makes attempts' environments: the one rule of EnvExecutor and
// Routed.WithEnv.
type envSource struct {
	spec    func(Attempt) (EnvSpec, error)
	secrets Secrets
}

// run gives a its env and runs it with next, masking the env's secrets in
// the attempt's Output and in the error it returns.
func (s envSource) run(ctx context.Context, a Attempt, next func(context.Context, Attempt) (Result, error)) (Result, error) {
	spec, err := s.spec(a)
	if err != nil {
		return Result{}, err
	}
	out := OutputFrom(ctx)
	env, secrets, err := ResolveEnv(ctx, spec, a, s.secrets)
	if out == nil { // masks at least the error text
		out = NewOutput(0)
	}
	out.Mask(secrets...)
	if err != nil {
		return Result{Ticket: a.Ticket, Status: StatusFailed, Error: out.MaskString(err.Error()), Executor: Local()}, nil
	}
	a.Env = env
	for _, v := range spec.Vars {
		if v.Secret != nil {
			a.SecretEnv = append(a.SecretEnv, v.Name)
		}
	}
	res, err := next(ctx, a)
	if err != nil {
		return res, errors.New(out.MaskString(err.Error()))
	}
	res.Error = out.MaskString(res.Error)
	outs, err := maskOutputs(out, res.Outputs)
	res.Outputs = nil
	return withOutputs(res, outs, err), nil
}

// ResolveEnv renders the env of spec for a and resolves its secrets: the
// variables by name, and the values of the secrets among them (to mask).
func ResolveEnv(ctx context.Context, spec EnvSpec, a Attempt, secrets Secrets) (env map[string]string, secretValues []string, err error) {
	if len(spec.Vars) == 0 {
		return nil, nil, nil
	}
	env = make(map[string]string, len(spec.Vars))
	data := templateData(a, spec.Schedule)
	for _, v := range spec.Vars {
		switch {
		case v.Secret != nil:
			val, err := secrets.Resolve(ctx, *v.Secret)
			if err != nil {
				return nil, secretValues, fmt.Errorf("env %s: %w", v.Name, err)
			}
			env[v.Name] = val
			secretValues = append(secretValues, val)
		case v.Template != nil:
			var b strings.Builder
			if err := v.Template.Execute(&b, data); err != nil {
				return nil, secretValues, fmt.Errorf("env %s %q: %v", v.Name, v.Value, upstreamMissing(err))
			}
			env[v.Name] = b.String()
		default:
			env[v.Name] = v.Value
		}
	}
	return env, secretValues, nil
}

// maskOutputs returns outs with the secrets of o masked in every value.
// A key that holds a secret is refused (the error shows it masked): keys
// are stored and shown as they are, so a secret has no place in one.
func maskOutputs(o *Output, outs map[string]string) (map[string]string, error) {
	if len(outs) == 0 {
		return outs, nil
	}
	keys := slices.Sorted(maps.Keys(outs))
	masked := make(map[string]string, len(outs))
	for _, k := range keys {
		if mk := o.MaskString(k); mk != k {
			return nil, fmt.Errorf("outputs: key %q holds the value of a secret: an output's key is stored and shown in clear, so a secret may be a value (masked) but never part of a key", mk)
		}
		masked[k] = o.MaskString(outs[k])
	}
	return masked, nil
}

// upstreamMissing adds to err, a template's failure, which upstream and
// key it read when that output was not given: the upstream succeeded
// without writing it, or was marked success by hand (ax mark), which gives
// no outputs. Any other error is returned as it is.
func upstreamMissing(err error) error {
	msg := err.Error()
	_, ref, ok := strings.Cut(msg, "<.Upstream.")
	if !ok || !strings.Contains(msg, "map has no entry for key") {
		return err
	}
	ref, _, _ = strings.Cut(ref, ">")
	task, key, ok := strings.Cut(ref, ".")
	if !ok {
		return err
	}
	return fmt.Errorf("%w: upstream %s gave no output %q in this run (it succeeded without writing it, or was marked success by hand with ax mark, which gives no outputs): rerun %s, or have it write %s", err, task, key, task, key)
}

// templateData is what the templates of attempt a see (a command's
// arguments and working directory, its env's values).
func templateData(a Attempt, sched *defs.Schedule) defs.TemplateData {
	data := defs.TemplateData{LogicalTime: defs.NewMoment(a.LogicalTime, nil, sched), Params: a.Params, Task: a.Task, Pipeline: a.Pipeline, Ticket: a.Ticket, Upstream: a.Upstream}
	if data.Params == nil {
		data.Params = map[string]any{}
	}
	return data
}

// SecretValues returns the values of the variables of a.Env that hold a
// secret (a.SecretEnv): what to mask.
func (a Attempt) SecretValues() []string {
	out := make([]string, 0, len(a.SecretEnv))
	for _, name := range a.SecretEnv {
		out = append(out, a.Env[name])
	}
	return out
}

// MaskReport returns rep with each of values replaced by *** in its error,
// its plain output, its outputs' values and every line of its log, as an
// attempt's Output masks them (outputs with a key that holds one of values
// are dropped and fail the report, see maskOutputs): for a report whose attempt's Output is not at hand (one posted to
// a server's results inbox), before it is stored.
func MaskReport(rep Report, values ...string) Report {
	o := NewOutput(4 * MaxReportOutput) // never drops: masking shortens, or lengthens a secret of one or two bytes
	o.Mask(values...)
	rep.Error = o.MaskString(rep.Error)
	rep.Output = o.MaskString(rep.Output)
	outs, err := maskOutputs(o, rep.Outputs)
	if err != nil {
		rep.Status, rep.Error, rep.Permanent = StatusFailed, err.Error(), false
	}
	rep.Outputs = outs
	if len(rep.Log) == 0 {
		return rep
	}
	lines, err := DecodeLines(rep.Log)
	if err != nil {
		return rep // refused as malformed where it is read; nothing of it is shown
	}
	for _, ln := range lines {
		w := o.Writer(ln.Stream)
		w.Write(ln.Text)
		if !ln.Cont {
			w.Write([]byte{'\n'})
		}
	}
	data, _, _ := o.Take(true)
	rep.Log = bytes.Clone(data)
	return rep
}
