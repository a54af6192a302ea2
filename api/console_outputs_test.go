package api

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
	"github.com/chromedp/chromedp"
)

// TestConsoleOutputsAndNextRetryInBrowser: the task page shows what the
// last attempt gave its downstream, so does the attempt's log; an instance
// waiting for its retry shows when it tries next, on the task and run pages.
func TestConsoleOutputsAndNextRetryInBrowser(t *testing.T) {
	t.Parallel()
	ctx, scriptErrors := browser(t)
	e := setupAPI(t, apitest.Opts{Pipeline: `pipeline: shop
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: give, command: ["sh", "-c", "echo 'rows=12' > \"$AX_OUTPUT\"; echo 'day_file=a b.csv' >> \"$AX_OUTPUT\""]}
  - {name: flaky, command: ["false"], retry: {count: 2, interval: 1h, backoff: fixed}}
`})
	bg := context.Background()
	for _, task := range []string{"give", "flaky"} {
		if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/"+task+"/trigger", `{"at": "2026-03-01T00:00:00"}`); code != 200 {
			t.Fatalf("trigger %s: %d %s", task, code, body)
		}
	}
	var retrying axtype.Instance
	waitFor(t, func() bool {
		g, _ := e.St.Instances(bg, store.InstanceFilter{TaskID: "shop.give", States: []axtype.State{axtype.Success}})
		f, _ := e.St.Instances(bg, store.InstanceFilter{TaskID: "shop.flaky", States: []axtype.State{axtype.Retrying}})
		if len(f) == 1 {
			retrying = f[0]
		}
		return len(g) == 1 && len(f) == 1
	})
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	read := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, textNow(css(sel)))
		if err != nil {
			t.Fatalf("%s: %v (script errors: %v)", sel, err, scriptErrors())
		}
		return s
	}
	err := chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/t/shop/give"), chromedp.WaitVisible(css(`#lastoutputs`)))
	if err != nil {
		t.Fatalf("task page: %v (script errors: %v)", err, scriptErrors())
	}
	if got := read("#lastoutputs"); got != "day_file=a b.csv rows=12" {
		t.Errorf("the task page shows the outputs %q, want day_file=a b.csv rows=12", got)
	}
	err = chromedp.Do(ctx, click(css(`#taskinstances button[data-log]`)), chromedp.WaitVisible(css(`#logview #outputs`)))
	if err != nil {
		t.Fatalf("the attempt's log: %v (script errors: %v)", err, scriptErrors())
	}
	if got := read("#logview #outputs"); got != "day_file=a b.csv rows=12" {
		t.Errorf("the log shows the outputs %q", got)
	}
	want := "next try " + retrying.NextFireAt.UTC().Format("2006-01-02 15:04:05")
	for _, page := range []string{"/#/t/shop/flaky", "/#/r/" + strconv.FormatInt(retrying.RunID, 10)} {
		err = chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+page), chromedp.WaitVisible(css(`.nextretry`)))
		if err != nil {
			t.Fatalf("%s: %v (script errors: %v)", page, err, scriptErrors())
		}
		if got := read(".nextretry"); !strings.HasPrefix(got, want) {
			t.Errorf("%s shows %q, want %q…", page, got, want)
		}
	}
	if errs := scriptErrors(); len(errs) > 0 {
		t.Errorf("the page showed script errors:\n%s", strings.Join(errs, "\n"))
	}
}
