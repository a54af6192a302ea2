package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// OrThen returns err if it is set, else the result of then.
func OrThen(err error, then func() error) error {
	if err != nil {
		return err
	}
	return then()
}

func running(n int) string {
	if n <= 0 {
		return "unlimited"
	}
	return strconv.Itoa(n)
}

func rate(r float64) string {
	if r <= 0 {
		return "unlimited"
	}
	return strconv.FormatFloat(r, 'g', -1, 64) + " per second"
}

func WriteExplanation(w io.Writer, x engine.Explanation, loc *time.Location) error {
	fmt.Fprintf(w, "%s: %s\n", x.Task, x.Verdict)
	if x.Latest != nil {
		fmt.Fprintf(w, "\nlatest instance %d: %s (run %d, logical time %s, attempt %d)\n", x.Latest.ID, x.Latest.State, x.Latest.RunID,
			api.Stamp(x.Latest.LogicalTime, loc), x.Latest.Attempt)
	}
	fmt.Fprintln(w, "\nchecks:")
	for _, f := range x.Findings {
		mark := "  "
		if f.Blocks {
			mark = "✗ "
		}
		fmt.Fprintf(w, "  %s%-9s %s\n", mark, f.Check, f.Detail)
	}
	fmt.Fprintln(w, "\nlast dispatches (due → dispatched, late):")
	if len(x.LastFires) == 0 {
		fmt.Fprintln(w, "  none yet")
	}
	for _, f := range x.LastFires {
		due := "?"
		if !f.Due.IsZero() {
			due = api.StampMS(f.Due, loc)
		}
		on := ""
		if f.Executor != "" {
			on = " on " + f.Executor
		}
		fmt.Fprintf(w, "  %s → %s  %s  (instance %d%s)\n", due, api.StampMS(f.Dispatched, loc), f.Late.Round(time.Millisecond), f.Instance, on)
	}
	fmt.Fprintln(w, "\nnext fires:")
	if len(x.NextFires) == 0 {
		fmt.Fprintln(w, "  none: no schedule starts it")
	}
	for _, t := range x.NextFires {
		fmt.Fprintf(w, "  %s\n", api.Stamp(t, loc))
	}
	if !x.Live {
		fmt.Fprintln(w, "\n(answered by a standby: the queue, token bucket and breaker are the primary's)")
	}
	return nil
}

// StatusAPI prints what WriteStatus prints, from the API.
func StatusAPI(ctx context.Context, w io.Writer, f APIOptions, only []string, limit int) error {
	c, err := NewAPIClient(f.Server)
	if err != nil {
		return err
	}
	var st api.Status
	raw, err := c.Call(ctx, http.MethodGet, "/api/v1/status", nil)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return err
	}
	var pipelines []api.PipelineItem
	list := "/api/v1/pipelines"
	if len(only) == 1 {
		// One pipeline: its summary says whether it exists (the API
		// answers with a suggestion), and the list is read for it alone.
		if _, err := c.Call(ctx, http.MethodGet, "/api/v1/pipelines/"+url.PathEscape(only[0])+"?summary=true", nil); err != nil {
			return err
		}
		list += "?name=" + url.QueryEscape(only[0])
	}
	if err := c.Get(ctx, list, &pipelines); err != nil {
		return err
	}
	type runs = []api.RunView
	all := map[string]runs{}
	for _, p := range pipelines {
		if len(only) == 1 && p.Name != only[0] {
			continue
		}
		var rs runs
		if err := c.Get(ctx, fmt.Sprintf("/api/v1/pipelines/%s/runs?recent=true&limit=%d", url.PathEscape(p.Name), limit), &rs); err != nil {
			return err
		}
		all[p.Name] = rs
	}
	if f.JSON {
		return json.NewEncoder(w).Encode(map[string]any{"status": json.RawMessage(raw), "runs": all})
	}
	var b strings.Builder
	switch {
	case st.Lease == nil:
		b.WriteString("scheduler: never started on this store\n")
	case st.Lease.Held:
		fmt.Fprintf(&b, "scheduler: %s (epoch %d, lease held until %s); %s answered as %s\n", st.Lease.Holder, st.Lease.Epoch,
			api.Stamp(st.Lease.ExpiresAt, time.UTC), c.Base(), st.Role)
	default:
		fmt.Fprintf(&b, "scheduler: %s (epoch %d, lease released or expired at %s)\n", st.Lease.Holder, st.Lease.Epoch, api.Stamp(st.Lease.ExpiresAt, time.UTC))
	}
	for _, p := range pipelines {
		rs, ok := all[p.Name]
		if !ok {
			continue
		}
		loc, err := api.PipelineZone(p.Timezone, f.UTC)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "\npipeline %s (%d tasks)%s\n", p.Name, p.Tasks, disabledLine(p.Disabled))
		WriteRuns(&b, rs, p.RecentFailure, limit, loc)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// HistoryAPI prints a task's history from the API.
func HistoryAPI(ctx context.Context, w io.Writer, f APIOptions, task string, limit int) error {
	if _, _, err := SplitTask(task); err != nil {
		return err
	}
	c, err := NewAPIClient(f.Server)
	if err != nil {
		return err
	}
	q := fmt.Sprintf("?task=%s&newest=true&limit=%d", url.QueryEscape(task), min(limit, 1000))
	var hs []store.HistoryRow
	if err := c.Get(ctx, "/api/v1/history"+q, &hs); err != nil {
		return err
	}
	var acts []store.Action
	if err := c.Get(ctx, "/api/v1/actions"+q, &acts); err != nil {
		return err
	}
	if f.JSON {
		return json.NewEncoder(w).Encode(map[string]any{"history": hs, "actions": acts})
	}
	slices.Reverse(hs) // asked newest first; merged oldest first, in id order within a millisecond
	slices.Reverse(acts)
	p, _, _ := SplitTask(task)
	loc, err := api.ZoneOf(ctx, c, p, f.UTC)
	if err != nil {
		return err
	}
	return printHistory(w, historyLines(hs, acts), limit, loc)
}

// Executors lists the registered executors: tasks, last heartbeat, and why
// one gets no work.
func Executors(ctx context.Context, w io.Writer, f APIOptions) error {
	c, err := NewAPIClient(f.Server)
	if err != nil {
		return err
	}
	raw, err := c.Call(ctx, http.MethodGet, "/api/v1/executors", nil)
	if err != nil || f.JSON {
		return OrThen(err, func() error { return PrintJSON(w, raw) })
	}
	var exs []api.ExecutorView
	if err := json.Unmarshal(raw, &exs); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ADDRESS\tSTATE\tLAST HEARTBEAT\tTASKS")
	for _, x := range exs {
		state := "live"
		if !x.Live {
			state = "excluded: " + x.Excluded
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", x.Address, state, api.Stamp(x.LastHeartbeat, time.UTC), strings.Join(x.Tasks, ", "))
	}
	if len(exs) == 0 {
		fmt.Fprintln(tw, "(no executor has registered)")
	}
	return tw.Flush()
}

// LimitsChange is what ax limits changes: the flags given (nil: not given).
type LimitsChange struct {
	Global          *float64
	Groups          []string // NAME=RATE
	MaxRunning      *int
	GroupMaxRunning []string // NAME=N
	Reason          string
}

// Limits prints the dispatch limits and concurrency caps in force, or, when
// ch changes any, changes them and prints what the scheduler did.
func Limits(ctx context.Context, w io.Writer, f APIOptions, ch LimitsChange) error {
	c, err := NewAPIClient(f.Server)
	if err != nil {
		return err
	}
	changed := ch.Global != nil || len(ch.Groups) > 0 || ch.MaxRunning != nil || len(ch.GroupMaxRunning) > 0
	if !changed {
		raw, err := c.Call(ctx, http.MethodGet, "/api/v1/limits", nil)
		if err != nil || f.JSON {
			return OrThen(err, func() error { return PrintJSON(w, raw) })
		}
		var l api.LimitsView
		if err := json.Unmarshal(raw, &l); err != nil {
			return err
		}
		fmt.Fprintf(w, "global: %s, at most %s local attempts at once\n", rate(l.Limits.Global), running(l.Limits.MaxRunning))
		names := slices.Sorted(maps.Keys(l.Limits.Groups))
		for g := range l.Limits.GroupMaxRunning {
			if _, ok := l.Limits.Groups[g]; !ok {
				names = append(names, g)
			}
		}
		slices.Sort(names)
		for _, g := range names {
			fmt.Fprintf(w, "group %s: %s, at most %s at once\n", g, rate(l.Limits.Groups[g]), running(l.Limits.GroupMaxRunning[g]))
		}
		fmt.Fprintf(w, "(from the %s)\n", l.Source)
		return nil
	}
	body := map[string]any{"reason": ch.Reason}
	if ch.Global != nil {
		if err := finiteRate("--global", "", *ch.Global); err != nil {
			return err
		}
		body["global"] = *ch.Global
	}
	if ch.MaxRunning != nil {
		body["max_running"] = *ch.MaxRunning
	}
	if len(ch.Groups) > 0 {
		gs := map[string]float64{}
		for _, g := range ch.Groups {
			name, v, ok := strings.Cut(g, "=")
			r, err := strconv.ParseFloat(v, 64)
			if !ok || name == "" || err != nil {
				return Usage("--group %q: write NAME=RATE, such as etl=10", g)
			}
			if err := finiteRate("--group", name+"=", r); err != nil {
				return err
			}
			gs[name] = r
		}
		body["groups"] = gs
	}
	if len(ch.GroupMaxRunning) > 0 {
		gs := map[string]int{}
		for _, g := range ch.GroupMaxRunning {
			name, v, ok := strings.Cut(g, "=")
			n, err := strconv.Atoi(v)
			if !ok || name == "" || err != nil {
				return Usage("--group-max-running %q: write NAME=N, such as etl=10", g)
			}
			gs[name] = n
		}
		body["group_max_running"] = gs
	}
	raw, err := c.Call(ctx, http.MethodPut, "/api/v1/limits", body)
	if err != nil || f.JSON {
		return OrThen(err, func() error { return PrintJSON(w, raw) })
	}
	var res api.Result
	_ = json.Unmarshal(raw, &res)
	_, err = fmt.Fprintln(w, res.Result)
	return err
}

// finiteRate refuses NaN and ±Inf, which JSON cannot carry to the server
// (the server checks the range of every finite rate).
func finiteRate(flag, prefix string, r float64) error {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return Usage("%s %s%v: give a rate per second from 0 (unlimited) to %d", flag, prefix, r, engine.MaxRate)
	}
	return nil
}

// Explain says why a task is not running, or why it ran late, from the
// scheduler's live state.
func Explain(ctx context.Context, w io.Writer, f APIOptions, task string) error {
	p, t, err := SplitTask(task)
	if err != nil {
		return err
	}
	c, err := NewAPIClient(f.Server)
	if err != nil {
		return err
	}
	raw, err := c.Call(ctx, http.MethodGet, "/api/v1/pipelines/"+url.PathEscape(p)+"/tasks/"+url.PathEscape(t)+"/explain"+map[bool]string{true: "?utc=true"}[f.UTC], nil)
	if err != nil || f.JSON {
		return OrThen(err, func() error { return PrintJSON(w, raw) })
	}
	var x engine.Explanation
	if err := json.Unmarshal(raw, &x); err != nil {
		return err
	}
	loc, err := api.ZoneOf(ctx, c, p, f.UTC)
	if err != nil {
		return err
	}
	return WriteExplanation(w, x, loc)
}

// disabledLine is what a status line says of what of a pipeline is
// disabled (api.PipelineItem's Disabled).
func disabledLine(what string) string {
	switch what {
	case "":
		return ""
	case "pipeline":
		return ": disabled, it never fires (disabled: true)"
	}
	return ": the cron of " + what + " is disabled"
}
