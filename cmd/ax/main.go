// Command ax is the single binary of the ax scheduler: it validates pipeline
// files, prints their graphs and fire times, and runs the scheduler.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	_ "time/tzdata" // time zones work on machines without a zone database

	"github.com/ax-sched/ax/cli"
	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program, with its environment passed in, so that tests
// can call it like main.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return cli.ExitOK
	}
	var ee *cli.ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintf(stderr, "ax: %v\n", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintf(stderr, "ax: %v\n", err)
	if isUsage(err) {
		fmt.Fprintln(stderr, "Run 'ax --help' for usage.")
		return cli.ExitUsage
	}
	return cli.ExitFailed
}

// usageErrorMarker tags errors that cobra raises for bad flags and arguments.
type usageErrorMarker struct{ error }

func isUsage(err error) bool {
	var u usageErrorMarker
	return errors.As(err, &u)
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "ax",
		Short:         "ax schedules dependency pipelines described in YAML files",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorMarker{err} })
	root.AddCommand(
		cli.NewValidateCmd(),
		cli.NewGraphCmd(),
		cli.NewNextCmd(),
		cli.NewSchemaCmd(),
		newServerCmd(),
		cli.NewStatusCmd(),
		cli.NewTriggerCmd(),
		cli.NewKillCmd(),
		cli.NewRerunCmd(),
		cli.NewMarkCmd(),
		cli.NewCancelCmd(),
		cli.NewHistoryCmd(),
		cli.NewBackfillCmd(),
		cli.NewRunCmd(),
		cli.NewExecutorsCmd(),
		cli.NewLimitsCmd(),
		cli.NewExplainCmd(),
		cli.NewDiffCmd(),
		cli.NewLogsCmd(),
		cli.NewPruneCmd(),
		newUsersCmd(),
	)
	root.AddCommand(cli.NewPauseCmds()...)
	for _, c := range root.Commands() {
		wrapArgs(c)
	}
	return root
}

// wrapArgs turns cobra's argument-count errors into usage errors.
func wrapArgs(c *cobra.Command) {
	if c.Args == nil {
		return
	}
	check := c.Args
	c.Args = func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageErrorMarker{err}
		}
		return nil
	}
}
