package api

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGrafanaDashboardUsesRealMetrics: every metric the dashboard in docs/
// queries is one ax registers (by its Name in the source), so a renamed
// metric cannot leave the dashboard blank unnoticed.
func TestGrafanaDashboardUsesRealMetrics(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	var src strings.Builder
	for _, dir := range []string{"../engine", "."} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				b, _ := os.ReadFile(f)
				src.Write(b)
			}
		}
	}
	names := regexp.MustCompile(`\bax_[a-z_]+`)
	n := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range names.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
				n++
				if !strings.Contains(src.String(), `Name: "`+base+`"`) {
					t.Errorf("panel %q queries %s, which ax does not register", p.Title, base)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("the dashboard queries %d metrics; it should show the per-task ones and the loop's", n)
	}
}
