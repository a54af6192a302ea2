package engine

import (
	"time"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/prometheus/client_golang/prometheus"
)

// snapshot is a schedule compiled once per graph: the graph and its tasks
// with their neighbours resolved (buildTasks). The loop
// puts a new one in force on a reload (Engine.setGraph); every component
// reads the one in force through the same holder (inForce), never a copy
// of its own.
type snapshot struct {
	g     *dag.Graph
	tasks map[string]*taskInfo
}

// inForce holds the schedule in force. The Engine owns it and only the loop
// changes it (setGraph); the components hold a pointer to it and read it.
type inForce struct{ *snapshot }

// taskInfo is a task of the graph with its neighbours resolved.
type taskInfo struct {
	def       *defs.Task
	id        string
	up        []*taskInfo // upstreams in the same pipeline
	cross     []*taskInfo // upstreams in other pipelines
	down      []*taskInfo // downstreams in the same pipeline
	crossDown []*taskInfo // downstreams in other pipelines
	// crossDep is the dependency on each of cross (its match rule), own the
	// schedule whose runs hold the task (nil: none), loc its pipeline's
	// zone: what crossWindow reads.
	crossDep []defs.Dep
	own      *defs.Schedule
	loc      *time.Location
	// backlog is when the misfire rule last judged the task's missed fires
	// (at the start, or at a resume): an instance due then or before that
	// it chose to run is a catch-up, which the overlap rule queues, never
	// skips.
	backlog time.Time
	// disabled says why its pipeline is disabled ("" when it is not): an
	// operator's run of it that comes due is not started (a run triggered
	// to fire later, before the pipeline was disabled).
	disabled string
	// removed: no longer in the pipeline files; a stand-in, from the stored
	// definition, for an instance that was running when it was removed.
	removed bool
	// queueWait is its series of ax_task_queue_wait_seconds (queueWaitOf).
	queueWait prometheus.Observer
}

// buildTasks resolves the tasks of g with their neighbours, and its triggers.
func buildTasks(g *dag.Graph) (map[string]*taskInfo, []*trigger) {
	tasks := map[string]*taskInfo{}
	for _, t := range g.Order() {
		tasks[t.ID()] = &taskInfo{def: t, id: t.ID()}
	}
	for _, ti := range tasks {
		for _, u := range g.Upstream(ti.id) {
			up := tasks[u.ID()]
			if u.Pipeline == ti.def.Pipeline {
				ti.up = append(ti.up, up)
				up.down = append(up.down, ti)
			} else {
				ti.cross = append(ti.cross, up)
				ti.crossDep = append(ti.crossDep, depOn(ti.def, u))
				up.crossDown = append(up.crossDown, ti)
			}
		}
		ti.loc = g.Pipeline(ti.def.Pipeline).Location
		ti.disabled = defs.DisabledReason(g.Pipeline(ti.def.Pipeline), nil)
	}
	var trigs []*trigger
	for _, tr := range g.Triggers() {
		for _, n := range tr.Tasks {
			tasks[tr.Pipeline+"."+n].own = tr.Schedule
		}
		if !tr.Disabled { // a disabled schedule never fires
			trigs = append(trigs, newTrigger(tr, g))
		}
	}
	return tasks, trigs
}
