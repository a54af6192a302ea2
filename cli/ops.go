package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/engine"
)

// OpOptions are the flags every operation command takes. By default the
// operation goes to the admin API of a running ax server; with --store it
// is queued in that store for whichever scheduler is primary on it.
type OpOptions struct {
	Store  string
	Reason string
	Wait   time.Duration
	API    APIOptions
	// ViaStore says whether --store was given: queue in the store rather
	// than call the API.
	ViaStore func() bool
}

// Op is an operation as the CLI has it: --at stays as written, for the
// server to read in the pipeline's zone.
type Op struct {
	Req    engine.Request
	AtText string
	Reason string
}

func Actor() string {
	if u := os.Getenv("USER"); u != "" {
		return "operator:" + u
	}
	return "operator"
}

// Submit queues op for the primary scheduler and waits for its outcome. A
// request no scheduler took within the wait is withdrawn, so that it cannot
// surprise anyone later.
func Submit(ctx context.Context, w io.Writer, f OpOptions, op engine.Request) error {
	return SubmitOp(ctx, w, f, Op{Req: op})
}

// SubmitOp is Submit for an operation with a --at.
func SubmitOp(ctx context.Context, w io.Writer, f OpOptions, cop Op) error {
	// Over-long text is refused here, before it is sent or queued.
	if err := engine.CheckRequest(cop.Req, engine.By{Actor: Actor(), Reason: f.Reason}); err != nil {
		return Usage("%s", strings.TrimPrefix(err.Error(), engine.ErrBadOp.Error()+": "))
	}
	s, done, err := Connect(ctx, f.API, Where{ViaStore: f.ViaStore(), Store: f.Store, Wait: f.Wait})
	if err != nil {
		return err
	}
	defer done()
	res, raw, err := s.Apply(ctx, cop.Req, cop.AtText, f.Reason)
	if err != nil || (f.API.JSON && raw != nil) {
		return OrThen(asked(err), func() error { return PrintJSON(w, raw) })
	}
	_, err = fmt.Fprintln(w, res.Result)
	return err
}

// PauseTarget reads `pipeline.task`, `pipeline` or --group NAME.
func PauseTarget(args []string, group string) (axtype.PauseScope, string, error) {
	switch {
	case group != "" && len(args) == 0:
		return axtype.ScopeGroup, group, nil
	case group == "" && len(args) == 1 && strings.Contains(args[0], "."):
		return axtype.ScopeTask, args[0], nil
	case group == "" && len(args) == 1:
		return axtype.ScopePipeline, args[0], nil
	}
	return "", "", Usage("give PIPELINE.TASK, PIPELINE, or --group NAME")
}
