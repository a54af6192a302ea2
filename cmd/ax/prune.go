package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/direct"
)

func newPruneCmd() *cobra.Command {
	var (
		f      cli.APIOptions
		dry    bool
		retain string
		target string
	)
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete finished runs older than the retention period now (--dry-run: show what would go)",
		Long: `ax server prunes by itself (--retain, default 30d, every 10 minutes): runs
whose instances all ended before the horizon go, with their instances,
history, actions and task output; waiting, running and paused work and the
runs of unfinished backfills stay; per-task counts survive.

ax prune runs a pass now on the primary; with --dry-run it only counts what
would go (through the API, or with --store from a store directly).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cli.Prune(cmd.Context(), cmd.OutOrStdout(), viaStore(cmd), target, f, dry, retain)
		},
	}
	cmd.Flags().BoolVar(&dry, "dry-run", false, "count what would be deleted; delete nothing")
	cmd.Flags().StringVar(&retain, "retain", "", "with --dry-run: the period to try (default the server's --retain; with --store 30d)")
	cmd.Flags().StringVar(&target, "store", direct.DefaultPath, "count from this store instead of calling the API (with --dry-run)")
	addAPIFlags(cmd, &f)
	return cmd
}

// parseSize reads a size in bytes: a number, or with KiB, MiB, KB or MB.
func parseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"KB", 1000}, {"MB", 1000 * 1000}, {"K", 1 << 10}, {"M", 1 << 20}, {"B", 1}} {
		if v, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	n, err := strconv.Atoi(t)
	if err != nil || n <= 0 || n > (1<<30)/mult {
		return 0, fmt.Errorf("%q: give a size such as 1MiB, 512KiB or 65536 (bytes)", s)
	}
	return n * mult, nil
}
