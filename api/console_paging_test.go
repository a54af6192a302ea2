package api

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsolePagesBigPipelineInBrowser: the console shows a pipeline of
// 250 tasks and its run a page at a time (200, then 50 by the "next"
// link), with how many tasks there are, and saves a screenshot of each
// first page.
func TestConsolePagesBigPipelineInBrowser(t *testing.T) {
	t.Parallel()
	ctx, scriptErrors := browser(t)
	e := setupBig(t, 250, 0)
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+"`"+sel+"`"+`).length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		name, hash, more, rows, last string
	}{
		{"pipeline", "#/p/big", "#more-tasks", `#tasks tr[data-task]`, `#tasks tr[data-task="t000249"]`},
		{"run", "#/r/1", "#more-instances", `#instances tr[data-instance]`, `#instances tr[data-instance="250"]`},
	} {
		if err := chromedp.Do(wctx, chromedp.Navigate(e.Srv.URL+"/"+c.hash), chromedp.WaitVisible(css(c.more))); err != nil {
			t.Fatalf("%s page: %v (script errors: %v)", c.name, err, scriptErrors())
		}
		if n := count(c.rows); n != PageDefault {
			t.Errorf("%s page: %d rows, want the first %d", c.name, n, PageDefault)
		}
		if c.name == "pipeline" {
			if text, err := chromedp.Run(ctx, textNow(css(`#task-pages`))); err != nil || !strings.Contains(text, "200 of 250 tasks shown") {
				t.Errorf("pipeline page says %q (%v), want 200 of 250 tasks shown", text, err)
			}
		}
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(60))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "console-paged-"+c.name+".png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(wctx, click(css(c.more)), chromedp.WaitVisible(css(c.last))); err != nil {
			t.Fatalf("%s page, next: %v (script errors: %v)", c.name, err, scriptErrors())
		}
		if n := count(c.rows); n != 50 {
			t.Errorf("%s page, next: %d rows, want the last 50", c.name, n)
		}
	}
	if errs := scriptErrors(); len(errs) > 0 {
		t.Errorf("script errors: %v", errs)
	}
}
