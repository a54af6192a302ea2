package cli

import (
	"github.com/ax-sched/ax/defs"
	"github.com/spf13/cobra"
)

func NewSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the pipeline format, for editors",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(defs.JSONSchema())
			return err
		},
	}
}
