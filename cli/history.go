package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/store"
)

type historyLine struct {
	at                          time.Time
	instance                    int64
	what, actor, reason, ticket string
}

func WriteHistory(ctx context.Context, w io.Writer, st *store.Store, task string, limit int, zs *api.Zones) error {
	var (
		hs   []store.HistoryRow
		acts []store.Action
	)
	for after := int64(0); ; {
		h, err := st.History(ctx, store.LogFilter{TaskID: task, AfterID: after, Limit: 1000})
		if err != nil {
			return err
		}
		hs = append(hs, h...)
		if len(h) < 1000 {
			break
		}
		after = h[len(h)-1].ID
	}
	for after := int64(0); ; {
		a, err := st.Actions(ctx, store.LogFilter{TaskID: task, AfterID: after, Limit: 1000})
		if err != nil {
			return err
		}
		acts = append(acts, a...)
		if len(a) < 1000 {
			break
		}
		after = a[len(a)-1].ID
	}
	p, _, _ := strings.Cut(task, ".")
	loc, err := zs.Of(p)
	if err != nil {
		return err
	}
	return printHistory(w, historyLines(hs, acts), limit, loc)
}

// historyLines merges transitions and actions, oldest first.
func historyLines(hs []store.HistoryRow, acts []store.Action) []historyLine {
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
	if !viaStore {
		return HistoryAPI(ctx, w, af, task, limit)
	}
	st, err := store.Open(ctx, target, store.Options{Existing: true})
	if err != nil {
		return Fail(err)
	}
	defer st.Close()
	if err := checkName(ctx, st, store.ScopeTask, task); err != nil {
		return Fail(err)
	}
	return WriteHistory(ctx, w, st, task, limit, api.StoreZones(ctx, st, af.UTC))
}
