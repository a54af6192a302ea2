package axtype

// PauseScope is what a pause covers: one task, a pipeline's tasks, or a
// group's tasks in every pipeline.
type PauseScope string

// Pause scopes.
const (
	ScopeTask     PauseScope = "task"     // name is `pipeline.task`
	ScopeGroup    PauseScope = "group"    // name is the group
	ScopePipeline PauseScope = "pipeline" // name is the pipeline
)
