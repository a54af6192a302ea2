//go:build teamfunctions

package main

// This file is how a team builds its own ax binary with its Go functions
// (docs/functions.md): the same file, without the build tag and importing
// the team's package, in the main package of ax. Here it builds the example
// team functions into ax: go build -tags teamfunctions -o ax ./cmd/ax

import (
	"github.com/ax-sched/ax/examples/teamfunctions"
	"github.com/ax-sched/ax/taskexec"
)

func init() { taskexec.AddFunctions(teamfunctions.Register) }
