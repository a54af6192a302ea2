package defs

import _ "embed"

//go:embed schema.json
var schemaJSON []byte

// JSONSchema returns a JSON Schema (draft 2020-12) of the pipeline format, for
// editors. It catches what a schema can (unknown keys, types, ranges, two
// executors); `ax validate` checks the rest (cron, dependencies, cycles).
func JSONSchema() []byte { return schemaJSON }
