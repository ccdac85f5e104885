package widget_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/browsertest"
)

// widgetTextLangs are the languages the widgets speak: the lang that the
// scripts give the elements whose text they write.
var widgetTextLangs = []string{"en", "zh-TW", "zh-CN"}

// queueState is a state of an admission queue of queueService: the
// ticket that joining and asking answer, and what the queue widget says
// of it, by language.
type queueState struct {
	id, ticket string
	text       map[string]string
}

// queueStates are the queues of queueService, one per state the queue
// widget shows. docs/widgets.md lists their text in every language.
var queueStates = []queueState{
	{id: "q_waiting", ticket: `{"state":"waiting","position":2,"ahead":1,"estimated_wait_seconds":3600,"poll_after_ms":60000}`,
		text: map[string]string{"en": "You are number 2 in line · about 60 min", "zh-TW": "您的順位：第 2 位 · 預計等候約 60 分鐘", "zh-CN": "您排在第 2 位 · 约 60 分钟"}},
	{id: "q_soon", ticket: `{"state":"waiting","position":1,"ahead":0,"estimated_wait_seconds":20,"poll_after_ms":60000}`,
		text: map[string]string{"en": "You are number 1 in line · about a minute", "zh-TW": "您的順位：第 1 位 · 預計等候約 1 分鐘", "zh-CN": "您排在第 1 位 · 约 1 分钟"}},
	{id: "q_drawn", ticket: `{"state":"waiting","position":null,"ahead":null,"estimated_wait_seconds":null,"poll_after_ms":60000}`,
		text: map[string]string{"en": "You are in line. Places are drawn at random when registration opens.",
			"zh-TW": "您已加入排隊，開放報名時將隨機決定順位。", "zh-CN": "您已在队列中，开放报名时将随机排序。"}},
	{id: "q_admitted", ticket: `{"state":"admitted","position":1,"admission_token":"adm_stub","token_expires_at":"2026-11-29T10:10:00Z","poll_after_ms":60000}`,
		text: map[string]string{"en": "It’s your turn: sign up now", "zh-TW": "輪到您了，請立即報名", "zh-CN": "轮到您了，请立即报名"}},
	{id: "q_used", ticket: `{"state":"used","position":1,"poll_after_ms":60000}`,
		text: map[string]string{"en": "You are signed up", "zh-TW": "您已完成報名", "zh-CN": "您已报名"}},
	{id: "q_expired", ticket: `{"state":"expired","position":1,"poll_after_ms":60000}`,
		text: map[string]string{"en": "Your place in line has lapsed", "zh-TW": "您的排隊順位已失效", "zh-CN": "您的排队资格已失效"}},
	{id: "q_sold_out", ticket: `{"state":"sold_out","position":null,"poll_after_ms":60000}`,
		text: map[string]string{"en": "Sold out", "zh-TW": "已額滿", "zh-CN": "已售罄"}},
}

// queueService is a stub of capacityd that serves the widget scripts and
// whose admission queues (queueStates) answer their ticket to joining and
// asking, for any token, from any site; other queues answer 404.
func queueService(t *testing.T) *httptest.Server {
	t.Helper()
	tickets := map[string]string{}
	for _, q := range queueStates {
		tickets[q.id] = q.ticket
	}
	return stubService(t, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", "Authorization")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Content-Type", "application/json; charset=utf-8")
		rest, _ := strings.CutPrefix(r.URL.Path, "/v1/activities/")
		id, what, _ := strings.Cut(rest, "/")
		ticket, ok := tickets[id]
		if !ok || (what != "queue" && what != "queue/me") {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"code":"not_found","message":"stub"}}`)
			return
		}
		fmt.Fprint(w, strings.Replace(ticket, "{", fmt.Sprintf(`{"activity_id":%q,"user_id":"visitor",`, id), 1))
	})
}

// twWidgets are the widgets of TestWidgetsSpeakTraditionalChinese, each
// with the attributes attrs: seats (live, with people waiting, full, full
// with people waiting) of statesService, note buttons of statesService
// (with numbers, and refusing waters as too soon) and the queue widget of
// queueService in each of queueStates.
func twWidgets(attrs string) string {
	var b strings.Builder
	for _, id := range []string{"a_live", "a_waiting", "a_full", "a_full_waiting"} {
		fmt.Fprintf(&b, "<div id=%q data-seats-activity=%q%s></div>\n", id, id, attrs)
	}
	fmt.Fprintf(&b, "<div id=\"n_ok\" data-note=\"n_ok\"%s></div>\n<div id=\"n_limited\" data-note=\"n_limited\"%s></div>\n", attrs, attrs)
	for _, q := range queueStates {
		fmt.Fprintf(&b, "<p id=%q data-queue-activity=%q data-queue-token=\"user-token\"%s></p>\n", q.id, q.id, attrs)
	}
	return b.String()
}

// twFallbacks are widgets that speak another language than the page
// around them: those whose lang the widgets do not speak (French,
// Japanese, German, Cantonese) speak English; data-lang overrides the
// lang around the element.
const twFallbacks = `<div id="fr" lang="fr" data-seats-activity="a_full"></div>
<div id="ja" lang="ja-JP" data-note="n_ok"></div>
<p id="de" lang="de" data-queue-activity="q_sold_out" data-queue-token="user-token"></p>
<div id="yue" lang="yue-Hant-HK" data-seats-activity="a_full"></div>
<div id="hans" data-lang="zh-Hans" lang="zh-TW" data-seats-activity="a_full"></div>`

// TestWidgetsSpeakTraditionalChinese embeds the three widgets in pages of
// another site, in Traditional Chinese two ways: each element with
// lang="zh-TW" on an English page, and no lang of their own on a page
// whose lang is zh-Hant-TW. Every state reads in Taiwanese wording
// (remaining seats, full, waiting list, views and waters, the refusal of
// a water too soon, each place in the queue), the elements get lang
// zh-TW, and the default look takes Traditional Chinese fonts; the
// widgets of languages they do not speak speak English.
func TestWidgetsSpeakTraditionalChinese(t *testing.T) {
	t.Parallel()
	svc, queue := statesService(t), queueService(t)
	site := newPages(t)
	queueScript := fmt.Sprintf(`<script src="%s/widget/queue.js" async></script>`, queue.URL)
	pages := map[string]string{
		"element lang": site.add("/element", hostPage("en", "",
			twWidgets(` lang="zh-TW"`)+`<div id="page-lang" data-seats-activity="a_full"></div>`+queueScript, svc.URL, "")),
		"page lang": site.add("/page", hostPage("zh-Hant-TW", "",
			twWidgets("")+twFallbacks+queueScript, svc.URL, "")),
	}
	ctx := tab(t)
	for name, page := range pages {
		t.Run(name, func(t *testing.T) {
			steps := []chromedp.Action[chromedp.Void]{
				chromedp.Navigate(page),
				waitText("#a_live", "剩餘 7 / 20 個名額", 5*time.Second),
				waitText("#a_waiting", "剩餘 1 / 6 個名額 · 候補 1 人", time.Second),
				waitText("#a_full", "已額滿", time.Second),
				waitText("#a_full_waiting", "已額滿 · 候補 3 人", time.Second),
				waitText("#n_ok .note-counts", "128 次瀏覽 · 12 次澆水", 5*time.Second),
				waitText("#n_ok .note-water", "澆水", time.Second),
				waitText("#n_limited .note-views", "128 次瀏覽", 5*time.Second),
				chromedp.Click("#n_limited .note-water"),
				waitAttr("#n_limited", "data-note-state", "limited", 5*time.Second),
				waitText("#n_limited .note-status", "澆水太頻繁，請稍後再試", time.Second),
			}
			for _, q := range queueStates {
				steps = append(steps, waitText("#"+q.id, q.text["zh-TW"], 5*time.Second))
			}
			if name == "page lang" {
				steps = append(steps,
					waitText("#fr", "Full", time.Second),
					waitText("#ja .note-counts", "128 views · 12 waters", time.Second),
					waitText("#ja .note-water", "Water", time.Second),
					waitText("#de", "Sold out", 5*time.Second),
					waitText("#yue", "Full", time.Second),
					waitText("#hans", "已满", time.Second),
				)
			} else {
				steps = append(steps, waitText("#page-lang", "Full", time.Second))
			}
			do(t, ctx, 20*time.Second, steps...)

			langs, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(() => {
  const out = {};
  for (const el of document.querySelectorAll('[data-seats-activity], [data-note], [data-queue-activity]')) { out[el.id] = el.lang; }
  return out;
})()`))
			require.NoError(t, err)
			for id, lang := range langs {
				want := "zh-TW"
				switch id {
				case "fr", "ja", "de", "yue", "page-lang":
					want = "en"
				case "hans":
					want = "zh-CN"
				}
				require.Equal(t, want, lang, "the lang of #%s: the language of its text", id)
			}
			for _, sel := range []string{"#a_live", "#n_ok", "#n_ok .note-water"} {
				family := styleOf(t, ctx, sel, "font-family")["font-family"]
				require.Contains(t, family, `"Noto Sans CJK TC"`, sel)
				require.NotContains(t, family, "CJK SC", sel)
			}
			if name == "page lang" {
				require.Contains(t, styleOf(t, ctx, "#fr", "font-family")["font-family"], `"Noto Sans CJK SC"`, "the default font outside zh-TW")
			}
			screenshot(t, ctx)
		})
	}
}

// langCase is a language tag and the language of the widgets' text for
// it.
type langCase struct{ tag, want string }

// langCases are the language tags of TestWidgetLanguageTags: Chinese in
// the Traditional script or of Taiwan, Hong Kong or Macao is zh-TW, any
// other Chinese zh-CN, anything else English; case and separator do not
// matter.
var langCases = []langCase{
	{"zh-TW", "zh-TW"}, {"zh-tw", "zh-TW"}, {"ZH-TW", "zh-TW"}, {"zh_TW", "zh-TW"},
	{"zh-Hant", "zh-TW"}, {"zh-hant", "zh-TW"}, {"zh-Hant-TW", "zh-TW"}, {"zh-HANT-tw", "zh-TW"},
	{"zh-HK", "zh-TW"}, {"zh-Hant-HK", "zh-TW"}, {"zh-MO", "zh-TW"}, {"zh-Hant-MO", "zh-TW"},
	{"zh-Hant-CN", "zh-TW"}, {"zh-cmn-Hant-TW", "zh-TW"}, {"zh-TW-u-ca-roc", "zh-TW"},
	{"zh", "zh-CN"}, {"ZH", "zh-CN"}, {"zh-CN", "zh-CN"}, {"zh-cn", "zh-CN"}, {"zh_CN", "zh-CN"},
	{"zh-Hans", "zh-CN"}, {"zh-Hans-CN", "zh-CN"}, {"zh-SG", "zh-CN"}, {"zh-Hans-SG", "zh-CN"},
	{"zh-Hans-TW", "zh-CN"}, {"zh-Hans-HK", "zh-CN"}, {"zh-x-tw", "zh-CN"},
	{"en", "en"}, {"en-US", "en"}, {"en-TW", "en"}, {"fr", "en"}, {"ja-JP", "en"}, {"de", "en"},
	{"yue-Hant-HK", "en"}, {"Hant", "en"}, {"tw", "en"},
}

// langSays is what the widgets of TestWidgetLanguageTags say in each
// language: the seats of a_full, the Water button, and the queue widget of
// q_sold_out.
var langSays = map[string]string{
	"en":    "Full | Water | Sold out",
	"zh-TW": "已額滿 | 澆水 | 已額滿",
	"zh-CN": "已满 | 浇水 | 已售罄",
}

// TestWidgetLanguageTags gives the three widgets each of langCases, as the
// lang of an element around them and as their data-lang on a page in
// another language, and checks the language of their text and the lang
// they give their elements; and every state of the queue widget in every
// language. Without any lang, the widgets speak the browser's first
// language: the test's chromium's (en-US), or the one a page's script makes
// it say.
func TestWidgetLanguageTags(t *testing.T) {
	t.Parallel()
	svc, queue := statesService(t), queueService(t)
	site := newPages(t)
	ctx := tab(t)
	row := func(id, attrs string) string {
		return fmt.Sprintf(`<div class="row" id=%q%s><span data-seats-activity="a_full"></span> | <span data-note="n_ok"></span> | `+
			`<span data-queue-activity="q_sold_out" data-queue-token="user-token"></span></div>`+"\n", id, attrs)
	}
	var body strings.Builder
	var want []string
	for i, c := range langCases {
		body.WriteString(row(fmt.Sprint("lang-", i), fmt.Sprintf(" lang=%q", c.tag)))
		want = append(want, fmt.Sprintf("lang=%s: %s %s", c.tag, c.want, langSays[c.want]))
	}
	var data strings.Builder
	for i, c := range langCases {
		// data-lang on each widget, inside an element of a language the
		// widgets do not speak.
		data.WriteString(strings.ReplaceAll(row(fmt.Sprint("data-lang-", i), ` lang="ko"`), "<span ", fmt.Sprintf("<span data-lang=%q ", c.tag)))
		want = append(want, fmt.Sprintf("data-lang=%s: %s %s", c.tag, c.want, langSays[c.want]))
	}
	queueScript := fmt.Sprintf(`<script src="%s/widget/queue.js" async></script>`, queue.URL)
	page := site.add("/tags", hostPage("en", "", body.String()+data.String()+queueScript, svc.URL, ""))
	do(t, ctx, 20*time.Second, chromedp.Navigate(page), waitWidgetRows(len(langCases)*2))
	require.Equal(t, want, widgetRows(t, ctx))

	// Every state of the queue widget in every language.
	var queues strings.Builder
	for _, lang := range widgetTextLangs {
		for _, q := range queueStates {
			fmt.Fprintf(&queues, "<p class=\"queue\" data-lang=%q data-queue-activity=%q data-queue-token=\"user-token\"></p>\n", lang, q.id)
		}
	}
	page = site.add("/queues", hostPage("en", "", queues.String()+queueScript, "", ""))
	do(t, ctx, 10*time.Second, chromedp.Navigate(page), browsertest.WaitTrue(
		fmt.Sprintf(`document.querySelectorAll('.queue[data-queue-state]').length === %d`, len(widgetTextLangs)*len(queueStates)),
		5*time.Second, "every queue widget's ticket"))
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('.queue'), el => el.lang + ': ' + el.textContent)`))
	require.NoError(t, err)
	var said []string
	for _, lang := range widgetTextLangs {
		for _, q := range queueStates {
			said = append(said, lang+": "+q.text[lang])
		}
	}
	require.Equal(t, said, shown)

	// No lang anywhere: the browser's language.
	browser := []struct{ name, languages, want string }{
		{"chromium's", "", "en"},
		{"zh-TW", `['zh-TW', 'en-US']`, "zh-TW"},
		{"zh-HK", `['zh-HK', 'zh']`, "zh-TW"},
		{"zh-CN", `['zh-CN', 'zh-TW']`, "zh-CN"},
		{"fr", `['fr-FR', 'zh-TW']`, "en"},
	}
	for _, b := range browser {
		head := ""
		if b.languages != "" {
			head = fmt.Sprintf(`<script>Object.defineProperty(navigator, 'languages', {get: function () { return %[1]s; }});
Object.defineProperty(navigator, 'language', {get: function () { return %[1]s[0]; }});</script>`, b.languages)
		}
		page := site.add("/browser-"+b.name, strings.Replace(hostPage("", head, row("browser", "")+queueScript, svc.URL, ""), ` lang=""`, "", 1))
		do(t, ctx, 10*time.Second, chromedp.Navigate(page), waitWidgetRows(1))
		require.Equal(t, []string{"no lang: " + b.want + " " + langSays[b.want]}, widgetRows(t, ctx), "a browser whose language is %s", b.name)
	}
}

// widgetRows describes the widget rows of TestWidgetLanguageTags, each as
// "lang=TAG: LANG TEXT" (the lang around them), "data-lang=TAG: LANG TEXT"
// (their data-lang) or "no lang: LANG TEXT": LANG is the lang the widgets
// gave their elements (the three, comma-separated, when they differ), TEXT
// as in langSays.
func widgetRows(t *testing.T, ctx context.Context) []string {
	t.Helper()
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('.row'), row => {
  const w = row.querySelectorAll('[data-seats-activity], [data-note], [data-queue-activity]');
  const langs = Array.from(w, el => el.lang);
  const tag = w[0].hasAttribute('data-lang') ? 'data-lang=' + w[0].getAttribute('data-lang') :
    (row.hasAttribute('lang') ? 'lang=' + row.lang : 'no lang');
  const says = w[0].textContent + ' | ' + w[1].querySelector('.note-water').textContent + ' | ' + w[2].textContent;
  return tag + ': ' + (langs.every(l => l === langs[0]) ? langs[0] : langs.join(',')) + ' ' + says;
})`))
	require.NoError(t, err)
	return rows
}

// waitWidgetRows waits until the n widget rows of TestWidgetLanguageTags
// show their numbers and tickets.
func waitWidgetRows(n int) chromedp.Action[chromedp.Void] {
	return browsertest.WaitTrue(fmt.Sprintf(`document.querySelectorAll('.row [data-seats-remaining="0"]').length === %[1]d &&
  document.querySelectorAll('.row [data-note-views="128"]').length === %[1]d &&
  document.querySelectorAll('.row [data-queue-state="sold_out"]').length === %[1]d`, n), 15*time.Second, fmt.Sprintf("%d rows of widgets", n))
}

// TestSeatWidgetInTraditionalChineseFollowsSignups follows an activity with
// a waiting list on a page in Traditional Chinese (zh-Hant-TW), with a
// widget in English beside: seats left, full, and the line.
func TestSeatWidgetInTraditionalChineseFollowsSignups(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateWaitlisted(t, "讀書會", 2)
	site := newPages(t)
	page := site.add("/zh-Hant-TW", fmt.Sprintf(`<!doctype html><html lang="zh-Hant-TW"><head><meta charset="utf-8"><title>讀書會</title></head><body>
<p>讀書會：<span id="tw" data-seats-activity="%[2]s"></span></p>
<p>Journal club: <span id="en" lang="en" data-seats-activity="%[2]s"></span></p>
<script src="%[1]s/widget/seats.js" async></script></body></html>`, inst.URL, id))

	ctx := tab(t)
	do(t, ctx, 10*time.Second,
		chromedp.Navigate(page),
		waitText("#tw", "剩餘 2 / 2 個名額", 5*time.Second),
		waitText("#en", "2 of 2 seats left", time.Second),
	)
	signup := func(user string) {
		t.Helper()
		_, err := inst.Signup(t, id, user)
		require.NoError(t, err)
	}
	signup("u0")
	do(t, ctx, 5*time.Second, waitText("#tw", "剩餘 1 / 2 個名額", 2*time.Second))
	signup("u1")
	do(t, ctx, 5*time.Second, waitText("#tw", "已額滿", 2*time.Second), waitText("#en", "Full", time.Second))
	signup("u2")
	signup("u3")
	do(t, ctx, 5*time.Second, waitText("#tw", "已額滿 · 候補 2 人", 2*time.Second), waitText("#en", "Full · 2 waiting", time.Second))
	full, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('#tw').classList.contains('seats-full')`))
	require.NoError(t, err)
	require.True(t, full)
	screenshot(t, ctx)
}
