package main

import (
	"context"
	"fmt"
	"net/url"
	"time"
)

// The one rule for the times the CLI prints (as the console does): in the
// pipeline's zone, with its offset (2026-03-02T02:00:00+08:00), or in UTC
// with --utc. Times that belong to no pipeline (the lease) are UTC.

// stamp formats t in loc with its offset.
func stamp(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(loc).Format(time.RFC3339)
}

// stampMS is stamp to the millisecond, for dispatch and history lines.
func stampMS(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(loc).Format("2006-01-02 15:04:05.000 -07:00")
}

// zoneOf returns the zone to print pipeline's times in: its own, read from
// the API, or UTC when utc is set.
func zoneOf(ctx context.Context, c *apiClient, pipeline string, utc bool) (*time.Location, error) {
	if utc {
		return time.UTC, nil
	}
	var p struct {
		Timezone string `json:"timezone"`
	}
	if err := c.get(ctx, "/api/v1/pipelines/"+url.PathEscape(pipeline), &p); err != nil {
		return nil, err
	}
	return loadZone(p.Timezone)
}

func loadZone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q of the pipeline: %w", name, err)
	}
	return loc, nil
}
