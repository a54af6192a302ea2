package api

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
)

// click is chromedp.Click made safe against the console's redraw. A
// mouse click goes to a point of the page, found a few round trips before
// it is sent: a button found just before a redraw may be gone ("Could not
// find node with given id", seen in CI), or the click may reach what is at
// that point then. So the page records whether a click reached an element
// sel matches; a click that reached none is sent again, one that did never
// twice. It works on a page that stays loaded (the console changes its
// address by the fragment alone).
func click(sel chromedp.CSS) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(string(sel))
	arm := chromedp.Evaluate[bool](`(() => { const sel = ` + string(q) + `;
  window.axClick = {sel, landed: false};
  if (!window.axClickWatch) {
    window.axClickWatch = true;
    document.addEventListener("click", e => { const c = window.axClick; if (c && e.target instanceof Element && e.target.closest(c.sel)) c.landed = true; }, true);
  }
  return true; })()`)
	landed := chromedp.Evaluate[bool](`window.axClick.landed`)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		var err error
		for range 5 {
			if _, err = arm(ctx, t); err != nil {
				return chromedp.Void{}, err
			}
			if _, err = chromedp.Click(sel)(ctx, t); err != nil {
				if strings.Contains(err.Error(), "Could not find node with given id") {
					continue
				}
				return chromedp.Void{}, err
			}
			ok, err := landed(ctx, t)
			if err != nil || ok {
				return chromedp.Void{}, err
			}
			err = fmt.Errorf("the click at %s reached no element it matches", sel)
		}
		return chromedp.Void{}, err
	}
}

// clickAcrossRedraw presses the mouse on the element sel matches, has the
// console draw the page again (its 3-second redraw, made to happen now)
// and releases the mouse at the same point: a click that spans a redraw, as
// a click does now and then, and often on a loaded machine, where the few
// round trips of a chromedp click take long.
func clickAcrossRedraw(sel chromedp.CSS) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(string(sel))
	center := chromedp.Evaluate[[]float64](`(() => { const el = document.querySelector(` + string(q) + `);
  if (!el) throw new Error("no element matches " + ` + string(q) + `);
  el.scrollIntoView({block: "center"});
  const r = el.getBoundingClientRect();
  return [r.x + r.width / 2, r.y + r.height / 2]; })()`)
	redraw := chromedp.Evaluate[bool](`render().then(() => true)`, chromedp.EvalAwaitPromise)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		at, err := center(ctx, t)
		if err != nil {
			return chromedp.Void{}, err
		}
		for _, step := range []chromedp.Action[chromedp.Void]{
			chromedp.MouseEvent(chromedp.MousePressed, at[0], at[1], chromedp.ButtonLeft, chromedp.ClickCount(1)),
			func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
				_, err := redraw(ctx, t)
				return chromedp.Void{}, err
			},
			chromedp.MouseEvent(chromedp.MouseReleased, at[0], at[1], chromedp.ButtonLeft, chromedp.ClickCount(1)),
		} {
			if _, err := step(ctx, t); err != nil {
				return chromedp.Void{}, err
			}
		}
		return chromedp.Void{}, nil
	}
}

// chromium finds Debian's chromium (.ci/run installs it). Outside CI a
// machine without it skips the browser test; in CI that is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on this machine: .ci/run installs Debian's chromium package for the console test")
	}
	t.Skip("no chromium: install Debian's chromium package to run the console test")
	return ""
}

// textNow reads the visible text of the first element sel matches, in one
// turn of the page's script. chromedp.Text finds the node in one call and
// reads it in another: when the console's 3-second redraw replaces the
// page between the two, it reads a detached node, which shows no text, and
// returns "" (CI once saw a next fire of "" that way). In one turn the
// element read is the one in the page.
func textNow(sel chromedp.CSS) chromedp.Action[string] {
	q, _ := json.Marshal(string(sel))
	return chromedp.Evaluate[string](`(() => { const el = document.querySelector(` + string(q) + `);
  if (!el) throw new Error("no element matches " + ` + string(q) + `);
  return el.innerText; })()`)
}

// browser starts headless chromium and records every script error and
// console error the page shows; it accepts confirmation dialogs.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.WindowSize(1300, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	var (
		mu     sync.Mutex
		errors []string
	)
	record := func(msg string) { mu.Lock(); errors = append(errors, msg); mu.Unlock() }
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	console := chromedp.Events(ctx, runtime.ConsoleAPICalled)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			record("exception: " + (&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error())
		}
	}()
	go func() {
		for ev, err := range console {
			if err != nil {
				return
			}
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value))
				}
				record("console.error: " + strings.Join(parts, " "))
			}
		}
	}()
	go func() { // the console confirms every operation: accept
		for _, err := range dialogs {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return ctx, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), errors...) }
}

// TestConsolePauseInBrowser loads the console of a test server in headless
// Chromium, clicks Pause on a task, sees its state turn PAUSED (and the
// pause recorded in the store), and saves a screenshot. Any script error on
// the page fails the test.
func TestConsolePauseInBrowser(t *testing.T) {
	t.Parallel()
	ctx, scriptErrors := browser(t)
	e := setupAPI(t, apitest.Opts{})
	// A run first, so that the graph has colours.
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/sync/trigger", `{"downstream": true}`); code != 200 {
		t.Fatalf("trigger: %d %s", code, body)
	}
	e.WaitState("shop.clean", axtype.Success)

	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	err := chromedp.Do(ctx,
		chromedp.Navigate(e.Srv.URL+"/#/p/shop"),
		chromedp.WaitVisible(css(`tr[data-task="sync"] button[data-op="pause"]`)),
	)
	var graphState chromedp.AttributeResult
	if err == nil {
		graphState, err = chromedp.Run(ctx, chromedp.AttributeValue(css(`g.node[data-task="clean"]`), "data-state"))
	}
	if err == nil {
		err = chromedp.Do(ctx,
			click(css(`tr[data-task="sync"] button[data-op="pause"]`)),
			chromedp.WaitVisible(css(`tr[data-task="sync"] td.state .pill.PAUSED`)),
			chromedp.WaitVisible(css(`#banner.ok`)),
		)
	}
	var state string
	if err == nil {
		state, err = chromedp.Run(ctx, textNow(css(`tr[data-task="sync"] td.state`)))
	}
	var shot []byte
	if err == nil {
		shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	}
	if err != nil {
		t.Fatalf("browser: %v (script errors: %v)", err, scriptErrors())
	}
	if !strings.Contains(state, "PAUSED") || !strings.Contains(state, "operator:api") {
		t.Errorf("sync's state cell after the click: %q, want PAUSED by operator:api", state)
	}
	if graphState.Value != "SUCCESS" {
		t.Errorf("graph node clean has state %q, want SUCCESS (coloured by the latest run)", graphState.Value)
	}
	ps, err := e.St.Pauses(context.Background())
	if err != nil || len(ps) != 1 || ps[0].Name != "shop.sync" {
		t.Errorf("pauses in the store after the click: %+v %v", ps, err)
	}
	path := filepath.Join(t.ArtifactDir(), "console-paused.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(shot))

	// The other pages render without script errors too.
	for _, page := range []struct{ hash, sel string }{
		{"#/", `tr[data-pipeline="shop"]`}, {"#/actions", "#actions"}, {"#/executors", "#executors"}, {"#/backfills", "#backfills"},
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/"+page.hash), chromedp.WaitVisible(css(page.sel))); err != nil {
			t.Errorf("%s: %v", page.hash, err)
		}
	}
	if errs := scriptErrors(); len(errs) > 0 {
		t.Errorf("the page showed script errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestConsoleApproveAndCancelInBrowser: a gate waiting for an operator shows
// as "awaiting approval" with an Approve button, which releases it; a run
// that is not over has a Cancel button, which ends it.
func TestConsoleApproveAndCancelInBrowser(t *testing.T) {
	t.Parallel()
	ctx, scriptErrors := browser(t)
	e := setupAPI(t, apitest.Opts{Pipeline: `pipeline: shop
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: sync, function: noop}
  - {name: approve, depends_on: [sync], manual: true, function: noop}
  - {name: slow, command: ["sleep", "30"], timeout: 1m}
`})
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/trigger", `{}`); code != 200 {
		t.Fatalf("trigger: %d %s", code, body)
	}
	e.WaitState("shop.sync", axtype.Success)
	e.WaitState("shop.slow", axtype.Running)
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	var label string
	err := chromedp.Do(ctx,
		chromedp.Navigate(e.Srv.URL+"/#/p/shop"),
		chromedp.WaitVisible(css(`tr[data-task="approve"] button[data-op="approve"]`)),
	)
	if err == nil {
		label, err = chromedp.Run(ctx, textNow(css(`tr[data-task="approve"] td.state`)))
	}
	if err == nil {
		err = chromedp.Do(ctx,
			click(css(`tr[data-task="approve"] button[data-op="approve"]`)),
			chromedp.WaitVisible(css(`#banner.ok`)),
		)
	}
	if err != nil {
		t.Fatalf("browser: %v (script errors: %v)", err, scriptErrors())
	}
	if !strings.Contains(label, "awaiting approval") {
		t.Errorf("the gate's state cell: %q", label)
	}
	gate := e.WaitState("shop.approve", axtype.Success)
	if gate.ApprovedBy != "operator:api" {
		t.Errorf("approved by %q", gate.ApprovedBy)
	}
	err = chromedp.Do(ctx,
		chromedp.Navigate(e.Srv.URL+"/#/"),
		chromedp.Navigate(e.Srv.URL+"/#/p/shop"),
		chromedp.WaitVisible(css(`#runs button[data-cancel]`)),
		click(css(`#runs button[data-cancel]`)),
	)
	if err != nil {
		t.Fatalf("browser: %v (script errors: %v)", err, scriptErrors())
	}
	e.WaitState("shop.slow", axtype.Killed)
	// The banner is green already, from the approval: the cancel's answer is its text.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("banner").textContent.includes("cancelled")`)); err != nil {
		banner, _ := chromedp.Run(ctx, textNow(css(`#banner`)))
		t.Fatalf("the banner after the cancel says %q: %v (script errors: %v)", banner, err, scriptErrors())
	}
	if errs := scriptErrors(); len(errs) > 0 {
		t.Errorf("the page showed script errors:\n%s", strings.Join(errs, "\n"))
	}
}
