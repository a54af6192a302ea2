package api

import (
	"context"
	"strings"
	"testing"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/chromedp/chromedp"
)

// TestConsoleRunFormTypedParamsInBrowser: the run form shows one field per
// typed param (a select for an enum, a checkbox for a bool, a date input,
// a number); a value of the wrong type shows the API's refusal and stores
// nothing. The pipeline is disabled: marked so on the home page, and a run
// of it with good values is refused with the reason.
func TestConsoleRunFormTypedParamsInBrowser(t *testing.T) {
	t.Parallel()
	ctx, scriptErrors := browser(t)
	e := setupAPI(t, apitest.Opts{Pipeline: `pipeline: shop
timezone: UTC
disabled: true
schedule: "0 0 1 1 *"
params:
  region: {type: enum, values: [cn, us], default: cn, description: where}
  full: {type: bool, default: false}
  day: {type: date, default: "2026-03-01"}
  batch: {type: int, default: 10}
tasks:
  - {name: sync, function: noop}
`})
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	err := chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/"), chromedp.WaitVisible(css(`tr[data-pipeline="shop"] .disabled`)))
	var kinds []string
	if err == nil {
		err = chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/forms/shop"), chromedp.WaitVisible(css(`#f-params [name="param:batch"]`)))
	}
	if err == nil {
		kinds, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#f-params [name^="param:"]')].map(el => el.name + "=" + (el.tagName === "SELECT" ? "select" : el.type))`))
	}
	if err != nil {
		t.Fatalf("forms: %v (script errors: %v)", err, scriptErrors())
	}
	if got := strings.Join(kinds, " "); got != "param:region=select param:full=checkbox param:day=date param:batch=number" {
		t.Errorf("the run form's param fields: %s", got)
	}
	err = chromedp.Do(ctx, chromedp.SetValue(css(`#f-params [name="param:batch"]`), "1.5"),
		click(css(`#f-trigger button[type="submit"]`)), chromedp.WaitVisible(css(`#f-trigger .result.error`)))
	var got string
	if err == nil {
		got, err = chromedp.Run(ctx, textNow(css(`#f-trigger .result`)))
	}
	if err != nil {
		t.Fatalf("run with a bad int: %v (script errors: %v)", err, scriptErrors())
	}
	if !strings.Contains(got, `param "batch" is an int: "1.5" is not a whole number`) {
		t.Errorf("run now with batch 1.5 shows %q, want the API's refusal of its type", got)
	}
	if runs, _ := e.St.Runs(context.Background(), "shop", 10); len(runs) != 0 {
		t.Errorf("a refused run form stored %d runs", len(runs))
	}
	err = chromedp.Do(ctx, chromedp.SetValue(css(`#f-params [name="param:batch"]`), "20"),
		chromedp.SetValue(css(`#f-params [name="param:region"]`), "us"),
		click(css(`#f-params [name="param:full"]`)),
		click(css(`#f-trigger button[type="submit"]`)))
	if err == nil {
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#f-trigger .result").textContent.includes("disabled")`))
	}
	if err != nil {
		t.Fatalf("run a disabled pipeline: %v (script errors: %v)", err, scriptErrors())
	}
	if got, _ := chromedp.Run(ctx, textNow(css(`#f-trigger .result`))); !strings.Contains(got, "pipeline shop is disabled (disabled: true in") {
		t.Errorf("run now of a disabled pipeline shows %q", got)
	}
	if errs := scriptErrors(); len(errs) > 0 {
		t.Errorf("the page showed script errors:\n%s", strings.Join(errs, "\n"))
	}
}
