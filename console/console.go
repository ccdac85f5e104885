// Package console is the organisers' web console: server-rendered pages
// (html/template, from templates/) and their static files (static/),
// embedded in the binary, behind one http.Handler for the paths under
// Prefix (/console). The API's router is to mount it there beside the API
// (echo.WrapHandler on /console and /console/*), so that its requests go
// through the same middleware as the API's.
//
// The console is a client of the same services as the API (registration,
// note, webhook, onsale): it is to call them in process, through
// interfaces it declares for what it reads and changes, so that every
// seat rule stays in the domain and nothing here duplicates it. It has no
// page but an empty home yet, and the server does not mount it.
package console

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
)

// Prefix is the path the console is mounted under.
const Prefix = "/console"

// Templates are the console's page templates: templates/layout.html, the
// frame of every page, which fills in the page's "title" and "main", and
// one templates/NAME.html per page that defines them.
//
//go:embed templates/*.html
var Templates embed.FS

//go:embed static
var staticFiles embed.FS

// csp is the Content-Security-Policy of the console's pages: their own
// scripts, styles and requests only.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler serves the console: its pages at Prefix+"/" and below, its
// static files under Prefix+"/static/".
type Handler struct {
	// pages are the templates of each page (templates/NAME.html but
	// layout.html), each with the layout it fills.
	pages  map[string]*template.Template
	static http.Handler
}

// New returns the console's Handler, its templates parsed.
func New() (*Handler, error) {
	layout, err := template.ParseFS(Templates, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(Templates, "templates/*.html")
	if err != nil {
		return nil, err
	}
	h := &Handler{pages: make(map[string]*template.Template)}
	for _, name := range names {
		if name == "templates/layout.html" {
			continue
		}
		page, err := template.Must(layout.Clone()).ParseFS(Templates, name)
		if err != nil {
			return nil, err
		}
		h.pages[strings.TrimSuffix(strings.TrimPrefix(name, "templates/"), ".html")] = page
	}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	h.static = http.StripPrefix(Prefix+"/static/", http.FileServerFS(static))
	return h, nil
}

// ServeHTTP serves a request whose path starts with Prefix.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path, ok := strings.CutPrefix(r.URL.Path, Prefix)
	switch {
	case !ok:
		http.NotFound(w, r)
	case strings.HasPrefix(path, "/static/"):
		if strings.HasSuffix(path, "/") {
			http.NotFound(w, r) // no listing of the files
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.static.ServeHTTP(w, r)
	case path == "" || path == "/":
		h.render(w, r, "home", nil)
	default:
		http.NotFound(w, r)
	}
}

// render writes the page of template name with data, or a 500 that says
// nothing of the template when it fails.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", data); err != nil {
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}
