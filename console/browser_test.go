package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/console"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/browsertest"
)

// The browser tests of the console: each starts its own instances
// (apptest, real PostgreSQL and Redis), signs in through a one-time link
// (the OpenID Connect sign-in has its own test) and drives the pages in
// the package's headless chromium.

func TestMain(m *testing.M) {
	os.Exit(browsertest.Run(m))
}

// The package's names for the browser helpers.
var (
	tab      = browsertest.PrivateTab
	do       = browsertest.Do
	waitText = browsertest.WaitText
	waitTrue = browsertest.WaitTrue
	text     = browsertest.Text
	countOf  = browsertest.Count
)

// void drops an action's value.
func void[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] { return browsertest.Void(a) }

// session is a signed-in browser tab on an instance's console.
type session struct {
	t    *testing.T
	ctx  context.Context
	inst *apptest.Instance
}

// signInTab opens a tab signed in to inst's console as sub with roles
// (through a one-time link), in language lang (en, zh-TW or zh-CN).
func signInTab(t *testing.T, inst *apptest.Instance, lang, sub string, roles ...string) *session {
	t.Helper()
	return signInWith(t, tab(t), inst, lang, sub, roles...)
}

// signInWith signs the browser tab ctx in, as signInTab does.
func signInWith(t *testing.T, ctx context.Context, inst *apptest.Instance, lang, sub string, roles ...string) *session {
	t.Helper()
	link, err := console.NewLink(context.Background(), inst.App.Store, console.Grant{Sub: sub, Roles: roles}, time.Minute, time.Now())
	require.NoError(t, err)
	_, err = chromedp.Call(ctx, network.Enable, network.EnableParams{})
	require.NoError(t, err)
	_, err = chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": lang}})
	require.NoError(t, err)
	do(t, ctx, 30*time.Second,
		chromedp.Navigate(inst.URL+link),
		chromedp.WaitVisible("main h1"),
	)
	require.Equal(t, lang, attr(t, ctx, "html", "lang"))
	return &session{t: t, ctx: ctx, inst: inst}
}

// open goes to the console path and waits for its page's heading
// (chromedp's Navigate does not always come back from a URL with a query).
func (s *session) open(path string) {
	s.t.Helper()
	do(s.t, s.ctx, 15*time.Second, void(chromedp.Evaluate[bool](
		fmt.Sprintf(`document.body.dataset.leaving = '1'; location.assign(%q); true`, s.inst.URL+path))))
	s.arrive("main h1")
}

// accessible checks the page with axe-core.
func (s *session) accessible(page string) {
	s.t.Helper()
	browsertest.RequireAccessible(s.t, s.ctx, page)
}

// attr returns the attribute of the first element sel matches.
func attr(t *testing.T, ctx context.Context, sel, name string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).getAttribute(%q) || ""`, sel, name)))
	require.NoError(t, err)
	return v
}

// status is the HTTP status of a GET of the console path in the tab's
// session (its cookies), without leaving the page.
func (s *session) status(path string) int {
	s.t.Helper()
	n, err := chromedp.Run(s.ctx, chromedp.Evaluate[int](
		fmt.Sprintf(`fetch(%q, {redirect: 'manual'}).then(r => r.type === 'opaqueredirect' ? 303 : r.status)`, path),
		chromedp.EvalAwaitPromise))
	require.NoError(s.t, err)
	return n
}

// TestTheHomePageIsAccessibleInEveryLanguage: an admin's and a door
// role's landing pages pass axe-core in English, Traditional and
// Simplified Chinese, and can be used with the keyboard alone (the skip
// link leads to the content).
func TestTheHomePageIsAccessibleInEveryLanguage(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	for _, lang := range console.Languages {
		admin := signInTab(t, inst, lang, "ana", "admin")
		admin.accessible("home (admin, " + lang + ")")
		do(t, admin.ctx, 5*time.Second,
			chromedp.KeyEvent("\t"),
			waitTrue(`document.activeElement.classList.contains('skip')`, 2*time.Second, "the skip link to have the focus"),
			chromedp.KeyEvent("\r"),
			waitTrue(`document.activeElement.id === 'main'`, 2*time.Second, "the content to have the focus"),
		)
		door := signInTab(t, inst, lang, "dan", "door-a")
		door.accessible("home (door role, " + lang + ")")
		require.Equal(t, 0, countOf(t, door.ctx, "header nav"))
	}
}

// TestADoorRoleIsRefusedEveryAdminPage: a door-role session gets 403 on
// the admin pages.
func TestADoorRoleIsRefusedEveryAdminPage(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	door := signInTab(t, inst, "en", "dan", "door-a")
	for _, path := range adminPages {
		require.Equal(t, http.StatusForbidden, door.status(path), path)
	}
}

// adminPages are the console's admin pages a door role must not open.
var adminPages = []string{"/console/activities", "/console/activities/new", "/console/pools", "/console/series",
	"/console/webhooks", "/console/checkin-lists"}

// appOptionsWithOIDC are an instance's options with the console signing
// in at the given provider.
func appOptionsWithOIDC(c console.OIDCConfig) app.Options {
	var o app.Options
	o.Console.OIDC = c
	return o
}

// fill sets the inputs' values, by id.
func (s *session) fill(values map[string]string) {
	s.t.Helper()
	b, err := json.Marshal(values)
	require.NoError(s.t, err)
	do(s.t, s.ctx, 10*time.Second, void(chromedp.Evaluate[bool](fmt.Sprintf(
		`Object.entries(%s).forEach(([id, v]) => { document.getElementById(id).value = v; }); true`, b))))
}

// submit clicks sel (answering yes to a form's question) and waits for
// the page it leads to, on which then shows.
func (s *session) submit(sel, then string) {
	s.t.Helper()
	do(s.t, s.ctx, 30*time.Second,
		void(chromedp.Evaluate[bool](`window.confirm = () => true; document.body.dataset.leaving = '1'; true`)),
		chromedp.Click(chromedp.CSS(sel)),
	)
	s.arrive(then)
}

// arrive waits for the page a navigation leads to, on which then shows:
// the page it leaves was marked, so that an element of that page does not
// count, and a wait that the navigation interrupts (its document went
// away) is tried again.
func (s *session) arrive(then string) {
	s.t.Helper()
	arrived := waitTrue(fmt.Sprintf(`!!document.body && !document.body.dataset.leaving && document.readyState === 'complete' && !!document.querySelector(%q)`, then),
		2*time.Second, "the next page, with "+then)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(s.ctx, 3*time.Second)
		err := chromedp.Do(ctx, arrived)
		cancel()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			body, _ := chromedp.Run(s.ctx, chromedp.Evaluate[string](`location.href + ': ' + (document.body ? document.body.innerText : '')`))
			require.NoError(s.t, err, body)
		}
	}
}

// path is the tab's path.
func (s *session) path() string { return eval[string](s, `location.pathname`) }

// eval runs the script in the tab (awaiting a promise) and returns its
// value.
func eval[T any](s *session, js string) T {
	s.t.Helper()
	v, err := chromedp.Run(s.ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	require.NoError(s.t, err)
	return v
}
