package cli

import (
	"fmt"
	"io"

	"github.com/ax-sched/ax/engine"
)

// WriteDiff prints a diff one line per task or schedule.
func WriteDiff(w io.Writer, d engine.Diff) error {
	if d.Empty() {
		_, err := fmt.Fprintln(w, "no change: the running server has these pipelines")
		return err
	}
	for _, l := range []struct {
		mark, what string
		ids        []string
	}{{"+", "added", d.Added}, {"-", "removed", d.Removed}, {"~", "changed", d.Changed}, {"@", "schedule planned again from the reload", d.Replanned}} {
		for _, id := range l.ids {
			fmt.Fprintf(w, "%s %-40s %s\n", l.mark, id, l.what)
		}
	}
	_, err := fmt.Fprintf(w, "%d added, %d removed, %d changed; %d schedule(s) planned again\n", len(d.Added), len(d.Removed), len(d.Changed), len(d.Replanned))
	return err
}
