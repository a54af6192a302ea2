package api

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ParamValues are a trigger's (or a backfill's) params as a request body
// gives them: each value a string, or a number or a boolean, taken as
// written (`{"n": 5, "full": true}` is n=5, full=true), so that a typed
// param can be sent typed; the pipeline's `params:` check them as the
// CLI's --param. A list, an object or null is refused, naming the param.
type ParamValues map[string]string

// UnmarshalJSON reads a JSON object of strings, numbers and booleans.
func (p *ParamValues) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("params: give an object of names to values: %v", err)
	}
	if raw == nil {
		*p = nil
		return nil
	}
	out := make(ParamValues, len(raw))
	for k, v := range raw {
		var s string
		if t := bytes.TrimSpace(v); string(t) != "null" && json.Unmarshal(t, &s) == nil {
			out[k] = s
			continue
		}
		switch t := bytes.TrimSpace(v); {
		case string(t) == "true", string(t) == "false":
			out[k] = string(t)
		case len(t) > 0 && (t[0] == '-' || t[0] >= '0' && t[0] <= '9'):
			out[k] = string(t)
		default:
			return fmt.Errorf("params: the value of %q is not a string, a number or a boolean: give it as one (a list or an object as a JSON string)", k)
		}
	}
	*p = out
	return nil
}
