package main

import (
	"time"

	"github.com/ax-sched/ax/cli"
	"github.com/spf13/cobra"
)

func newGraphCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "graph FILE",
		Short: "Print a pipeline's compiled graph as DOT or as topological layers",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "dot" && format != "layers" {
				return cli.Usage("--format %q: use dot or layers", format)
			}
			g, p, err := cli.LoadOne(args[0], time.Now(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if format == "dot" {
				return g.WriteDOT(out, p.Name)
			}
			return cli.WriteLayers(out, g, p)
		},
	}
	cmd.Flags().StringVar(&format, "format", "dot", "output format: dot or layers")
	return cmd
}
