package main

import (
	"github.com/ax-sched/ax/cli"
	"github.com/spf13/cobra"
)

// addAPIFlags adds the flags of the commands that talk to the API.
func addAPIFlags(cmd *cobra.Command, f *cli.APIOptions) {
	cmd.Flags().StringVar(&f.Server, "server", "", "URL of ax server's admin API (default $AX_SERVER, else "+cli.DefaultServer+")")
	cmd.Flags().BoolVar(&f.JSON, "json", false, "print the API's JSON answer")
	cmd.Flags().BoolVar(&f.UTC, "utc", false, "print times in UTC rather than in each pipeline's zone")
}

// viaStore reports whether the command was told to use a store directly.
func viaStore(cmd *cobra.Command) bool {
	f := cmd.Flags().Lookup("store")
	return f != nil && f.Changed
}
