package console_test

import (
	"context"
	"crypto/sha512"
	"encoding/base64"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/console"
)

// memSessions keeps sessions in memory, for the tests of the console's
// own rules that need no service (the browser tests use the real store).
type memSessions struct {
	mu       sync.Mutex
	sessions map[string]console.Grant
	links    map[string]console.Grant
}

func newMemSessions() *memSessions {
	return &memSessions{sessions: map[string]console.Grant{}, links: map[string]console.Grant{}}
}

func (m *memSessions) CreateSession(_ context.Context, h []byte, g console.Grant) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions[string(h)] = g
	return nil
}

func (m *memSessions) Session(_ context.Context, h []byte) (console.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.sessions[string(h)]
	if !ok || time.Now().After(g.ExpiresAt) {
		return console.Grant{}, console.ErrNoSession
	}
	return g, nil
}

func (m *memSessions) RevokeSession(_ context.Context, h []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, string(h))
	return nil
}

func (m *memSessions) CreateLink(_ context.Context, h []byte, g console.Grant) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.links[string(h)] = g
	return nil
}

func (m *memSessions) UseLink(_ context.Context, h []byte) (console.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.links[string(h)]
	if !ok || time.Now().After(g.ExpiresAt) {
		return console.Grant{}, console.ErrNoSession
	}
	delete(m.links, string(h))
	return g, nil
}

func newHandler(t *testing.T) (*console.Handler, *memSessions) {
	t.Helper()
	st := newMemSessions()
	h, err := console.New(console.Config{Sessions: st, BaseURL: "http://localhost:8080"})
	require.NoError(t, err)
	return h, st
}

func get(t *testing.T, h http.Handler, method, path string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest(method, path, nil)
	for _, c := range cookies {
		r.AddCookie(c)
	}
	h.ServeHTTP(w, r)
	return w
}

// signIn uses a one-time link and returns the session's cookie.
func signIn(t *testing.T, h http.Handler, st console.SessionStore, sub string, roles ...string) *http.Cookie {
	t.Helper()
	link, err := console.NewLink(context.Background(), st, console.Grant{Sub: sub, Roles: roles}, time.Minute, time.Now())
	require.NoError(t, err)
	w := get(t, h, http.MethodGet, link)
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	require.Equal(t, "/console/", w.Header().Get("Location"))
	for _, c := range w.Result().Cookies() {
		if c.Name == "capacityd_console" {
			require.True(t, c.HttpOnly)
			require.Equal(t, http.SameSiteLaxMode, c.SameSite)
			return c
		}
	}
	t.Fatal("no session cookie")
	return nil
}

// TestStaticFilesAreServed: the stylesheet and scripts are served from the
// embedded static/ files; no listing, nothing outside them.
func TestStaticFilesAreServed(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t)
	w := get(t, h, http.MethodGet, "/console/static/console.css")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "text/css; charset=utf-8", w.Header().Get("Content-Type"))
	require.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
	require.Equal(t, http.StatusOK, get(t, h, http.MethodGet, "/console/static/console.js").Code)
	for _, path := range []string{"/console/static/", "/console/static/nope.js", "/elsewhere"} {
		require.Equal(t, http.StatusNotFound, get(t, h, http.MethodGet, path).Code, path)
	}
	// A path out of static/ is cleaned first: it names no static file.
	require.Equal(t, "/console/console.go", get(t, h, http.MethodGet, "/console/static/../console.go").Header().Get("Location"))
}

// TestVendoredHtmxIsTheOneItsPageNames: the htmx file embedded is the one
// whose integrity hash the layout's script tag carries, with its licence.
func TestVendoredHtmxIsTheOneItsPageNames(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t)
	js := get(t, h, http.MethodGet, "/console/static/vendor/htmx-2.0.11/htmx.min.js")
	require.Equal(t, http.StatusOK, js.Code)
	sum := sha512.Sum384(js.Body.Bytes())
	layout, err := fs.ReadFile(console.Templates, "templates/layout.html")
	require.NoError(t, err)
	require.Contains(t, string(layout), `integrity="sha384-`+base64.StdEncoding.EncodeToString(sum[:])+`"`)
	lic, err := os.ReadFile("static/vendor/htmx-2.0.11/LICENSE")
	require.NoError(t, err)
	require.Contains(t, string(lic), "Zero-Clause BSD")
}

// TestEveryPageHasItsTitleAndMain: every template but the layout defines
// the blocks the layout fills.
func TestEveryPageHasItsTitleAndMain(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(console.Templates, "templates/*.html")
	require.NoError(t, err)
	for _, name := range names {
		if name == "templates/layout.html" || strings.HasPrefix(name, "templates/_") {
			continue
		}
		b, err := fs.ReadFile(console.Templates, name)
		require.NoError(t, err)
		require.Contains(t, string(b), `{{define "title"}}`, name)
		require.Contains(t, string(b), `{{define "main"}}`, name)
	}
}

// textBetweenTags is the text of a template outside its tags and actions.
var (
	actions = regexp.MustCompile(`(?s){{.*?}}`)
	tags    = regexp.MustCompile(`(?s)<[^>]*>`)
	letters = regexp.MustCompile(`\pL{2,}`)
)

// TestTemplatesHoldNoWords: every word a page shows comes from the
// message catalogues; a template holds keys, markup and data only.
func TestTemplatesHoldNoWords(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(console.Templates, "templates/*.html")
	require.NoError(t, err)
	for _, name := range names {
		b, err := fs.ReadFile(console.Templates, name)
		require.NoError(t, err)
		text := tags.ReplaceAllString(actions.ReplaceAllString(string(b), " "), " ")
		require.Empty(t, letters.FindAllString(text, -1), "%s shows words of its own: put them in locales/", name)
	}
}

// TestSignedOutPagesSendToSignin: without a session a page sends the
// browser to sign in (and back afterwards); a change is refused.
func TestSignedOutPagesSendToSignin(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t)
	w := get(t, h, http.MethodGet, "/console/")
	require.Equal(t, http.StatusSeeOther, w.Code)
	require.Equal(t, "/console/signin?back="+url.QueryEscape("/console/"), w.Header().Get("Location"))
	require.Equal(t, http.StatusOK, get(t, h, http.MethodGet, "/console/signin").Code)
	require.Equal(t, http.StatusUnauthorized, get(t, h, http.MethodPost, "/console/signout").Code)
}

// TestALinkSignsInOnce: a one-time link starts a session, and is refused
// the second time; the session's pages carry strict headers.
func TestALinkSignsInOnce(t *testing.T) {
	t.Parallel()
	h, st := newHandler(t)
	link, err := console.NewLink(context.Background(), st, console.Grant{Sub: "ana", Roles: []string{"admin"}}, time.Minute, time.Now())
	require.NoError(t, err)
	first := get(t, h, http.MethodGet, link)
	require.Equal(t, http.StatusSeeOther, first.Code)
	require.Equal(t, http.StatusUnauthorized, get(t, h, http.MethodGet, link).Code)
	cookie := first.Result().Cookies()[0]
	home := get(t, h, http.MethodGet, "/console/", cookie)
	require.Equal(t, http.StatusOK, home.Code)
	require.Contains(t, home.Body.String(), "ana")
	require.Contains(t, home.Header().Get("Content-Security-Policy"), "script-src 'self'")
	require.NotContains(t, home.Header().Get("Content-Security-Policy"), "unsafe-inline")
	require.Equal(t, "DENY", home.Header().Get("X-Frame-Options"))
	require.Equal(t, "no-store", home.Header().Get("Cache-Control"))
}

// TestAFormWithoutItsTokenChangesNothing: signing out without the
// session's CSRF token is refused and the session goes on; with it, the
// session ends.
func TestAFormWithoutItsTokenChangesNothing(t *testing.T) {
	t.Parallel()
	h, st := newHandler(t)
	cookie := signIn(t, h, st, "ana", "admin")
	post := func(form url.Values) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/console/signout", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.AddCookie(cookie)
		h.ServeHTTP(w, r)
		return w
	}
	require.Equal(t, http.StatusForbidden, post(nil).Code)
	require.Equal(t, http.StatusForbidden, post(url.Values{"csrf": {"wrong"}}).Code)
	require.Equal(t, http.StatusOK, get(t, h, http.MethodGet, "/console/", cookie).Code)
	page := get(t, h, http.MethodGet, "/console/", cookie).Body.String()
	token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	require.NotNil(t, token)
	require.Equal(t, http.StatusSeeOther, post(url.Values{"csrf": {token[1]}}).Code)
	require.Equal(t, http.StatusSeeOther, get(t, h, http.MethodGet, "/console/", cookie).Code)
}

// TestTheLanguageIsTheBrowsersUntilChosen: Accept-Language picks zh-TW
// for Traditional Chinese (zh-Hant, zh-HK), zh-CN for Simplified and bare
// zh, English otherwise; the organiser's choice wins.
func TestTheLanguageIsTheBrowsersUntilChosen(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t)
	for accept, want := range map[string]string{
		"zh-TW": "zh-TW", "zh-Hant": "zh-TW", "zh-HK,en;q=0.5": "zh-TW", "zh-CN": "zh-CN", "zh": "zh-CN",
		"zh-Hans-SG": "zh-CN", "fr-FR": "en", "": "en", "en-GB,zh-TW;q=0.8": "en",
	} {
		r := httptest.NewRequest(http.MethodGet, "/console/signin", nil)
		r.Header.Set("Accept-Language", accept)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Contains(t, w.Body.String(), `<html lang="`+want+`">`, accept)
	}
	r := httptest.NewRequest(http.MethodGet, "/console/signin", nil)
	r.Header.Set("Accept-Language", "en")
	r.AddCookie(&http.Cookie{Name: "capacityd_lang", Value: "zh-TW"})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Contains(t, w.Body.String(), `<html lang="zh-TW">`)
	require.Contains(t, w.Body.String(), "登入")
}

// TestSafeBackNeverLeavesTheConsole: the page to go back to after
// signing in is a console path, never another site.
func TestSafeBackNeverLeavesTheConsole(t *testing.T) {
	t.Parallel()
	h, err := console.New(console.Config{Sessions: newMemSessions(), OIDC: console.OIDCConfig{Issuer: "http://127.0.0.1:1", ClientID: "c"}})
	require.NoError(t, err)
	for _, back := range []string{"https://evil.example/console", "//evil.example", "/console\\@evil", "/elsewhere"} {
		body := get(t, h, http.MethodGet, "/console/signin?back="+url.QueryEscape(back)).Body.String()
		require.Contains(t, body, `<a class="button" id="signin" href="/console/signin/start?back=%2fconsole%2f">`, back)
	}
}
