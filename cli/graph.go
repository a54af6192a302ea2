package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/spf13/cobra"
)

// LoadOne parses and compiles a single pipeline file; references to other
// pipelines are kept as external nodes.
func LoadOne(file string, now time.Time, w io.Writer) (*dag.Graph, *defs.Pipeline, error) {
	p, errs := defs.ParseFile(file, defs.Options{Now: now})
	if p != nil && errs.Err() == nil {
		g, cerrs := dag.Compile([]*defs.Pipeline{p}, dag.Options{Now: now, External: true, DispatchRate: -1})
		errs = append(errs, cerrs...)
		if errs.Err() == nil {
			return g, g.Pipeline(p.Name), nil
		}
	}
	for _, e := range errs.Fatal() {
		fmt.Fprintln(w, e.Error())
	}
	return nil, nil, Failed()
}

func WriteLayers(w io.Writer, g *dag.Graph, p *defs.Pipeline) error {
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline %s (%s", p.Name, p.Timezone)
	if p.ScheduleSpec != "" {
		fmt.Fprintf(&b, ", schedule %q", p.ScheduleSpec)
	}
	b.WriteString(")\n")
	for i, layer := range g.Layers(p.Name) {
		names := make([]string, len(layer))
		for k, t := range layer {
			names[k] = t.Name
			var tags []string
			if t.Cron != "" {
				tags = append(tags, fmt.Sprintf("cron %q", t.Cron))
			}
			if t.Manual {
				tags = append(tags, "manual")
			}
			if t.Delay > 0 {
				tags = append(tags, "delay "+t.Delay.String())
			}
			if len(tags) > 0 {
				names[k] += " (" + strings.Join(tags, ", ") + ")"
			}
		}
		fmt.Fprintf(&b, "layer %d: %s\n", i, strings.Join(names, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func NewGraphCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "graph FILE",
		Short: "Print a pipeline's compiled graph as DOT or as topological layers",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "dot" && format != "layers" {
				return Usage("--format %q: use dot or layers", format)
			}
			g, p, err := LoadOne(args[0], time.Now(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if format == "dot" {
				return g.WriteDOT(out, p.Name)
			}
			return WriteLayers(out, g, p)
		},
	}
	cmd.Flags().StringVar(&format, "format", "dot", "output format: dot or layers")
	return cmd
}
