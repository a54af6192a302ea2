// Command executor is an example business service that runs ax tasks over
// HTTP with the executor SDK (runner/executor): the orders_daily pipeline's
// sync_orders task points at it (http://127.0.0.1:9090/dispatch).
//
//	go run ./examples/executor -listen 127.0.0.1:9090 -scheduler http://127.0.0.1:8080 -token-file executor.token
//
// It authenticates with ax server's executor credential: AX_EXECUTOR_TOKEN,
// or the file the server keeps it in (-token-file).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
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
		fmt.Fprintln(os.Stderr, "executor:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("executor", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9090", "address to serve dispatches on")
	scheduler := fs.String("scheduler", "", "base URL of ax server to register with (optional); several, comma-separated, for an HA pair")
	task := fs.String("task", "sync_orders", "task name to serve")
	record := fs.String("record", "", "append \"task logical_time ticket\" to this file when the work succeeds (for tests)")
	work := fs.Duration("work", 300*time.Millisecond, "how long the work takes")
	tokenFile := fs.String("token-file", "", "file of ax server's executor credential (its --executor-token-file; by default executor.token beside its SQLite store), used when AX_EXECUTOR_TOKEN is not set")
	state := fs.String("state", "", "directory of this executor's ticket journal, so that a restart forgets no ticket (one per executor; empty: tickets in memory only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var scheds []string
	for _, u := range strings.Split(*scheduler, ",") {
		if u = strings.TrimSpace(u); u != "" {
			scheds = append(scheds, u)
		}
	}
	fn := func(ctx context.Context, a runner.Attempt) error {
		if err := syncOrders(ctx, a, *work); err != nil {
			return err
		}
		if *record == "" {
			return nil
		}
		f, err := os.OpenFile(*record, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(f, "%s %s %s\n", a.Task, a.LogicalTime.UTC().Format(time.RFC3339), a.Ticket)
		return errors.Join(err, f.Sync(), f.Close())
	}
	x, err := executor.New(executor.Config{Address: "http://" + *listen, Schedulers: scheds, Logger: log, StateDir: *state,
		Token: os.Getenv("AX_EXECUTOR_TOKEN"), TokenFile: *tokenFile, Client: &http.Client{Timeout: 10 * time.Second}}, map[string]runner.Func{*task: fn})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	ran := make(chan struct{})
	go func() { _ = x.Run(ctx); close(ran) }()
	log.Info("executor_listening", "addr", *listen, "tasks", x.Tasks(), "state", *state)
	// Behind the door (timeouts, connection caps, JSON, Host and Origin checks).
	err = x.Serve(ctx, ln)
	<-ran
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, x.Close())
}

// syncOrders stands in for copying a day of orders: it uses the ticket as
// its idempotency key, as every task that changes data must.
func syncOrders(ctx context.Context, a runner.Attempt, work time.Duration) error {
	slog.Info("sync_orders", "logical_time", a.LogicalTime.Format(time.RFC3339), "batch", a.Params["batch"], "idempotency_key", a.Ticket)
	select {
	case <-time.After(work):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
