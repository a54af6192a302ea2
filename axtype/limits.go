package axtype

// Limits of what a pipeline file names and the store keeps: each is the
// width of the store's columns that hold it (store/migrate.go declares
// those columns with these constants), and `ax validate` refuses a file
// that exceeds one, so that the server never meets a value its store
// cannot hold. Lengths count characters, as MySQL's VARCHAR does. The
// released schema holds these widths: raising one needs a store migration
// that widens its columns.
const (
	// MaxNameLen is the longest pipeline, task or group name.
	MaxNameLen = 128
	// MaxTaskIDLen is the longest task id, `pipeline.task`.
	MaxTaskIDLen = 2*MaxNameLen + 1
	// MaxFileLen is the longest path of a pipeline file.
	MaxFileLen = 1024
	// MaxURLLen is the longest URL of an http task, which the store keeps
	// as the executor that ran an attempt (or an executor's address).
	MaxURLLen = 255
	// MaxDefinitionBytes is the largest definition of a pipeline or a task
	// as JSON, in bytes (MySQL's MEDIUMTEXT).
	MaxDefinitionBytes = 1<<24 - 1
)
