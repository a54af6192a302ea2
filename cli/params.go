package cli

import (
	"strings"

	"github.com/ax-sched/ax/engine"
)

// ParseParams reads --param KEY=VALUE flags (a later KEY wins) and checks
// them as the engine will (engine.CheckParams): nil when there are none.
func ParseParams(flags []string) (map[string]string, error) {
	var out map[string]string
	for _, p := range flags {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, Usage("--param %q: give KEY=VALUE", p)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	if err := engine.CheckParams(out); err != nil {
		return nil, Usage("--param: %v", err)
	}
	return out, nil
}
