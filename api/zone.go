package api

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ax-sched/ax/store"
)

// The one rule for the times the CLI prints (as the console does): in the
// pipeline's zone, with its offset (2026-03-02T02:00:00+08:00), or in UTC
// with --utc, whether the command asks the API or reads --store. Times that
// belong to no pipeline (the lease, an executor's heartbeat, a prune
// horizon) are UTC.

// Stamp formats t in loc with its offset.
func Stamp(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(loc).Format(time.RFC3339)
}

// StampMS is stamp to the millisecond, for dispatch and history lines.
func StampMS(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(loc).Format("2006-01-02 15:04:05.000 -07:00")
}

// PipelineZone is the zone a pipeline's times are printed in: UTC when utc
// (--utc) is set, else the zone its file names ("" is UTC).
func PipelineZone(name string, utc bool) (*time.Location, error) {
	if utc || name == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q of the pipeline: %w (print in UTC with --utc)", name, err)
	}
	return loc, nil
}

// Zones finds, once per pipeline, the zone its times are printed in.
type Zones struct {
	utc  bool
	name func(pipeline string) (string, error) // the zone its file names
	seen map[string]*time.Location
}

// Of returns the zone to print pipeline's times in.
func (z *Zones) Of(pipeline string) (*time.Location, error) {
	if z.utc {
		return time.UTC, nil
	}
	if loc, ok := z.seen[pipeline]; ok {
		return loc, nil
	}
	name, err := z.name(pipeline)
	if err != nil {
		return nil, err
	}
	loc, err := PipelineZone(name, false)
	if err != nil {
		return nil, err
	}
	if z.seen == nil {
		z.seen = map[string]*time.Location{}
	}
	z.seen[pipeline] = loc
	return loc, nil
}

// APIZones reads the pipelines' zones from the API behind c. A pipeline
// the running server does not have (removed or renamed by a reload, its
// instances, history and logs kept until retention prunes them) is printed
// in UTC: its times belong to no pipeline in force.
func APIZones(ctx context.Context, c *Client, utc bool) *Zones {
	return &Zones{utc: utc, name: func(pipeline string) (string, error) {
		p, err := c.PipelineSummary(ctx, pipeline)
		if IsNotFound(err) {
			return "", nil
		}
		return p.Timezone, err
	}}
}

// StoreZones reads the pipelines' zones from their definitions as the
// scheduler last synced them into st (removed pipelines included).
func StoreZones(ctx context.Context, st *store.Store, utc bool) *Zones {
	return &Zones{utc: utc, name: func(pipeline string) (string, error) { return StoredZone(ctx, st, pipeline) }}
}

// StoredZone is the zone pipeline's definition names, as the scheduler last
// synced it into st.
func StoredZone(ctx context.Context, st *store.Store, pipeline string) (string, error) {
	raw, err := st.PipelineDefinition(ctx, pipeline)
	if err != nil {
		return "", fmt.Errorf("time zone of pipeline %q: %w", pipeline, err)
	}
	var p struct {
		Timezone string `json:"timezone"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", fmt.Errorf("time zone of pipeline %q: its stored definition: %w", pipeline, err)
	}
	return p.Timezone, nil
}

// ZoneOf returns the zone to print pipeline's times in, read from the API.
func ZoneOf(ctx context.Context, c *Client, pipeline string, utc bool) (*time.Location, error) {
	return APIZones(ctx, c, utc).Of(pipeline)
}
