package api

import (
	"net/http"

	"github.com/ax-sched/ax/engine"
)

// reloadStatus serves GET /api/v1/reload.
func (a *admin) reloadStatus(r *http.Request) (any, error) {
	if _, err := parseQuery(r); err != nil {
		return nil, err
	}
	out := ReloadView{Running: engine.Fingerprint(a.graph())}
	if a.reload != nil {
		out.Last = a.reload.Last()
	}
	return out, nil
}
