package api

import (
	"net/http"

	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
)

// MaxDefinitions bounds the tasks one GET /api/v1/reload names with
// `task`: ax diff asks for the definitions of the tasks that changed in
// batches of this size.
const MaxDefinitions = 100

// reloadStatus serves GET /api/v1/reload: the last reload, the
// fingerprints and schedules in force and, for each `task` named, its
// definition in force (a task the server does not have is left out).
func (a *admin) reloadStatus(r *http.Request) (any, error) {
	q, err := parseQuery(r, "task")
	if err != nil {
		return nil, err
	}
	ids := q.v["task"]
	if len(ids) > MaxDefinitions {
		return nil, errf(http.StatusBadRequest, "%d task parameters: ask for at most %d definitions at once", len(ids), MaxDefinitions)
	}
	g := a.graph()
	out := ReloadView{Running: engine.Fingerprint(g), Schedules: engine.Schedules(g)}
	for _, id := range ids {
		if t := g.Task(id); t != nil {
			if out.Definitions == nil {
				out.Definitions = map[string]*defs.Task{}
			}
			out.Definitions[id] = t
		}
	}
	if a.reload != nil {
		out.Last = a.reload.Last()
	}
	if a.auth.usersRefused != nil && a.auth.usersRefused() != nil {
		out.UsersRefused = "the users file changed but was not loaded: the users in force stay; its errors are in the server's log (users_reload_refused)"
	}
	return out, nil
}
