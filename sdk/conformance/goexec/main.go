// Command goexec is the Go side of the SDK conformance suite (cmd/ax's
// TestSDKConformance): an executor built on runner/executor that serves the
// tasks of -tasks, each of which records its start and end in -record,
// logs a line (and the variable of env that params.echo_env names), and
// waits params.sleep_ms unless killed; params.fail makes it fail with that
// text; params.outputs are given as its outputs. sdk/conformance/pyexec.py is the same executor on the
// Python SDK, with the same flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/runner/executor"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "goexec:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("goexec", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9090", "address to serve on")
	scheduler := fs.String("scheduler", "", "base URLs of ax servers, comma-separated (empty: no registration)")
	tasks := fs.String("tasks", "a,b,c", "task names to serve, comma-separated")
	record := fs.String("record", "", "file to append \"start|end TASK TICKET\" lines to")
	tokenFile := fs.String("token-file", "", "file of ax server's executor credential (when AX_EXECUTOR_TOKEN is not set)")
	state := fs.String("state", "", "directory of the ticket journal")
	core := fs.Int("core", 2, "core workers")
	maxw := fs.Int("max", 4, "most workers")
	queue := fs.Int("queue", 10, "queue length")
	heartbeat := fs.Duration("heartbeat", 500*time.Millisecond, "heartbeat interval")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var scheds []string
	for _, u := range strings.Split(*scheduler, ",") {
		if u = strings.TrimSpace(u); u != "" {
			scheds = append(scheds, u)
		}
	}
	funcs := map[string]runner.Func{}
	for _, name := range strings.Split(*tasks, ",") {
		funcs[name] = func(ctx context.Context, a runner.Attempt) error { return work(ctx, a, *record) }
	}
	x, err := executor.New(executor.Config{Address: "http://" + *listen, Schedulers: scheds, StateDir: *state,
		Core: *core, Max: *maxw, Queue: *queue, Heartbeat: *heartbeat, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Token: os.Getenv("AX_EXECUTOR_TOKEN"), TokenFile: *tokenFile, Client: &http.Client{Timeout: 5 * time.Second}}, funcs)
	if err != nil {
		return err
	}
	defer x.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- x.Serve(ctx, ln) }()
	err = x.Run(ctx)
	return errors.Join(err, <-errc)
}

// work is every task: recorded, logged, asleep for params.sleep_ms.
func work(ctx context.Context, a runner.Attempt, record string) error {
	if err := note(record, "start", a); err != nil {
		return err
	}
	runner.Logger(ctx).Info("working", "ticket", a.Ticket)
	if name, _ := a.Params["echo_env"].(string); name != "" {
		runner.Logger(ctx).Info("env", name, a.Env[name])
	}
	ms, _ := a.Params["sleep_ms"].(float64)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(ms) * time.Millisecond):
	}
	if msg, _ := a.Params["fail"].(string); msg != "" {
		return errors.New(msg)
	}
	if err := giveOutputs(a); err != nil {
		return err
	}
	return note(record, "end", a)
}

// giveOutputs gives each output of params.outputs, in key order: a string
// as it is, any other value as its JSON.
func giveOutputs(a runner.Attempt) error {
	outs, _ := a.Params["outputs"].(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(outs)) {
		v, ok := outs[k].(string)
		if !ok {
			b, err := json.Marshal(outs[k])
			if err != nil {
				return err
			}
			v = string(b)
		}
		if err := a.Output(k, v); err != nil {
			return err
		}
	}
	return nil
}

func note(record, what string, a runner.Attempt) error {
	if record == "" {
		return nil
	}
	f, err := os.OpenFile(record, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %s %s\n", what, a.Task, a.Ticket)
	return errors.Join(err, f.Sync(), f.Close())
}
