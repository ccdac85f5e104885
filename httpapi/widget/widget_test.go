package widget_test

import (
	"context"
	"flag"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi/widget"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/apptest"
	"github.com/physiciansnet/capacityd/internal/testenv"
)

// browserCtx is the one headless chromium of the package's tests; each
// test opens its own tab. It is nil when chromium is not installed.
var browserCtx context.Context

func TestMain(m *testing.M) {
	os.Exit(runWithBrowser(m))
}

func runWithBrowser(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run() // every browser test skips
	}
	path, err := exec.LookPath("chromium")
	if err != nil {
		return m.Run() // every browser test fails, saying how to install chromium
	}
	dir, err := os.MkdirTemp("", "capacityd-chromium-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(dir),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// No back-forward cache: a page navigated away from would keep its
		// seat streams open, and a browser opens at most six connections to
		// a server of HTTP/1.1 (the tests' servers).
		chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,BackForwardCache"),
		chromedp.WindowSize(1000, 800),
		// The browser's own language is English whatever the machine's
		// locale; the tests set the page's language where it matters.
		chromedp.Flag("lang", "en-US"),
		chromedp.Env("LANGUAGE=en_US", "LANG=en_US.UTF-8"),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	// Start the browser now, on a context without a deadline.
	if err := chromedp.Do(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "start chromium:", err)
		return 1
	}
	browserCtx = ctx
	return m.Run()
}

// tab opens a browser tab for t, closed when t ends. Without chromium the
// test fails (it never skips): the widgets are only tested in a browser.
func tab(t *testing.T) context.Context {
	t.Helper()
	testenv.SkipShort(t, "headless chromium")
	if browserCtx == nil {
		t.Fatal("chromium is not installed: install it with `apt-get install -y chromium` (Debian; make test and .ci/run do)")
	}
	ctx, cancel := chromedp.NewContext(browserCtx)
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(900, 720)))
	return ctx
}

// do runs the steps within d.
func do(t *testing.T, ctx context.Context, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// waitText waits until the element's text is want.
func waitText(sel, want string, within time.Duration) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`(document.querySelector(%q) || {}).textContent === %q`, sel, want)
	p := void(chromedp.Poll[bool](js, chromedp.WithPollingTimeout(within), chromedp.WithPollingInterval(10*time.Millisecond)))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := p(ctx, t)
		if err != nil {
			err = fmt.Errorf("waiting for %s to read %q: %w", sel, want, err)
		}
		return chromedp.Void{}, err
	}
}

// waitAttr waits until the element's attribute attr is want.
func waitAttr(sel, attr, want string, within time.Duration) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`(document.querySelector(%q) || {getAttribute() { return null }}).getAttribute(%q) === %q`, sel, attr, want)
	p := void(chromedp.Poll[bool](js, chromedp.WithPollingTimeout(within), chromedp.WithPollingInterval(10*time.Millisecond)))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := p(ctx, t)
		if err != nil {
			err = fmt.Errorf("waiting for %s's %s to be %q: %w", sel, attr, want, err)
		}
		return chromedp.Void{}, err
	}
}

// void drops an action's value.
func void[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}

// text returns the element's text.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).textContent`, sel)))
	require.NoError(t, err)
	return s
}

// screenshot saves the tab's viewport as artifacts/<test name>.png.
func screenshot(t *testing.T, ctx context.Context) []byte {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	dir := testenv.ArtifactsDir(t)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s", path)
	return png
}

// TestSeatWidgetIsLive embeds the seat widget in a page of another origin,
// three widgets for two activities, and follows signups made through the
// API.
func TestSeatWidgetIsLive(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	a := inst.CreateActivity(t, "Cardiology grand rounds", 3)
	b := inst.CreateActivity(t, "Journal club", 5)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>embed</title></head><body>
<p>Rounds: <span id="a1" data-seats-activity="%[2]s"></span></p>
<p>Rounds again: <span id="a2" data-seats-activity="%[2]s"></span></p>
<p>Journal club: <span id="b" data-seats-activity="%[3]s"></span></p>
<script src="%[1]s/widget/seats.js" async></script></body></html>`, inst.URL, a, b)
	}))
	t.Cleanup(page.Close)

	ctx := tab(t)
	do(t, ctx, 10*time.Second,
		chromedp.Navigate(page.URL),
		waitText("#a1", "3 of 3 seats left", 5*time.Second),
		waitText("#a2", "3 of 3 seats left", time.Second),
		waitText("#b", "5 of 5 seats left", time.Second),
	)
	live, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#a1').getAttribute('aria-live')`))
	require.NoError(t, err)
	require.Equal(t, "polite", live)

	start := time.Now()
	inst.MustSignup(t, a, "u1")
	do(t, ctx, 5*time.Second, waitText("#a1", "2 of 3 seats left", time.Second-time.Since(start)))
	t.Logf("signup shown by the widget %s after it was sent", time.Since(start))
	do(t, ctx, 5*time.Second, waitText("#a2", "2 of 3 seats left", time.Second))
	require.Equal(t, "5 of 5 seats left", text(t, ctx, "#b"))

	inst.MustSignup(t, a, "u2")
	inst.MustSignup(t, a, "u3")
	do(t, ctx, 5*time.Second, waitText("#a1", "Full", time.Second), waitText("#a2", "Full", time.Second))
	screenshot(t, ctx)
}

// TestSeatWidgetReconnects cuts the widget's stream (at a proxy in front of
// the service) and checks that it reconnects and catches up on its own.
func TestSeatWidgetReconnects(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	a := inst.CreateActivity(t, "Cardiology grand rounds", 10)
	target, err := url.Parse(inst.URL)
	require.NoError(t, err)
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(proxy.Close)

	ctx := tab(t)
	do(t, ctx, 10*time.Second,
		chromedp.Navigate(proxy.URL+"/demo?activity="+a),
		waitText("[data-seats-activity]", "10 of 10 seats left", 5*time.Second),
	)
	proxy.CloseClientConnections()
	inst.MustSignup(t, a, "u1")
	do(t, ctx, 10*time.Second, waitText("[data-seats-activity]", "9 of 10 seats left", 5*time.Second))
	proxy.CloseClientConnections()
	// The widget has noticed the cut before the next signup, which it
	// must then catch up on.
	do(t, ctx, 10*time.Second, waitAttr("[data-seats-activity]", "data-seats-state", "reconnecting", 5*time.Second))
	inst.MustSignup(t, a, "u2")
	do(t, ctx, 10*time.Second, waitText("[data-seats-activity]", "8 of 10 seats left", 5*time.Second))
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-seats-activity]').getAttribute('data-seats-state')`))
	require.NoError(t, err)
	require.Contains(t, []string{"live", "reconnecting"}, state)
	screenshot(t, ctx)
}

// TestNoteButtonsCountViewsAndWaters loads the note buttons twice and
// waters the note with a double click.
func TestNoteButtonsCountViewsAndWaters(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	note := "browser-note-" + fmt.Sprint(time.Now().UnixNano())
	ctx := tab(t)
	views := `[data-note] .note-views`
	waters := `[data-note] .note-waters`
	do(t, ctx, 10*time.Second,
		chromedp.Navigate(inst.URL+"/demo?note="+note),
		waitText(views, "1 view", 5*time.Second),
		waitText(waters, "0 waters", time.Second),
		chromedp.Reload(),
		waitText(views, "2 views", 5*time.Second),
	)
	// Two clicks in a row: the second comes while the first is in flight.
	do(t, ctx, 10*time.Second,
		void(chromedp.Evaluate[bool](`(() => { const b = document.querySelector('[data-note] .note-water'); b.click(); b.click(); return true })()`)),
		waitText(waters, "1 water", 5*time.Second),
	)
	// Proves that the second click sent nothing: room for a second water,
	// had one been sent, to reach the server before the numbers are read.
	time.Sleep(300 * time.Millisecond)
	stats, err := inst.Public().NoteStats(t.Context(), note)
	require.NoError(t, err)
	require.Equal(t, client.NoteStats{NoteID: note, Views: 2, Waters: 1}, stats)
	require.Equal(t, "1 water", text(t, ctx, waters))

	do(t, ctx, 10*time.Second, chromedp.Click(`[data-note] .note-water`), waitText(waters, "2 waters", 5*time.Second))
	screenshot(t, ctx)
}

// TestDemoPage shows the widgets for an activity, for one with a waiting
// list that takes parties, and for two activities sharing a pool, and
// signs random users up from the page: one seat on the first, a party of
// the picker's size on the second, and one seat on each pooled activity,
// which lowers both pooled counters. The widgets have their own look (the
// page's policy lets it in). With UPDATE_DOCS=1 it also saves the
// screenshot as docs/demo.png.
func TestDemoPage(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{DemoSignups: true}})
	a := inst.CreateActivity(t, "Cardiology grand rounds", 20)
	for i := range 7 {
		inst.MustSignup(t, a, fmt.Sprintf("u%d", i))
	}
	// Parties of 3 and 2 of 6 seats: the widget counts seats.
	w := inst.CreateWaitlistedParties(t, "Journal club", 6, 4)
	var parties []client.Registration
	for i, party := range []int{3, 2} {
		parties = append(parties, inst.MustSignup(t, w, fmt.Sprintf("j%d", i), client.SignupOptions{Seats: party}))
	}
	// Two activities sharing a hall of 30 seats, 8 of them taken.
	admin := inst.API(t, "admin", true)
	hall, err := admin.CreatePool(t.Context(), client.NewPool{Title: "Main hall", Capacity: 30})
	require.NoError(t, err)
	var pooled []string
	for i, title := range []string{"Symposium", "Symposium + dinner"} {
		p, err := admin.CreateActivity(t.Context(), client.NewActivity{Title: title, Capacity: 30, Pools: []string{hall.ID}})
		require.NoError(t, err)
		pooled = append(pooled, p.ID)
		for j := range 5 - 2*i {
			inst.MustSignup(t, p.ID, fmt.Sprintf("s%d-%d", i, j))
		}
	}
	note := "demo-note" // each instance has a database of its own
	public := inst.Public()
	for range 41 {
		_, err := public.RecordView(t.Context(), note)
		require.NoError(t, err)
	}
	for range 6 {
		_, err := public.RecordWater(t.Context(), note)
		require.NoError(t, err)
	}

	// The page is read as it is sent, for its headers.
	page := "/demo?activity=" + a + "&waitlist=" + w + "&pool=" + hall.ID + "&note=" + note
	r := inst.MustDo(t, http.MethodGet, page, "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Contains(t, r.Header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Equal(t, "nosniff", r.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "no-referrer", r.Header.Get("Referrer-Policy"))

	seats := func(id string) string { return `[data-seats-activity="` + id + `"]` }
	ctx := tab(t)
	do(t, ctx, 20*time.Second,
		chromedp.EmulateViewport(900, 1500),
		chromedp.Navigate(inst.URL+page),
		waitText(seats(a), "13 of 20 seats left", 5*time.Second),
		waitText(seats(w), "1 of 6 seats left", 5*time.Second),
		waitText("[data-note] .note-views", "42 views", 5*time.Second),
		waitText(`[data-demo-title="`+a+`"]`, "Cardiology grand rounds", 5*time.Second),
		waitText(`[data-demo-title="`+w+`"]`, "Journal club", 5*time.Second),
		// The pool: its line names both activities, and a signup to one
		// lowers the other's remaining too.
		waitText(`[data-demo-pool-share="`+hall.ID+`"]`, "Symposium and Symposium + dinner share the 30 seats of Main hall: "+
			"a signup to one leaves a seat fewer for the other.", 5*time.Second),
		waitText(`.pooled [data-demo-title="`+pooled[1]+`"]`, "Symposium + dinner", time.Second),
		waitText(seats(pooled[0]), "22 of 30 seats left", 5*time.Second),
		waitText(seats(pooled[1]), "22 of 30 seats left", 5*time.Second),
		chromedp.Click(`[data-demo-signup="`+pooled[0]+`"]`),
		waitText(seats(pooled[1]), "21 of 30 seats left", 2*time.Second),
		waitText(seats(pooled[0]), "21 of 30 seats left", 2*time.Second),
		void(chromedp.Poll[bool](`/^Signed up demo-[0-9a-f]{12} for 1 seat\.$/.test(document.querySelector('[data-demo-signup-result="`+pooled[0]+`"]').textContent)`,
			chromedp.WithPollingTimeout(2*time.Second))),
		chromedp.Click(`[data-demo-signup="`+pooled[1]+`"]`),
		waitText(seats(pooled[0]), "20 of 30 seats left", 2*time.Second),
		waitText(seats(pooled[1]), "20 of 30 seats left", 2*time.Second),
		chromedp.Click(`[data-demo-signup="`+a+`"]`),
		waitText(seats(a), "12 of 20 seats left", 2*time.Second),
		void(chromedp.Poll[bool](`document.querySelector('[data-demo-signup-result="`+a+`"]').textContent.startsWith('Signed up demo-')`,
			chromedp.WithPollingTimeout(2*time.Second))),
		// A party of 1 (the picker's first choice) takes the last seat.
		chromedp.Click(`[data-demo-signup="`+w+`"]`),
		waitText(seats(w), "Full", 2*time.Second),
		void(chromedp.Poll[bool](`/^Signed up demo-[0-9a-f]{12} for 1 seat\.$/.test(document.querySelector('[data-demo-signup-result="`+w+`"]').textContent)`,
			chromedp.WithPollingTimeout(2*time.Second))),
		// A party of 2 waits, for both its seats.
		void(chromedp.Evaluate[bool](`(() => { document.querySelector('[data-demo-seats="`+w+`"]').value = '2'; return true })()`)),
		chromedp.Click(`[data-demo-signup="`+w+`"]`),
		waitText(seats(w), "Full · 1 waiting", 2*time.Second),
		void(chromedp.Poll[bool](`/^No room for 2 seats: demo-[0-9a-f]{12} joined the waiting list at place 1\.$/.test(document.querySelector('[data-demo-signup-result="`+w+`"]').textContent)`,
			chromedp.WithPollingTimeout(2*time.Second))),
	)
	// The party of 3 cancels: the waiting 2 take two of its seats; a party
	// of 4 then waits with one seat free, and the widget says both.
	_, err = inst.API(t, "j0", false).CancelRegistration(t.Context(), parties[0].ID)
	require.NoError(t, err)
	do(t, ctx, 10*time.Second, waitText(seats(w), "1 of 6 seats left", 2*time.Second))
	res, err := inst.Signup(t, w, "j9", client.SignupOptions{Seats: 4})
	require.NoError(t, err)
	require.True(t, res.Waitlisted)
	do(t, ctx, 10*time.Second, waitText(seats(w), "1 of 6 seats left \u00b7 1 waiting", 2*time.Second))
	// The page's Content-Security-Policy lets the widgets' default look in
	// (by hash): no constructed style sheets.
	looks, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
  const out = Array.from(document.querySelectorAll('style[data-capacityd-style]'), s => s.getAttribute('data-capacityd-style') + ':' + (s.sheet !== null));
  return out.concat(['adopted:' + document.adoptedStyleSheets.length]);
})()`))
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"seats:true", "note-buttons:true", "adopted:0"}, looks)
	require.Equal(t, 0, countOf(t, ctx, `[data-demo-seats="`+a+`"]`), "the activity without a waiting list signs up one seat")
	require.Equal(t, []string{"1", "2", "3", "4"}, optionValues(t, ctx, `[data-demo-seats="`+w+`"]`))
	png := screenshot(t, ctx)
	if os.Getenv("UPDATE_DOCS") != "" {
		require.NoError(t, os.WriteFile(filepath.Join(testenv.ModuleRoot(t), "docs", "demo.png"), png, 0o644))
	}
}

// countOf returns the number of elements sel matches.
func countOf(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	require.NoError(t, err)
	return n
}

// optionValues returns the values of the options of the select sel.
func optionValues(t *testing.T, ctx context.Context, sel string) []string {
	t.Helper()
	vs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`Array.from(document.querySelector(%q).options, o => o.value)`, sel)))
	require.NoError(t, err)
	return vs
}

// TestSeatWidgetFollowsTheWaitingList embeds the seat widget of a full
// activity with people waiting, on another origin, and follows a
// cancellation: the first in line takes the seat, and the line shortens.
func TestSeatWidgetFollowsTheWaitingList(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateWaitlisted(t, "Journal club", 2)
	var seated string
	for i := range 4 {
		res, err := inst.Signup(t, id, fmt.Sprint("u", i))
		require.NoError(t, err)
		if i == 0 {
			seated = res.Registration.ID
		}
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><title>line</title></head><body>
<p>Journal club: <span id="en" data-seats-activity="%[2]s"></span></p>
<p>读书会: <span id="zh" data-lang="zh" data-seats-activity="%[2]s"></span></p>
<script src="%[1]s/widget/seats.js" async></script></body></html>`, inst.URL, id)
	}))
	t.Cleanup(page.Close)

	ctx := tab(t)
	do(t, ctx, 10*time.Second,
		chromedp.Navigate(page.URL),
		waitText("#en", "Full · 2 waiting", 5*time.Second),
		waitText("#zh", "已满 · 2 人候补", time.Second),
	)
	start := time.Now()
	_, err := inst.API(t, "u0", false).CancelRegistration(t.Context(), seated)
	require.NoError(t, err)
	do(t, ctx, 5*time.Second, waitText("#en", "Full · 1 waiting", 2*time.Second), waitText("#zh", "已满 · 1 人候补", time.Second))
	t.Logf("the promotion was shown %s after the cancellation", time.Since(start))
	screenshot(t, ctx)
}

// TestDemoPoolLine renders the line of a pool for pools of no, one, two
// and five activities: the page shows widgets for at most four of them,
// and the line counts the others.
func TestDemoPoolLine(t *testing.T) {
	t.Parallel()
	line := regexp.MustCompile(`(?s)<p class="pool-share"[^>]*>(.*?)</p>`)
	tag := regexp.MustCompile(`<[^>]+>`)
	ids := []string{"a_1", "a_2", "a_3", "a_4", "a_5"}
	for _, tc := range []struct {
		activities int
		want       string
		widgets    int
	}{
		{0, "No activity belongs to Main hall (30 seats) yet.", 0},
		{1, "a_1 is the only activity of Main hall (30 seats).", 1},
		{2, "a_1 and a_2 share the 30 seats of Main hall: a signup to one leaves a seat fewer for the other.", 2},
		{3, "a_1, a_2 and a_3 share the 30 seats of Main hall: a signup to one leaves a seat fewer for the others.", 3},
		{5, "a_1, a_2, a_3, a_4 and 1 more share the 30 seats of Main hall: a signup to one leaves a seat fewer for the others.", 4},
	} {
		var buf strings.Builder
		data := widget.DemoData{Pool: widget.NewDemoPool("p_1", "Main hall", 30, ids[:tc.activities], true)}
		require.NoError(t, widget.DemoPage.Execute(&buf, data))
		m := line.FindStringSubmatch(buf.String())
		require.NotNil(t, m, buf.String())
		require.Equal(t, tc.want, html.UnescapeString(tag.ReplaceAllString(m[1], "")))
		require.Equal(t, tc.widgets, strings.Count(buf.String(), `<div class="seats" data-seats-activity=`))
		require.Equal(t, tc.widgets, strings.Count(buf.String(), `data-demo-signup="`))
		require.NotContains(t, buf.String(), "No activity given", "a pool is something to show")
	}
}
