package api

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/ax-sched/ax/access"
	"github.com/ax-sched/ax/api/apitest"
)

// TestConsoleSignInInBrowser: a server with users shows a sign-in page
// (name and token, no prompt). A wrong token is refused with the server's
// reason and sets no cookie; a viewer sees the verbs disabled with the
// reason; signing out ends the session; an operator of group etl pauses a
// task of etl and is refused on group sales with the scope missing; an
// expired session sends the console back to the sign-in page saying so.
func TestConsoleSignInInBrowser(t *testing.T) {
	t.Parallel()
	ctx, scriptErrors := browser(t)
	var skew atomic.Int64
	ae := setupUsers(t, apitest.Opts{}, func(c *Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		c.Sessions = access.NewSessions(nil, time.Hour)
	})
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	shot := newShots(t)
	fail := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v (script errors: %v)", what, err, scriptErrors())
		}
	}
	signIn := func(name, token string) error {
		return chromedp.Do(ctx, chromedp.WaitVisible(css(`#signin input[name="name"]`)),
			chromedp.SetValue(css(`#signin input[name="name"]`), name), chromedp.SetValue(css(`#signin input[name="token"]`), token),
			click(css(`#signin button[type="submit"]`)))
	}
	cookies := func() []*network.Cookie {
		t.Helper()
		res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{ae.Srv.URL}})
		fail("cookies", err)
		return res.Cookies
	}
	before := operatorState(t, ae.Env)
	err := chromedp.Do(ctx, chromedp.Navigate(ae.Srv.URL+"/#/"), chromedp.WaitVisible(css(`#signin input[name="token"]`)), chromedp.WaitVisible(css(`#needsignin`)))
	fail("sign-in page", err)
	fail("sign in with a wrong token", signIn("otto", "vera-token"))
	refusal, err := chromedp.Run(ctx, chromedp.Poll[string](`(r => r.classList.contains("error") && r.textContent)(document.querySelector("#signin .result"))`))
	fail("the refusal", err)
	if !strings.Contains(refusal, `The server refused: no user "otto" with this token`) {
		t.Errorf("a wrong token says %q", refusal)
	}
	if cs := cookies(); len(cs) != 0 {
		t.Errorf("a refused sign-in set cookies %+v", cs)
	}
	fail("screenshot", chromedp.Do(ctx, shot.take("signin-refused")))

	// A viewer: the verbs are disabled, saying why; the cookie is HttpOnly and Strict.
	fail("sign in as vera", signIn("vera", "vera-token"))
	err = chromedp.Do(ctx, chromedp.WaitVisible(css(`tr[data-pipeline="shop"]`)), chromedp.WaitNotVisible(css(`#signin`)),
		chromedp.Navigate(ae.Srv.URL+"/#/p/shop"), chromedp.WaitVisible(css(`tr[data-task="sync"] button[data-op="pause"][disabled]`)), shot.take("viewer"))
	fail("vera's console", err)
	who, err := chromedp.Run(ctx, textNow(css(`#whoami`)))
	fail("whoami", err)
	why, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('tr[data-task="sync"] button[data-op="pause"]').title`))
	fail("the reason", err)
	explainOff, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('tr[data-task="sync"] button[data-op="explain"]').disabled`))
	fail("explain", err)
	if who != "vera (viewer)" || why != "needs the operator role: vera is viewer" || explainOff {
		t.Errorf("vera's console: who %q, the pause button's reason %q, Why? disabled %v", who, why, explainOff)
	}
	// The Executors view is an admin's: its link says so, and so does the view, with no error banner.
	navWhy, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(a => a.getAttribute("aria-disabled") + " " + a.title)(document.querySelector('header a[data-nav="executors"]'))`))
	fail("the executors link", err)
	if navWhy != "true needs the admin role: vera is viewer" {
		t.Errorf("vera's Executors link: %q; want it disabled with the reason", navWhy)
	}
	err = chromedp.Do(ctx, chromedp.Navigate(ae.Srv.URL+"/#/executors"), chromedp.WaitVisible(css(`#needsrole`)))
	fail("vera's executors view", err)
	needs, _ := chromedp.Run(ctx, textNow(css(`#needsrole`)))
	shown, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(b => b.style.display === "block" ? b.textContent : "")(document.getElementById("banner"))`))
	if needs != "This view needs the admin role: vera is viewer." || strings.Contains(shown, "executors") {
		t.Errorf("vera's Executors view says %q, the banner %q; want the role needed and no error", needs, shown)
	}
	cs := cookies()
	if len(cs) != 1 || cs[0].Name != access.CookieName || !cs[0].HTTPOnly || cs[0].SameSite != network.CookieSameSiteStrict || cs[0].Expires <= 0 {
		t.Errorf("the session cookie: %+v", cs)
	}
	if kept, err := chromedp.Run(ctx, chromedp.Evaluate[int](`localStorage.length`)); err != nil || kept != 0 {
		t.Errorf("localStorage holds %d keys (%v)", kept, err)
	}

	// Sign out: the session ends, the sign-in page is back.
	err = chromedp.Do(ctx, click(css(`#signinlink[data-signedin="true"]`)), chromedp.WaitVisible(css(`#signin input[name="name"]`)),
		chromedp.WaitVisible(css(`#signinlink[data-signedin="false"]`)))
	fail("sign out", err)
	if cs := cookies(); len(cs) != 0 {
		t.Errorf("cookies after signing out: %+v", cs)
	}

	// An operator of group etl: pauses etl's task, is refused on sales'.
	fail("sign in as ella", signIn("ella", "ella-token"))
	err = chromedp.Do(ctx, chromedp.WaitNotVisible(css(`#signin`)), chromedp.Navigate(ae.Srv.URL+"/#/p/shop"),
		chromedp.WaitVisible(css(`tr[data-task="sync"] button[data-op="pause"]:not([disabled])`)),
		click(css(`tr[data-task="sync"] button[data-op="pause"]`)), chromedp.WaitVisible(css(`tr[data-task="sync"] td.state .pill.PAUSED`)))
	fail("ella pauses shop.sync", err)
	// Out of her scope the buttons are disabled, saying which scope they need.
	err = chromedp.Do(ctx, chromedp.Navigate(ae.Srv.URL+"/#/"), chromedp.WaitVisible(css(`tr[data-pipeline="crm"] button[data-op="pause"][disabled]`)),
		chromedp.Navigate(ae.Srv.URL+"/#/p/crm"), chromedp.WaitVisible(css(`tr[data-task="load"] button[data-op="pause"][disabled]`)))
	fail("ella's buttons on crm", err)
	for sel, want := range map[string]string{
		`tr[data-task="load"] button[data-op="pause"]`:   "needs a scope naming pipeline crm or group sales: ella is operator of group etl",
		`tr[data-task="load"] button[data-op="trigger"]`: "needs a scope naming pipeline crm or group sales: ella is operator of group etl",
	} {
		title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('`+sel+`').title`))
		if err != nil || title != want {
			t.Errorf("%s: title %q (%v); want %q", sel, title, err, want)
		}
	}
	on, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.querySelector('tr[data-task="load"] button[data-op="explain"]').disabled`))
	if err != nil || !on {
		t.Errorf("Why? on crm.load is disabled (%v): reads are never scoped", err)
	}
	// The server still decides: the button forced on is refused with the scope missing.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(b => { b.disabled = false; setTimeout(() => b.click(), 0); return true; })(document.querySelector('tr[data-task="load"] button[data-op="pause"]'))`))
	fail("ella pauses crm.load by the button forced on", err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("banner").textContent.includes("may not pause on pipeline crm")`))
	fail("the refusal in the banner", err)
	fail("screenshot", chromedp.Do(ctx, shot.take("operator-refused")))
	banner, _ := chromedp.Run(ctx, textNow(css(`#banner`)))
	if !strings.Contains(banner, "ella (operator of group etl) may not pause on pipeline crm, group sales: that needs a scope naming pipeline crm or group sales") {
		t.Errorf("the refusal says %q", banner)
	}
	ps, err := ae.St.Pauses(t.Context())
	if err != nil || len(ps) != 1 || ps[0].Name != "shop.sync" || ps[0].Actor != "ella" {
		t.Errorf("pauses: %+v %v; want shop.sync by ella alone", ps, err)
	}

	// The session expires: the next redraw sends the console to the sign-in page, saying why.
	skew.Store(int64(2 * time.Hour))
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`render().then(() => true)`, chromedp.EvalAwaitPromise))
	fail("redraw", err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`!document.getElementById("signin").hidden`))
	fail("expiry", err)
	fail("screenshot", chromedp.Do(ctx, shot.take("expired")))
	note, err := chromedp.Run(ctx, textNow(css(`#signin .note`)))
	fail("the note", err)
	if !strings.Contains(note, "the session of ella expired at") {
		t.Errorf("after expiry the sign-in page says %q", note)
	}
	if after := operatorState(t, ae.Env); !strings.Contains(after, "shop.sync") || strings.Contains(after, "crm.load") {
		t.Errorf("the server after the test: %s (before: %s)", after, before)
	}
	if errs := scriptErrors(); len(errs) > 0 {
		t.Errorf("the page showed script errors:\n%s", strings.Join(errs, "\n"))
	}
}
