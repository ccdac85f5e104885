package console_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/console"
)

func get(t *testing.T, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w
}

// TestHomeIsRenderedInTheLayout: the home page fills the layout (its
// title, the console's stylesheet) and carries the strict headers of a
// page that loads only its own files.
func TestHomeIsRenderedInTheLayout(t *testing.T) {
	t.Parallel()
	h, err := console.New()
	require.NoError(t, err)
	for _, path := range []string{"/console", "/console/"} {
		w := get(t, h, http.MethodGet, path)
		require.Equal(t, http.StatusOK, w.Code, path)
		body := w.Body.String()
		require.True(t, strings.HasPrefix(body, "<!doctype html>"), body)
		require.Contains(t, body, "<title>Organiser console · capacityd console</title>")
		require.Contains(t, body, `<link rel="stylesheet" href="/console/static/console.css">`)
		require.Contains(t, body, "<h1>Organiser console</h1>")
		require.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
		require.Contains(t, w.Header().Get("Content-Security-Policy"), "default-src 'none'")
		require.Equal(t, "DENY", w.Header().Get("X-Frame-Options"))
		require.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	}
	w := get(t, h, http.MethodPost, "/console/")
	require.Equal(t, http.StatusMethodNotAllowed, w.Code)
	require.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
}

// TestStaticFilesAreServed: the stylesheet the layout links is served
// from the embedded static/ files; no listing, nothing outside them.
func TestStaticFilesAreServed(t *testing.T) {
	t.Parallel()
	h, err := console.New()
	require.NoError(t, err)
	w := get(t, h, http.MethodGet, "/console/static/console.css")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "text/css; charset=utf-8", w.Header().Get("Content-Type"))
	require.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
	require.Contains(t, w.Body.String(), "body {")
	for _, path := range []string{"/console/static/", "/console/static/nope.js", "/console/static/../console.go", "/console/nope", "/elsewhere"} {
		require.Equal(t, http.StatusNotFound, get(t, h, http.MethodGet, path).Code, path)
	}
}

// TestEveryPageHasItsTitleAndMain: every template but the layout defines
// the blocks the layout fills, so that New renders each of them.
func TestEveryPageHasItsTitleAndMain(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(console.Templates, "templates/*.html")
	require.NoError(t, err)
	require.Contains(t, names, "templates/layout.html")
	for _, name := range names {
		if name == "templates/layout.html" {
			continue
		}
		b, err := fs.ReadFile(console.Templates, name)
		require.NoError(t, err)
		require.Contains(t, string(b), `{{define "title"}}`, name)
		require.Contains(t, string(b), `{{define "main"}}`, name)
	}
}

// TestMountedUnderConsole: mounted in an echo router as the API's router
// is to mount it, the console answers every path under /console, and
// only those.
func TestMountedUnderConsole(t *testing.T) {
	t.Parallel()
	h, err := console.New()
	require.NoError(t, err)
	e := echo.New()
	e.Any(console.Prefix, echo.WrapHandler(h))
	e.Any(console.Prefix+"/*", echo.WrapHandler(h))
	require.Equal(t, http.StatusOK, get(t, e, http.MethodGet, "/console").Code)
	require.Equal(t, http.StatusOK, get(t, e, http.MethodGet, "/console/").Code)
	require.Equal(t, http.StatusOK, get(t, e, http.MethodGet, "/console/static/console.css").Code)
	require.Equal(t, http.StatusNotFound, get(t, e, http.MethodGet, "/console/nope").Code)
	require.Equal(t, http.StatusNotFound, get(t, e, http.MethodGet, "/consoles").Code)
}
