package axtype

import (
	"fmt"
	"unicode/utf8"
)

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

// Limits of the text an operator's request carries (through the API, the
// CLI or a queued request), so that the store holds it once escaped: its
// TEXT columns keep 64 KiB, and an escaped control character takes four
// bytes.
const (
	// MaxReasonLen is the longest reason given with a request (pause,
	// resume, trigger, mark, cancel, rerun, kill, approve).
	MaxReasonLen = 4096
	// MaxActorLen is the longest name of who asks (the store's actor
	// columns).
	MaxActorLen = 128
	// MaxParams is the most params a trigger gives.
	MaxParams = 64
	// MaxParamLen is the longest value of one param, in bytes.
	MaxParamLen = 4096
	// MaxParamsBytes is the largest set of a run's params, as JSON.
	MaxParamsBytes = 32 << 10
)

// CheckLen refuses text s, named field in the message, when it is longer
// than max characters.
func CheckLen(field, s string, max int) error {
	if len(s) <= max { // fewer bytes than max: fewer characters too
		return nil
	}
	if n := utf8.RuneCountInString(s); n > max {
		return fmt.Errorf("%s is %d characters long; give at most %d", field, n, max)
	}
	return nil
}
