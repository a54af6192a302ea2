package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
)

type historyLine struct {
	at                          time.Time
	instance                    int64
	what, actor, reason, ticket string
}

// historyLines merges transitions and actions, oldest first.
func historyLines(hs []axtype.HistoryRow, acts []axtype.Action) []historyLine {
	var lines []historyLine
	for _, r := range hs {
		from := string(r.From)
		if from == "" {
			from = "(created)"
		}
		lines = append(lines, historyLine{r.At, r.InstanceID, from + " → " + string(r.To), r.Actor, r.Reason, r.Ticket})
	}
	for _, a := range acts {
		lines = append(lines, historyLine{a.At, a.InstanceID, "action " + a.Action, a.Actor, strings.TrimSpace(a.Reason + " " + a.Detail), a.Ticket})
	}
	slices.SortStableFunc(lines, func(a, b historyLine) int { return a.at.Compare(b.at) })
	return lines
}

// printHistory prints the newest limit lines, oldest first.
func printHistory(w io.Writer, lines []historyLine, limit int, loc *time.Location) error {
	if len(lines) > limit {
		lines = lines[len(lines)-limit:]
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tINSTANCE\tWHAT\tACTOR\tREASON\tTICKET")
	for _, l := range lines {
		inst := ""
		if l.instance != 0 {
			inst = strconv.FormatInt(l.instance, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", api.StampMS(l.at, loc), inst, l.what, l.actor, l.reason, shortTicket(l.ticket))
	}
	return tw.Flush()
}

func shortTicket(t string) string {
	if len(t) > 12 {
		return t[:12]
	}
	return t
}

// History prints a task's transitions and actions, newest last, from the
// API or, viaStore, from the store at target.
func History(ctx context.Context, w io.Writer, viaStore bool, target string, af APIOptions, task string, limit int) error {
	if _, _, err := SplitTask(task); err != nil && !viaStore {
		return err
	}
	s, done, err := Connect(ctx, af, Target{ViaStore: viaStore, Store: target})
	if err != nil {
		return err
	}
	defer done()
	hs, err := s.History(ctx, task, limit)
	if err != nil {
		return asked(err)
	}
	acts, err := s.Actions(ctx, task, limit)
	if err != nil {
		return asked(err)
	}
	if af.JSON && !viaStore {
		return json.NewEncoder(w).Encode(map[string]any{"history": hs, "actions": acts})
	}
	slices.Reverse(hs) // asked newest first; merged oldest first, in id order within a millisecond
	slices.Reverse(acts)
	p, _, _ := strings.Cut(task, ".")
	loc, err := s.Zones(ctx, af.UTC).Of(p)
	if err != nil {
		return asked(err)
	}
	return printHistory(w, historyLines(hs, acts), limit, loc)
}
