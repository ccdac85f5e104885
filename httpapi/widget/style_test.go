package widget_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/httpapi/widget"
)

// consoleLog holds the console messages of a tab.
type consoleLog struct {
	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
	// arrived is closed (and replaced) when a message arrives.
	arrived chan struct{}
}

// watchConsole collects the console messages of the tab ctx from now on,
// until t ends.
func watchConsole(t *testing.T, ctx context.Context) *consoleLog {
	t.Helper()
	cctx, cancel := context.WithCancel(ctx)
	messages := chromedp.Console(cctx)
	l := &consoleLog{arrived: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			l.mu.Lock()
			l.msgs = append(l.msgs, m)
			close(l.arrived)
			l.arrived = make(chan struct{})
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return l
}

// count returns how many messages of type typ contain text.
func (l *consoleLog) count(typ chromedp.ConsoleType, text string) int {
	n, _ := l.countAndNext(typ, text)
	return n
}

// countAndNext returns how many messages of type typ contain text, and a
// channel closed when the next message arrives.
func (l *consoleLog) countAndNext(typ chromedp.ConsoleType, text string) (int, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.countLocked(typ, text), l.arrived
}

func (l *consoleLog) countLocked(typ chromedp.ConsoleType, text string) int {
	n := 0
	for _, m := range l.msgs {
		if m.Type == typ && strings.Contains(m.Text, text) {
			n++
		}
	}
	return n
}

// waitFor waits until exactly n messages of type typ contain text, and
// checks that no more come within a short while.
func (l *consoleLog) waitFor(t *testing.T, typ chromedp.ConsoleType, text string, n int, within time.Duration) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
wait:
	for {
		got, next := l.countAndNext(typ, text)
		if got >= n {
			break
		}
		select {
		case <-next:
		case <-deadline.C:
			break wait
		}
	}
	// No more than n come over 100 ms, room for one more message, had the
	// widget logged its error twice, to reach the log.
	assert.Never(t, func() bool { return l.count(typ, text) > n }, 100*time.Millisecond, 5*time.Millisecond)
	if got := l.count(typ, text); got != n {
		l.mu.Lock()
		defer l.mu.Unlock()
		t.Fatalf("%d console %s messages containing %q, want %d; the console:\n%v", got, typ, text, n, l.msgs)
	}
}

// computedStyle returns every property of the computed style of the
// element sel.
func computedStyle(t *testing.T, ctx context.Context, sel string) map[string]string {
	t.Helper()
	js := fmt.Sprintf(`(() => {
  const cs = getComputedStyle(document.querySelector(%q));
  const out = {};
  for (const p of cs) { out[p] = cs.getPropertyValue(p); }
  return out;
})()`, sel)
	m, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](js))
	require.NoError(t, err)
	require.NotEmpty(t, m, sel)
	return m
}

// styleOf returns the computed values of props of the element sel.
func styleOf(t *testing.T, ctx context.Context, sel string, props ...string) map[string]string {
	t.Helper()
	all := computedStyle(t, ctx, sel)
	out := make(map[string]string, len(props))
	for _, p := range props {
		out[p] = all[p]
	}
	return out
}

// hostElements are elements of the embedding site, outside the widgets:
// their look must not change when the widgets come.
const hostElements = `<p id="host-p">A paragraph of the site.</p>
<div id="host-div">A div of the site.</div>
<button id="host-button" type="button">A button of the site</button>
<span id="host-span">A span of the site.</span>`

// hostPage is a page of the embedding site in language lang: head (for
// the site's styles), the host elements, body, and the widget scripts of
// service with the attributes scriptAttrs (none when service is "").
func hostPage(lang, head, body, service, scriptAttrs string) string {
	scripts := ""
	if service != "" {
		scripts = fmt.Sprintf(`<script src="%[1]s/widget/seats.js" async%[2]s></script>
<script src="%[1]s/widget/note-buttons.js" async%[2]s></script>`, service, scriptAttrs)
	}
	return fmt.Sprintf(`<!doctype html><html lang="%s"><head><meta charset="utf-8"><title>host</title>%s</head><body>
%s
%s
%s
</body></html>`, lang, head, hostElements, body, scripts)
}

// defaultLookWidgets are the widgets of the default-look tests: seats left,
// a full activity and note buttons, of statesService.
const defaultLookWidgets = `<div id="seats" data-seats-activity="a_live"></div>
<div id="full" data-seats-activity="a_full"></div>
<div id="note" data-note="n_ok"></div>`

// waitDefaultLookWidgets waits for the widgets of defaultLookWidgets.
func waitDefaultLookWidgets(lang string) []chromedp.Action[chromedp.Void] {
	live, full, views := "7 of 20 seats left", "Full", "128 views"
	if lang != "en" {
		live, full, views = "剩余 7 / 20 个名额", "已满", "128 次浏览"
	}
	return []chromedp.Action[chromedp.Void]{
		waitText("#seats", live, 5*time.Second),
		waitText("#full", full, time.Second),
		waitText("#note .note-views", views, 5*time.Second),
	}
}

// The default look's values, as computed from its custom properties'
// defaults (docs/widgets.md lists them) with a root font size of 16px.
const (
	defaultSeatsColor       = "rgb(11, 110, 79)"   // --capacityd-seats-color #0b6e4f
	defaultSeatsBackground  = "rgb(227, 244, 236)" // --capacityd-seats-background #e3f4ec
	defaultFullColor        = "rgb(180, 35, 24)"   // --capacityd-full-color #b42318
	defaultFullBackground   = "rgb(253, 236, 235)" // --capacityd-full-background #fdeceb
	defaultTextColor        = "rgb(29, 36, 51)"    // --capacityd-text-color #1d2433
	defaultMutedColor       = "rgb(91, 100, 117)"  // --capacityd-muted-color #5b6475
	defaultButtonColor      = "rgb(255, 255, 255)" // --capacityd-button-color #ffffff
	defaultButtonBackground = "rgb(21, 112, 239)"  // --capacityd-button-background #1570ef
	defaultFontSize         = "16px"               // --capacityd-font-size 1rem
	defaultRadius           = "8px"                // --capacityd-radius .5em
	browserButtonBackground = "rgb(239, 239, 239)" // chromium's own grey button
)

// TestWidgetsDefaultLookOnAnotherSite embeds both widgets in a page of
// another origin that has no style of its own, in English and in
// Simplified Chinese: they have their default look (the custom
// properties' defaults, not the browser's grey button nor the page's
// font), each script adds one <style> element, and the site's own
// elements look exactly as they do without the widgets.
func TestWidgetsDefaultLookOnAnotherSite(t *testing.T) {
	t.Parallel()
	svc := statesService(t)
	site := newPages(t)
	ctx := tab(t)
	hostSelectors := []string{"#host-p", "#host-div", "#host-button", "#host-span"}
	for _, lang := range []string{"en", "zh-CN"} {
		bare := site.add("/bare-"+lang, hostPage(lang, "", "", "", ""))
		with := site.add("/with-"+lang, hostPage(lang, "", defaultLookWidgets, svc.URL, ""))

		do(t, ctx, 10*time.Second, chromedp.Navigate(bare))
		before := map[string]map[string]string{}
		for _, sel := range hostSelectors {
			before[sel] = computedStyle(t, ctx, sel)
		}
		pageProps := []string{"font-family", "font-size", "line-height", "color", "background-color", "margin-top", "margin-left", "padding-top", "display"}
		beforePage := map[string]map[string]string{"html": styleOf(t, ctx, "html", pageProps...), "body": styleOf(t, ctx, "body", pageProps...)}
		require.Equal(t, browserButtonBackground, before["#host-button"]["background-color"], "the browser's own button")

		do(t, ctx, 10*time.Second, append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(with)}, waitDefaultLookWidgets(lang)...)...)
		require.Equal(t, map[string]string{
			"color": defaultSeatsColor, "background-color": defaultSeatsBackground, "font-size": defaultFontSize,
			"font-weight": "700", "border-top-left-radius": defaultRadius,
		}, styleOf(t, ctx, "#seats", "color", "background-color", "font-size", "font-weight", "border-top-left-radius"))
		require.Equal(t, map[string]string{"color": defaultFullColor, "background-color": defaultFullBackground},
			styleOf(t, ctx, "#full", "color", "background-color"))
		require.Equal(t, map[string]string{"display": "flex", "color": defaultTextColor, "font-size": defaultFontSize},
			styleOf(t, ctx, "#note", "display", "color", "font-size"))
		require.Equal(t, map[string]string{
			"color": defaultButtonColor, "background-color": defaultButtonBackground, "font-size": defaultFontSize,
			"font-weight": "600", "border-top-width": "0px", "border-top-left-radius": defaultRadius,
		}, styleOf(t, ctx, "#note .note-water", "color", "background-color", "font-size", "font-weight", "border-top-width", "border-top-left-radius"))
		require.Equal(t, defaultMutedColor, styleOf(t, ctx, "#note .note-status", "color")["color"])
		for _, sel := range []string{"#seats", "#note", "#note .note-water"} {
			require.True(t, strings.HasPrefix(computedStyle(t, ctx, sel)["font-family"], "system-ui,"), sel)
		}
		// The seat badge is as wide as its text, not as the page.
		narrow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('#seats').offsetWidth < document.body.clientWidth / 2`))
		require.NoError(t, err)
		require.True(t, narrow)

		for _, sel := range hostSelectors {
			requireSameStyle(t, before[sel], computedStyle(t, ctx, sel), sel)
		}
		require.Equal(t, beforePage, map[string]map[string]string{"html": styleOf(t, ctx, "html", pageProps...), "body": styleOf(t, ctx, "body", pageProps...)})

		// One style element per script, first in the head; scanning again
		// adds none.
		styles, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
  window.capacitydSeats.scan(); window.capacitydNotes.scan();
  return Array.from(document.querySelectorAll('style'), s => s.getAttribute('data-capacityd-style') + ':' + (s.parentNode === document.head) + ':' + (s.sheet !== null));
})()`))
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"seats:true:true", "note-buttons:true:true"}, styles)
		screenshot(t, ctx)
	}
}

// requireSameStyle checks that two computed styles of an element are
// the same, naming the properties that differ.
func requireSameStyle(t *testing.T, want, got map[string]string, sel string) {
	t.Helper()
	var diff []string
	for p, v := range want {
		if got[p] != v {
			diff = append(diff, fmt.Sprintf("%s: %q, was %q", p, got[p], v))
		}
	}
	for p, v := range got {
		if _, ok := want[p]; !ok {
			diff = append(diff, fmt.Sprintf("%s: %q, was not there", p, v))
		}
	}
	sort.Strings(diff)
	require.Empty(t, diff, "the widgets changed the look of the site's own %s", sel)
}

// themeCSS themes the widgets as a site would: custom properties for the
// whole page, one for a card only, a rule of the same weight as the
// default look's (which wins where it comes after it) and a heavier one
// (which always wins).
const themeCSS = `:root {
  --capacityd-font: Georgia, serif;
  --capacityd-font-size: 20px;
  --capacityd-button-background: rgb(122, 46, 14);
}
.card { --capacityd-seats-color: rgb(1, 2, 3); }
.capacityd-seats { padding: 0px; }
html .capacityd-note .capacityd-note-water { color: rgb(7, 8, 9); }
`

// TestWidgetsThemedBySite embeds both widgets in a page whose own style
// sets custom properties and overrides rules: the site's values win,
// where the page lets inline styles in (the default look is a <style>
// element first in the head) and where its Content-Security-Policy does
// not (the default look is then a constructed style sheet, after the
// page's own: there a rule of the page of the same weight as the default
// look's loses).
func TestWidgetsThemedBySite(t *testing.T) {
	t.Parallel()
	svc := statesService(t)
	site := newPages(t)
	site.add("/theme.css", themeCSS)
	body := `<div class="card"><div id="carded" data-seats-activity="a_live"></div></div>` + defaultLookWidgets
	pages := map[string]string{
		"inline style": site.add("/inline", hostPage("en", "<style>\n"+themeCSS+"</style>", body, svc.URL, "")),
		"strict CSP": site.add("/csp", hostPage("en", `<meta http-equiv="Content-Security-Policy" content="style-src 'self'">`+
			`<link rel="stylesheet" href="/theme.css">`, body, svc.URL, "")),
	}
	ctx := tab(t)
	for name, page := range pages {
		t.Run(name, func(t *testing.T) {
			do(t, ctx, 10*time.Second, append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(page)}, waitDefaultLookWidgets("en")...)...)
			padding := "0px" // .capacityd-seats { padding: 0px; } comes after the default look
			if name == "strict CSP" {
				padding = "4px" // .2em: the default look comes after
			}
			require.Equal(t, map[string]string{
				"font-family": "Georgia, serif", "font-size": "20px", "color": defaultSeatsColor,
				"background-color": defaultSeatsBackground, "padding-top": padding,
			}, styleOf(t, ctx, "#seats", "font-family", "font-size", "color", "background-color", "padding-top"))
			require.Equal(t, "rgb(1, 2, 3)", styleOf(t, ctx, "#carded", "color")["color"], "a custom property of the card only")
			require.Equal(t, map[string]string{
				"font-family": "Georgia, serif", "font-size": "20px", "background-color": "rgb(122, 46, 14)",
				"color": "rgb(7, 8, 9)", "border-top-left-radius": "10px",
			}, styleOf(t, ctx, "#note .note-water", "font-family", "font-size", "background-color", "color", "border-top-left-radius"))
			// The site's own button keeps the browser's look.
			require.Equal(t, browserButtonBackground, styleOf(t, ctx, "#host-button", "background-color")["background-color"])

			how, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[
  Array.from(document.querySelectorAll('style[data-capacityd-style]')).filter(s => s.sheet !== null).length,
  document.adoptedStyleSheets.length]`))
			require.NoError(t, err)
			if name == "strict CSP" {
				require.Equal(t, []int{0, 2}, how, "the policy refuses the <style> elements: constructed sheets")
			} else {
				require.Equal(t, []int{2, 0}, how)
			}
			screenshot(t, ctx)
		})
	}
}

// TestWidgetsWithoutTheirStyle embeds both widgets with data-style="none"
// on their script tags: no <style> element, and the browser's own look.
func TestWidgetsWithoutTheirStyle(t *testing.T) {
	t.Parallel()
	svc := statesService(t)
	site := newPages(t)
	page := site.add("/plain", hostPage("en", "", defaultLookWidgets, svc.URL, ` data-style="none"`))
	ctx := tab(t)
	do(t, ctx, 10*time.Second, append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(page)}, waitDefaultLookWidgets("en")...)...)
	require.Zero(t, countOf(t, ctx, "style"))
	require.Equal(t, browserButtonBackground, styleOf(t, ctx, "#note .note-water", "background-color")["background-color"])
	require.Equal(t, "rgba(0, 0, 0, 0)", styleOf(t, ctx, "#seats", "background-color")["background-color"])
	// The hooks are there all the same.
	require.Equal(t, 1, countOf(t, ctx, "#seats.capacityd-seats[data-seats-state=live][data-seats-remaining='7']"))
	require.Equal(t, 1, countOf(t, ctx, "#full.capacityd-seats.seats-full"))
	require.Equal(t, 1, countOf(t, ctx, "#note.capacityd-note[data-note-state=ok] .capacityd-note-water.note-water"))
}

// TestStyleHashes checks widget.StyleHashes, which the demo page's
// Content-Security-Policy lets in, against the <style> elements the
// scripts add.
func TestStyleHashes(t *testing.T) {
	t.Parallel()
	svc := statesService(t)
	site := newPages(t)
	page := site.add("/hashes", hostPage("en", "", defaultLookWidgets, svc.URL, ""))
	ctx := tab(t)
	do(t, ctx, 10*time.Second, append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(page)}, waitDefaultLookWidgets("en")...)...)
	var hashes []string
	for _, name := range []string{"seats", "note-buttons"} {
		css, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector('style[data-capacityd-style=%q]').textContent`, name)))
		require.NoError(t, err)
		sum := sha256.Sum256([]byte(css))
		hashes = append(hashes, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	require.Equal(t, hashes, widget.StyleHashes, "widget.StyleHashes must be the hashes of the default looks of seats.js and note-buttons.js")
}

// TestWidgetsTellTheConsoleNotTheVisitor embeds widgets of an activity
// that does not exist, of a note the service does not count, of a note
// whose writes it refuses to this site, and a note element whose id is
// not a note id: the visitor sees neutral widgets ("—", the numbers
// without the Water button), and the console says what is wrong, once.
func TestWidgetsTellTheConsoleNotTheVisitor(t *testing.T) {
	t.Parallel()
	svc := statesService(t)
	site := newPages(t)
	body := `<div id="missing" data-seats-activity="a_missing"></div>
<div id="missing-again" data-seats-activity="a_missing"></div>
<div id="unknown" data-note="n_unknown"></div>
<div id="refused" data-note="n_refused"></div>
<div id="bad" data-note="not a note">kept</div>`
	ctx := tab(t)
	console := watchConsole(t, ctx)
	for i, lang := range []string{"en", "zh-CN"} {
		page := site.add("/console-"+lang, hostPage(lang, "", body, svc.URL, ""))
		views, waters := "\u2014 views", "\u2014 waters"
		if lang != "en" {
			views, waters = "\u2014 次浏览", "\u2014 次浇水"
		}
		do(t, ctx, 10*time.Second,
			chromedp.Navigate(page),
			waitAttr("#missing", "data-seats-state", "missing", 10*time.Second),
			waitText("#missing", "\u2014", time.Second),
			waitText("#missing-again", "\u2014", time.Second),
			waitAttr("#unknown", "data-note-state", "unknown", 5*time.Second),
			waitText("#unknown .note-views", views, time.Second),
			waitText("#unknown .note-waters", waters, time.Second),
			waitAttr("#refused", "data-note-state", "refused", 5*time.Second),
		)
		console.waitFor(t, chromedp.ConsoleError, `capacityd seats: there is no activity "a_missing" at `+svc.URL, i+1, 2*time.Second)
		console.waitFor(t, chromedp.ConsoleError, `capacityd note buttons: the service at `+svc.URL+` does not count note "n_unknown" (404)`, i+1, time.Second)
		console.waitFor(t, chromedp.ConsoleError, `record views and waters of note "n_refused": its CORS_ALLOWED_ORIGINS setting lists other sites`, i+1, time.Second)
		console.waitFor(t, chromedp.ConsoleWarning, `capacityd note buttons: data-note="not a note" is not a note id`, i+1, time.Second)

		require.Equal(t, "kept", text(t, ctx, "#bad"))
		require.Empty(t, text(t, ctx, "#unknown .note-status"))
		require.Empty(t, text(t, ctx, "#refused .note-status"))
		require.Equal(t, 0, countOf(t, ctx, "#missing[data-seats-remaining], #missing.seats-full"))
		hidden, err := chromedp.Run(ctx, chromedp.Evaluate[[]bool](`Array.from(document.querySelectorAll('.note-water'), b => b.hidden && b.disabled && b.offsetParent === null)`))
		require.NoError(t, err)
		require.Equal(t, []bool{true, true}, hidden, "no Water button where a water cannot be recorded")
		shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		require.NoError(t, err)
		for _, word := range []string{"nknown", "not", "register", "allowed", "site", "未知", "登记", "未获准"} {
			require.NotContains(t, strings.ReplaceAll(shown, "of the site", ""), word)
		}
		screenshot(t, ctx)
	}
}

// stateSeats are the seats that statesService's seat streams send, by
// activity id.
var stateSeats = map[string]string{
	"a_live":         `{"activity_id":"a_live","capacity":20,"taken":13,"remaining":7,"waiting":0}`,
	"a_waiting":      `{"activity_id":"a_waiting","capacity":6,"taken":5,"remaining":1,"waiting":1}`,
	"a_full":         `{"activity_id":"a_full","capacity":20,"taken":20,"remaining":0,"waiting":0}`,
	"a_full_waiting": `{"activity_id":"a_full_waiting","capacity":20,"taken":20,"remaining":0,"waiting":3}`,
	"a_reconnecting": `{"activity_id":"a_reconnecting","capacity":20,"taken":13,"remaining":7,"waiting":0}`,
}

// stateStats are the numbers of statesService's notes.
const stateStats = `{"note_id":"n","views":128,"waters":12}`

// statesService is a stub of capacityd whose activities and notes are
// each in one state, the states docs/widgets.md shows:
//
//   - a_live, a_waiting, a_full, a_full_waiting: a seat stream that sends
//     stateSeats and stays open;
//   - a_loading: a seat stream that sends nothing;
//   - a_reconnecting: a seat stream that sends stateSeats and closes,
//     and seat reads that never answer;
//   - a_missing: 404;
//   - n_ok: views and waters answer stateStats;
//   - n_watering: a water never answers;
//   - n_refused: writes are refused without CORS headers (as capacityd
//     refuses a site its CORS_ALLOWED_ORIGINS does not list);
//   - n_unknown: 404 (a note the registered notes mode does not count);
//   - n_unreachable: every connection is dropped;
//   - n_failed: views answer 503;
//   - n_limited: waters answer 429.
//
// Notes' stats read stateStats, except where said.
func statesService(t *testing.T) *httptest.Server {
	t.Helper()
	stop := make(chan struct{})
	svc := stubService(t, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		fail := func(status int, code string) {
			h.Set("Access-Control-Allow-Origin", "*")
			h.Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"code":%q,"message":"stub"}}`, code)
		}
		ok := func(body string) {
			h.Set("Access-Control-Allow-Origin", "*")
			h.Set("Content-Type", "application/json; charset=utf-8")
			fmt.Fprint(w, body)
		}
		hang := func() {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		}
		if rest, found := strings.CutPrefix(r.URL.Path, "/v1/activities/"); found {
			id, what, _ := strings.Cut(rest, "/")
			seats, known := stateSeats[id]
			switch {
			case id == "a_loading" && what == "seats/stream":
				h.Set("Access-Control-Allow-Origin", "*")
				h.Set("Content-Type", "text/event-stream; charset=utf-8")
				w.(http.Flusher).Flush()
				hang()
			case id == "a_loading", id == "a_reconnecting" && what == "seats":
				hang()
			case known && what == "seats/stream":
				h.Set("Access-Control-Allow-Origin", "*")
				h.Set("Content-Type", "text/event-stream; charset=utf-8")
				fmt.Fprint(w, "event: seats\ndata: "+seats+"\n\n")
				w.(http.Flusher).Flush()
				if id != "a_reconnecting" {
					hang()
				}
			case known && what == "seats":
				ok(seats)
			default:
				fail(http.StatusNotFound, "not_found")
			}
			return
		}
		rest, _ := strings.CutPrefix(r.URL.Path, "/v1/notes/")
		id, what, _ := strings.Cut(rest, "/")
		write := r.Method == http.MethodPost
		switch {
		case id == "n_unreachable":
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		case id == "n_unknown":
			fail(http.StatusNotFound, "not_found")
		case id == "n_refused" && write:
			w.WriteHeader(http.StatusForbidden)
		case id == "n_watering" && what == "waters":
			hang()
		case id == "n_failed" && what == "views":
			fail(http.StatusServiceUnavailable, "unavailable")
		case id == "n_limited" && what == "waters":
			fail(http.StatusTooManyRequests, "rate_limited")
		default:
			ok(stateStats)
		}
	})
	t.Cleanup(func() { close(stop) })
	return svc
}
