package demo_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/httpapi/demo"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/browsertest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(browsertest.Run(m))
}

// The package's names for the browser helpers.
var (
	tab        = browsertest.Tab
	do         = browsertest.Do
	waitText   = browsertest.WaitText
	screenshot = browsertest.Screenshot
	countOf    = browsertest.Count
)

// void drops an action's value.
func void[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] { return browsertest.Void(a) }

// TestDemoPage shows the widgets for an activity, for one with a waiting
// list that takes parties, and for two activities sharing a pool, and
// signs random users up from the page: one seat on the first, a party of
// the picker's size on the second, and one seat on each pooled activity,
// which lowers both pooled counters. The widgets have their own look (the
// page's policy lets it in). With UPDATE_DOCS=1 it also saves the
// screenshot as docs/demo.png.
func TestDemoPage(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{HTTP: httpapi.Config{DemoSignups: true}}})
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

// optionValues returns the values of the options of the select sel.
func optionValues(t *testing.T, ctx context.Context, sel string) []string {
	t.Helper()
	vs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`Array.from(document.querySelector(%q).options, o => o.value)`, sel)))
	require.NoError(t, err)
	return vs
}

// TestDemoEmbedSnippetWorksOnAnotherSite pastes the demo page's "Embed"
// snippet into a page of another origin and checks that both widgets work
// there.
func TestDemoEmbedSnippetWorksOnAnotherSite(t *testing.T) {
	t.Parallel()
	var pasted atomic.Pointer[string]
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, *pasted.Load())
	}))
	t.Cleanup(site.Close)
	inst := apptest.Start(t, apptest.Options{App: app.Options{HTTP: httpapi.Config{CORSAllowedOrigins: []string{site.URL}}}})
	a := inst.CreateActivity(t, "Grand rounds", 4)
	r := inst.MustDo(t, http.MethodGet, "/demo?activity="+a+"&note=pasted-note", "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	m := regexp.MustCompile(`(?s)<pre><code>(.*?)</code></pre>`).FindSubmatch(r.Body)
	require.NotNil(t, m, "the Embed box")
	snippet := html.UnescapeString(string(m[1]))
	require.Contains(t, snippet, `<script src="`+inst.URL+`/widget/seats.js" async></script>`)
	require.Contains(t, snippet, `<script src="`+inst.URL+`/widget/note-buttons.js" async></script>`)

	page := "<!doctype html><html><head><meta charset=\"utf-8\"><title>pasted</title></head><body>\n" + snippet + "\n</body></html>"
	pasted.Store(&page)
	ctx := tab(t)
	do(t, ctx, 15*time.Second,
		chromedp.Navigate(site.URL+"/pasted"),
		waitText("[data-seats-activity]", "4 of 4 seats left", 5*time.Second),
		waitText("[data-note] .note-views", "1 view", 5*time.Second),
	)
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
		data := demo.Data{Pool: demo.NewPool("p_1", "Main hall", 30, ids[:tc.activities], true)}
		require.NoError(t, demo.Page.Execute(&buf, data))
		m := line.FindStringSubmatch(buf.String())
		require.NotNil(t, m, buf.String())
		require.Equal(t, tc.want, html.UnescapeString(tag.ReplaceAllString(m[1], "")))
		require.Equal(t, tc.widgets, strings.Count(buf.String(), `<div class="seats" data-seats-activity=`))
		require.Equal(t, tc.widgets, strings.Count(buf.String(), `data-demo-signup="`))
		require.NotContains(t, buf.String(), "No activity given", "a pool is something to show")
	}
}
