package widget_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/httpapi/widget"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// pages serves HTML pages from an origin of its own (another port on
// loopback), standing for a site that embeds the widgets.
type pages struct {
	srv   *httptest.Server
	mu    sync.Mutex
	pages map[string]string
}

func newPages(t *testing.T) *pages {
	t.Helper()
	p := &pages{pages: map[string]string{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		body, ok := p.pages[r.URL.Path]
		p.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		ctype := "text/html; charset=utf-8"
		if strings.HasSuffix(r.URL.Path, ".css") {
			ctype = "text/css; charset=utf-8"
		}
		w.Header().Set("Content-Type", ctype)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// add serves body at path (as CSS for a path ending in .css, else as HTML)
// and returns its URL.
func (p *pages) add(path, body string) string {
	p.mu.Lock()
	p.pages[path] = body
	p.mu.Unlock()
	return p.srv.URL + path
}

// embedPage is a page in language lang (the html element's lang) with both
// widgets of service, and a seat widget whose data-lang is other.
func embedPage(lang, other, service, activity, note string) string {
	return fmt.Sprintf(`<!doctype html><html lang="%[1]s"><head><meta charset="utf-8"><title>embed</title></head><body>
<p id="seats" data-seats-activity="%[4]s"></p>
<p id="seats-other" data-seats-activity="%[4]s" data-lang="%[2]s"></p>
<div id="note" data-note="%[5]s"></div>
<script src="%[3]s/widget/seats.js" async></script>
<script src="%[3]s/widget/note-buttons.js" async></script>
</body></html>`, lang, other, service, activity, note)
}

// TestWidgetsOnAnOriginNotListed embeds both widgets in pages of another
// origin, in English and in Simplified Chinese, against a service whose
// CORS_ALLOWED_ORIGINS lists other sites only: the seat counter is live,
// and the note buttons show the numbers without the Water button. The
// visitor is told nothing about the setting (never that the server is
// unreachable either); the console tells the site's developer, once per
// page.
func TestWidgetsOnAnOriginNotListed(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{HTTP: httpapi.Config{CORSAllowedOrigins: []string{"https://only.example"}}}})
	a := inst.CreateActivity(t, "Cardiology grand rounds", 3)
	inst.MustSignup(t, a, "u1")
	site := newPages(t)
	en := site.add("/en", embedPage("en", "zh", inst.URL, a, "refused-note"))
	zh := site.add("/zh", embedPage("zh-CN", "en", inst.URL, a, "refused-note"))

	ctx := tab(t)
	console := watchConsole(t, ctx)
	refusal := "does not let this site (" + site.srv.URL + ") record views and waters of note \"refused-note\": " +
		"its CORS_ALLOWED_ORIGINS setting lists other sites"
	do(t, ctx, 15*time.Second,
		chromedp.Navigate(en),
		waitText("#seats", "2 of 3 seats left", 5*time.Second),
		waitText("#seats-other", "剩余 2 / 3 个名额", time.Second),
		waitText("#note .note-views", "0 views", 5*time.Second),
		waitText("#note .note-waters", "0 waters", time.Second),
		waitAttr("#note", "data-note-state", "refused", time.Second),
	)
	console.waitFor(t, chromedp.ConsoleError, refusal, 1, 2*time.Second)
	visitorSeesNoSetting(t, ctx)
	require.Equal(t, "Water", text(t, ctx, "#note .note-water"))
	screenshot(t, ctx)

	do(t, ctx, 15*time.Second,
		chromedp.Navigate(zh),
		waitText("#seats", "剩余 2 / 3 个名额", 5*time.Second),
		waitText("#seats-other", "2 of 3 seats left", time.Second),
		waitText("#note .note-views", "0 次浏览", 5*time.Second),
		waitText("#note .note-waters", "0 次浇水", time.Second),
		waitAttr("#note", "data-note-state", "refused", time.Second),
	)
	console.waitFor(t, chromedp.ConsoleError, refusal, 2, 2*time.Second)
	visitorSeesNoSetting(t, ctx)
	require.Equal(t, "浇水", text(t, ctx, "#note .note-water"))
	inst.MustSignup(t, a, "u2")
	inst.MustSignup(t, a, "u3")
	do(t, ctx, 10*time.Second, waitText("#seats", "已满", 5*time.Second), waitText("#seats-other", "Full", time.Second))

	stats, err := inst.Public().NoteStats(t.Context(), "refused-note")
	require.NoError(t, err)
	require.Equal(t, client.NoteStats{NoteID: "refused-note"}, stats, "nothing recorded")
}

// visitorSeesNoSetting checks that the note buttons of the page say nothing
// of a refusal and offer no Water button.
func visitorSeesNoSetting(t *testing.T, ctx context.Context) {
	t.Helper()
	require.Empty(t, text(t, ctx, "#note .note-status"))
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	require.NoError(t, err)
	for _, word := range []string{"allowed", "CORS", "site", "网站", "未获准"} {
		require.NotContains(t, shown, word)
	}
	button, err := chromedp.Run(ctx, chromedp.Evaluate[[]bool](
		`(() => { const b = document.querySelector('#note .note-water'); return [b.disabled, b.hidden, b.offsetParent === null] })()`))
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true}, button, "no Water button where waters cannot be recorded")
}

// TestNoteButtonsOnAnAllowedOrigin embeds the note buttons in pages of an
// origin the service allows to write, in both languages: one that
// CORS_ALLOWED_ORIGINS lists, and any with the default settings.
func TestNoteButtonsOnAnAllowedOrigin(t *testing.T) {
	t.Parallel()
	t.Run("listed", func(t *testing.T) {
		t.Parallel()
		site := newPages(t)
		noteButtonsWork(t, site, apptest.Start(t, apptest.Options{App: app.Options{HTTP: httpapi.Config{CORSAllowedOrigins: []string{site.srv.URL}}}}))
	})
	t.Run("default settings", func(t *testing.T) {
		t.Parallel()
		noteButtonsWork(t, newPages(t), apptest.Start(t, apptest.Options{}))
	})
}

// noteButtonsWork embeds the widgets in pages of site and checks that the
// note buttons record a view per page load and a water per click.
func noteButtonsWork(t *testing.T, site *pages, inst *apptest.Instance) {
	a := inst.CreateActivity(t, "Journal club", 5)
	en := site.add("/en", embedPage("en", "zh", inst.URL, a, "allowed-note"))
	zh := site.add("/zh", embedPage("zh-Hans", "en", inst.URL, a, "allowed-note"))

	ctx := tab(t)
	do(t, ctx, 15*time.Second,
		chromedp.Navigate(en),
		waitText("#note .note-views", "1 view", 5*time.Second),
		waitText("#note .note-waters", "0 waters", time.Second),
		chromedp.Click("#note .note-water"),
		waitText("#note .note-waters", "1 water", 5*time.Second),
		waitText("#seats", "5 of 5 seats left", 5*time.Second),
	)
	require.Empty(t, text(t, ctx, "#note .note-status"))
	do(t, ctx, 15*time.Second,
		chromedp.Navigate(zh),
		waitText("#note .note-views", "2 次浏览", 5*time.Second),
		waitText("#note .note-waters", "1 次浇水", time.Second),
		chromedp.Click("#note .note-water"),
		waitText("#note .note-waters", "2 次浇水", 5*time.Second),
		waitText("#seats", "剩余 5 / 5 个名额", 5*time.Second),
	)
	require.Empty(t, text(t, ctx, "#note .note-status"))
	screenshot(t, ctx)
	stats, err := inst.Public().NoteStats(t.Context(), "allowed-note")
	require.NoError(t, err)
	require.Equal(t, client.NoteStats{NoteID: "allowed-note", Views: 2, Waters: 2}, stats)
}

// stubService serves the widget scripts like capacityd and answers /v1/
// with handler: for states the real service cannot be put in from a test.
func stubService(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name, ok := strings.CutPrefix(r.URL.Path, "/widget/"); ok {
			b, ok := widget.Script(name)
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
			_, _ = w.Write(b)
			return
		}
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSeatWidgetShowsTheWaitingList follows a seat stream of a full
// activity with people waiting, in both languages.
func TestSeatWidgetShowsTheWaitingList(t *testing.T) {
	t.Parallel()
	svc := stubService(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if !strings.HasSuffix(r.URL.Path, "/seats/stream") {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			fmt.Fprint(w, `{"note_id":"n","views":0,"waters":0}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		fmt.Fprint(w, "retry: 2000\n\nevent: seats\ndata: "+
			`{"activity_id":"a_1","capacity":20,"taken":20,"remaining":0,"waiting":3,"source":"cache","as_of":"2026-11-29T10:00:00Z"}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	site := newPages(t)
	en := site.add("/en", embedPage("en-GB", "zh", svc.URL, "a_1", "n"))
	ctx := tab(t)
	do(t, ctx, 10*time.Second,
		chromedp.Navigate(en),
		waitText("#seats", "Full · 3 waiting", 5*time.Second),
		waitText("#seats-other", "已满 · 3 人候补", time.Second),
	)
	full, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('#seats').classList.contains('seats-full')`))
	require.NoError(t, err)
	require.True(t, full)
}

// TestNoteButtonsSayWhenTheServerIsUnreachable serves the note buttons from
// a service whose API drops every connection.
func TestNoteButtonsSayWhenTheServerIsUnreachable(t *testing.T) {
	t.Parallel()
	svc := stubService(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	site := newPages(t)
	en := site.add("/en", embedPage("en", "zh", svc.URL, "a_1", "n"))
	zh := site.add("/zh", embedPage("zh", "en", svc.URL, "a_1", "n"))
	ctx := tab(t)
	do(t, ctx, 10*time.Second,
		chromedp.Navigate(en),
		waitText("#note .note-status", "Could not reach the server", 5*time.Second),
		waitText("#note .note-counts", "— views · — waters", time.Second),
	)
	do(t, ctx, 10*time.Second,
		chromedp.Navigate(zh),
		waitText("#note .note-status", "无法连接服务器", 5*time.Second),
		waitText("#note .note-counts", "— 次浏览 · — 次浇水", time.Second),
	)
	disabled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('#note .note-water').disabled`))
	require.NoError(t, err)
	require.False(t, disabled, "a water may be tried again")
}
