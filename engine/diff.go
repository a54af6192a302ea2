package engine

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/defs"
)

// Change is one field that a reload changes in a task or a schedule, with
// its value before and after, as written for a reader: durations as
// `1m0s`, strings and lists as JSON, "(none)" for a field one side lacks.
type Change struct {
	ID    string `json:"id"`    // the task id, or the schedule's name
	Field string `json:"field"` // its path: `timeout`, `executor.command`, `params.day`, `schedule`
	Old   string `json:"old"`
	New   string `json:"new"`
	// Schedule says that ID names a schedule rather than a task (a task's
	// own cron is both).
	Schedule bool `json:"schedule,omitempty"`
}

// none stands for a field one side of a Change does not have.
const none = "(none)"

// TaskChanges lists the fields of task id that differ between its old and
// new definition, by path.
func TaskChanges(id string, old, cur *defs.Task) []Change {
	a, b := map[string]string{}, map[string]string{}
	flatten("", reflect.ValueOf(old), a)
	flatten("", reflect.ValueOf(cur), b)
	return changes(id, a, b)
}

// ScheduleChanges lists the fields of schedule name that differ between
// old and cur.
func ScheduleChanges(name string, old, cur ScheduleDef) []Change {
	a, b := map[string]string{}, map[string]string{}
	flatten("", reflect.ValueOf(old), a)
	flatten("", reflect.ValueOf(cur), b)
	out := changes(name, a, b)
	for i := range out {
		out[i].Schedule = true
	}
	return out
}

func changes(id string, a, b map[string]string) []Change {
	keys := slices.Sorted(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []Change
	for _, k := range keys {
		o, ok1 := a[k]
		n, ok2 := b[k]
		if ok1 && ok2 && o == n {
			continue
		}
		if !ok1 {
			o = none
		}
		if !ok2 {
			n = none
		}
		out = append(out, Change{ID: id, Field: k, Old: o, New: n})
	}
	return out
}

var durationType = reflect.TypeFor[time.Duration]()

// flatten writes the fields of v that its JSON form has (by their JSON
// names, joined with dots) into out, each value rendered for a reader.
// Lists are one field (of their elements' String when they have one); maps
// and structs are opened; nil pointers and empty lists are left out.
func flatten(path string, v reflect.Value, out map[string]string) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	join := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	switch {
	case v.Type() == durationType:
		out[path] = time.Duration(v.Int()).String()
	case v.Kind() == reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			flatten(join(cmp.Or(name, f.Name)), v.Field(i), out)
		}
	case v.Kind() == reflect.Map:
		keys := v.MapKeys()
		for _, k := range keys {
			flatten(join(fmt.Sprint(k.Interface())), v.MapIndex(k), out)
		}
	case v.Kind() == reflect.Slice:
		if v.Len() == 0 {
			return
		}
		if _, ok := v.Index(0).Interface().(fmt.Stringer); ok {
			parts := make([]string, v.Len())
			for i := range parts {
				parts[i] = v.Index(i).Interface().(fmt.Stringer).String()
			}
			out[path] = "[" + strings.Join(parts, ", ") + "]"
			return
		}
		fallthrough
	default:
		b, err := json.Marshal(v.Interface())
		if err != nil {
			b = []byte(fmt.Sprint(v.Interface()))
		}
		out[path] = string(b)
	}
}
