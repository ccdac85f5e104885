package widget_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/browsertest"
)

func TestMain(m *testing.M) {
	os.Exit(browsertest.Run(m))
}

// The package's names for the browser helpers.
var (
	tab        = browsertest.Tab
	do         = browsertest.Do
	waitText   = browsertest.WaitText
	waitAttr   = browsertest.WaitAttr
	text       = browsertest.Text
	screenshot = browsertest.Screenshot
	countOf    = browsertest.Count
)

// void drops an action's value.
func void[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] { return browsertest.Void(a) }

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
	// The second click sent nothing: no second water reaches the server
	// over 300 ms, room for one had it been sent.
	require.Never(t, func() bool {
		stats, err := inst.Public().NoteStats(t.Context(), note)
		return err == nil && stats.Waters > 1
	}, 300*time.Millisecond, 20*time.Millisecond, "the second click sent a water")
	stats, err := inst.Public().NoteStats(t.Context(), note)
	require.NoError(t, err)
	require.Equal(t, client.NoteStats{NoteID: note, Views: 2, Waters: 1}, stats)
	require.Equal(t, "1 water", text(t, ctx, waters))

	do(t, ctx, 10*time.Second, chromedp.Click(`[data-note] .note-water`), waitText(waters, "2 waters", 5*time.Second))
	screenshot(t, ctx)
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
