package widget_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/httpapi/widget"
	"github.com/physiciansnet/capacityd/internal/test/browsertest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// widgetState is a state of a widget that docs/widgets.md shows, with
// the element that statesService puts in it and what to wait for.
type widgetState struct {
	// name names the pictures: docs/widgets/<name>.<lang>.png.
	name string
	// element is the widget's element.
	element string
	// click clicks the Water button once the numbers show.
	click bool
	// fades says the state's look comes with a transition.
	fades bool
	// sel is an element within the widget ("" for the widget's own),
	// which shows text (by language) or has the attribute attr = value.
	sel         string
	text        map[string]string
	attr, value string
}

// docLangs are the languages of the pictures: the page's lang.
var docLangs = []string{"en", "zh-TW", "zh-CN"}

// widgetStates are the states docs/widgets.md shows.
var widgetStates = []widgetState{
	{name: "seats-live", element: `<div data-seats-activity="a_live"></div>`,
		text: map[string]string{"en": "7 of 20 seats left", "zh-TW": "剩餘 7 / 20 個名額", "zh-CN": "剩余 7 / 20 个名额"}},
	{name: "seats-waiting", element: `<div data-seats-activity="a_waiting"></div>`,
		text: map[string]string{"en": "1 of 6 seats left · 1 waiting", "zh-TW": "剩餘 1 / 6 個名額 · 候補 1 人", "zh-CN": "剩余 1 / 6 个名额 · 1 人候补"}},
	{name: "seats-full", element: `<div data-seats-activity="a_full"></div>`,
		text: map[string]string{"en": "Full", "zh-TW": "已額滿", "zh-CN": "已满"}},
	{name: "seats-full-waiting", element: `<div data-seats-activity="a_full_waiting"></div>`,
		text: map[string]string{"en": "Full · 3 waiting", "zh-TW": "已額滿 · 候補 3 人", "zh-CN": "已满 · 3 人候补"}},
	{name: "seats-loading", element: `<div data-seats-activity="a_loading"></div>`,
		text: map[string]string{"en": "Loading seats…", "zh-TW": "名額載入中…", "zh-CN": "正在加载名额…"}},
	{name: "seats-reconnecting", element: `<div data-seats-activity="a_reconnecting"></div>`, fades: true,
		attr: "data-seats-state", value: "reconnecting"},
	{name: "seats-missing", element: `<div data-seats-activity="a_missing"></div>`,
		attr: "data-seats-state", value: "missing"},
	{name: "note-ok", element: `<div data-note="n_ok"></div>`,
		sel: ".note-views", text: map[string]string{"en": "128 views", "zh-TW": "128 次瀏覽", "zh-CN": "128 次浏览"}},
	{name: "note-watering", element: `<div data-note="n_watering"></div>`, click: true,
		sel: ".note-water", attr: "aria-busy", value: "true"},
	{name: "note-refused", element: `<div data-note="n_refused"></div>`,
		attr: "data-note-state", value: "refused"},
	{name: "note-unknown", element: `<div data-note="n_unknown"></div>`,
		attr: "data-note-state", value: "unknown"},
	{name: "note-unreachable", element: `<div data-note="n_unreachable"></div>`,
		attr: "data-note-state", value: "unreachable"},
	{name: "note-failed", element: `<div data-note="n_failed"></div>`,
		attr: "data-note-state", value: "failed"},
	{name: "note-limited", element: `<div data-note="n_limited"></div>`, click: true,
		attr: "data-note-state", value: "limited"},
}

// theme is a theming example of docs/widgets.md: a CSS block that starts
// with the comment /* theme: NAME */ and whose first rule is for the class
// of the element holding the widgets.
type theme struct{ name, class, css string }

var themeBlock = regexp.MustCompile("(?s)```css\n/\\* theme: ([a-z-]+) \\*/\n(\\.([a-z-]+) \\{.*?)```")

// docThemes returns the theming examples of docs/widgets.md.
func docThemes(t *testing.T, doc string) []theme {
	t.Helper()
	var out []theme
	for _, m := range themeBlock.FindAllStringSubmatch(doc, -1) {
		out = append(out, theme{name: m[1], css: m[2], class: m[3]})
	}
	require.NotEmpty(t, out, "docs/widgets.md has theming examples")
	return out
}

// readWidgetsDoc returns docs/widgets.md.
func readWidgetsDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "docs", "widgets.md"))
	require.NoError(t, err)
	return string(b)
}

// TestWidgetDocsPictures takes the pictures of docs/widgets.md in a
// headless chromium: every state of both widgets in every language, on a
// page of another origin with no style of its own, and the theming
// examples of the page, with their CSS as the page shows it. They go to
// the artifacts; with UPDATE_DOCS=1 also to docs/widgets/, which needs
// Chinese fonts, Traditional and Simplified (Debian: apt-get install
// fonts-noto-cjk).
func TestWidgetDocsPictures(t *testing.T) {
	t.Parallel()
	update := os.Getenv("UPDATE_DOCS") != ""
	if update {
		for _, lang := range []string{"zh-tw", "zh-cn"} {
			out, err := exec.Command("fc-list", ":lang="+lang).Output()
			require.NoError(t, err, "fc-list (fontconfig) tells whether a Chinese font is installed")
			require.NotEmpty(t, strings.TrimSpace(string(out)), "no %s font: install one (Debian: apt-get install fonts-noto-cjk) before UPDATE_DOCS=1", lang)
		}
	}
	docDir := filepath.Join(testenv.ModuleRoot(t), "docs", "widgets")
	artDir := filepath.Join(testenv.ArtifactsDir(t), t.Name())
	require.NoError(t, os.MkdirAll(artDir, 0o755))
	save := func(name string, png []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(artDir, name), png, 0o644))
		if update {
			require.NoError(t, os.MkdirAll(docDir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(docDir, name), png, 0o644))
		}
	}

	svc := statesService(t)
	site := newPages(t)
	// The wrappers only frame the pictures: the widgets get no style of
	// the page.
	frame := `<style>body { margin: 0; background: #fff; } .shot { display: inline-block; padding: 10px; vertical-align: top; }</style>`
	ctx := tab(t)
	for _, lang := range docLangs {
		// A page for each state: a browser opens at most six connections
		// to a server of HTTP/1.1, and states hold theirs open (a page
		// navigated away from closes its own: see runWithBrowser).
		for _, s := range widgetStates {
			body := fmt.Sprintf("<div class=\"shot\" id=\"%s\">%s</div>", s.name, s.element)
			page := site.add("/"+s.name+"."+lang, hostPage(lang, frame, body, svc.URL, ""))
			el := "#" + s.name + " > div"
			steps := []chromedp.Action[chromedp.Void]{chromedp.Navigate(page)}
			if s.click {
				steps = append(steps, waitAttr(el, "data-note-views", "128", 5*time.Second), chromedp.Click(el+" .note-water"))
			}
			target := strings.TrimSpace(el + " " + s.sel)
			if s.text != nil {
				steps = append(steps, waitText(target, s.text[lang], 10*time.Second))
			}
			if s.attr != "" {
				steps = append(steps, waitAttr(target, s.attr, s.value, 10*time.Second))
			}
			if s.fades {
				// The seat badge's fade ends: no transition runs any more.
				steps = append(steps, browsertest.WaitTrue(fmt.Sprintf(`document.querySelector(%q).getAnimations({subtree: true}).length === 0`, el),
					2*time.Second, "the fade of "+el+" to end"))
			}
			do(t, ctx, 15*time.Second, steps...)
			png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS("#"+s.name)))
			require.NoError(t, err, s.name)
			save(s.name+"."+lang+".png", png)
		}
	}

	// The theming examples, in English.
	for _, th := range docThemes(t, readWidgetsDoc(t)) {
		body := fmt.Sprintf(`<div class="shot" id="theme"><div class="%s">
<div data-seats-activity="a_live"></div>
<div data-seats-activity="a_full_waiting"></div>
<div data-note="n_ok"></div>
</div></div>`, th.class)
		page := site.add("/theme-"+th.name, hostPage("en", frame+"<style>\n"+th.css+"</style>", body, svc.URL, ""))
		do(t, ctx, 10*time.Second,
			chromedp.Navigate(page),
			waitText(".shot [data-seats-activity=a_live]", "7 of 20 seats left", 5*time.Second),
			waitText(".shot [data-seats-activity=a_full_waiting]", "Full · 3 waiting", 5*time.Second),
			waitText(".shot .note-views", "128 views", 5*time.Second),
		)
		png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS("#theme")))
		require.NoError(t, err, th.name)
		save("theme-"+th.name+".en.png", png)
	}
}

// TestWidgetsDoc checks docs/widgets.md against the widgets: it shows the
// picture of every state in every language and of every theming example,
// and the pictures exist (UPDATE_DOCS=1 go test -run TestWidgetDocsPictures
// takes them); it lists every custom property the scripts read, and no
// other; it names every state of data-seats-state and data-note-state; and
// it gives the queue widget's text of every state in every language.
func TestWidgetsDoc(t *testing.T) {
	t.Parallel()
	doc := readWidgetsDoc(t)
	var pictures []string
	for _, s := range widgetStates {
		for _, lang := range docLangs {
			pictures = append(pictures, s.name+"."+lang+".png")
		}
	}
	for _, th := range docThemes(t, doc) {
		pictures = append(pictures, "theme-"+th.name+".en.png")
	}
	for _, p := range pictures {
		require.Contains(t, doc, "(widgets/"+p+")", "docs/widgets.md shows %s", p)
		_, err := os.Stat(filepath.Join(testenv.ModuleRoot(t), "docs", "widgets", p))
		require.NoError(t, err, "take the pictures with UPDATE_DOCS=1 go test ./httpapi/widget/ -run TestWidgetDocsPictures")
	}
	shown := regexp.MustCompile(`\(widgets/([^)]+\.png)\)`).FindAllStringSubmatch(doc, -1)
	for _, m := range shown {
		require.Contains(t, pictures, m[1], "docs/widgets.md shows a picture no test takes")
	}

	property := regexp.MustCompile(`--capacityd-[a-z-]*[a-z]`)
	var used []string
	for _, name := range []string{"seats.js", "note-buttons.js"} {
		b, ok := widget.Script(name)
		require.True(t, ok, name)
		used = append(used, property.FindAllString(string(b), -1)...)
	}
	slices.Sort(used)
	used = slices.Compact(used)
	// The properties documented are those of the table's first column.
	row := regexp.MustCompile("(?m)^\\| `(--capacityd-[a-z-]+)` \\|")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(doc, -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(listed)
	require.Equal(t, used, listed, "docs/widgets.md's table of custom properties lists those the scripts read")

	for _, state := range []string{"connecting", "live", "reconnecting", "missing", "ok", "refused", "unknown", "unreachable", "failed", "limited"} {
		require.Contains(t, doc, "`"+state+"`", "docs/widgets.md names the state %s", state)
	}
	for _, q := range queueStates {
		for _, lang := range widgetTextLangs {
			require.Contains(t, doc, "| "+q.text[lang]+" |", "docs/widgets.md gives the queue widget's text of %s in %s", q.id, lang)
		}
	}
}
