package api

import (
	"context"
	"embed"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// consoleFiles is the web console: one page that reads the admin API,
// embedded so that the binary needs no front-end build at install time.
//
//go:embed console/index.html
var consoleFiles embed.FS

// consoleHandler serves the console at /. Its data comes from the API, so
// access control stays there.
func consoleHandler() http.Handler {
	page, err := consoleFiles.ReadFile("console/index.html")
	if err != nil {
		panic(err) // embedded at build time: cannot be missing
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
		w.Header().Set("X-Frame-Options", "DENY")
		_, _ = w.Write(page)
	})
}

// executorCollector reports registered executors as live or excluded
// , read from the store at each scrape.
type executorCollector struct{ st *store.Store }

// NewExecutorCollector returns the collector of ax_executors for st.
func NewExecutorCollector(st *store.Store) prometheus.Collector { return &executorCollector{st: st} }

var executorsDesc = prometheus.NewDesc("ax_executors", "Registered executors, by state: live (a heartbeat within 30 s) or excluded.", []string{"state"}, nil)

func (c *executorCollector) Describe(ch chan<- *prometheus.Desc) { ch <- executorsDesc }

func (c *executorCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	exs, err := c.st.Executors(ctx, "")
	if err != nil {
		ch <- prometheus.NewInvalidMetric(executorsDesc, err)
		return
	}
	live := 0
	for _, x := range exs {
		if time.Since(x.LastHeartbeat) <= engine.ExecutorLiveness {
			live++
		}
	}
	ch <- prometheus.MustNewConstMetric(executorsDesc, prometheus.GaugeValue, float64(live), "live")
	ch <- prometheus.MustNewConstMetric(executorsDesc, prometheus.GaugeValue, float64(len(exs)-live), "excluded")
}
