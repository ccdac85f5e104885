// Package console is the organisers' web console: server-rendered pages
// (html/template, from templates/) in English, Traditional and Simplified
// Chinese (locales/), their static files (static/, with htmx vendored),
// all embedded in the binary, behind one http.Handler for the paths under
// Prefix (/console). Every instance serves it; the API's router mounts it.
//
// Sign-in is OpenID Connect (authorization code with PKCE), or a one-time
// link made by `capacityd console-link` for development; a session is an
// HttpOnly cookie whose secret's hash is stored, so that signing out ends
// it on every instance. Every form carries a CSRF token bound to the
// session.
//
// The console is a client of the same services as the API (registration,
// checkin, attendance, webhook, onsale), called in process through the
// interfaces it declares for what it reads and changes, with the session's
// user as the caller: every seat rule stays in the domain, and every change
// is recorded with the actor the API would record. The live numbers come
// from the API's own streams (the display tier), never from a query of the
// console's.
package console

import (
	"cmp"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd/registration"
)

// Prefix is the path the console is mounted under.
const Prefix = "/console"

// Default lifetimes.
const (
	// DefaultSessionTTL is how long a console session lasts.
	DefaultSessionTTL = 12 * time.Hour
	// DefaultLinkTTL is how long a one-time sign-in link can be used.
	DefaultLinkTTL = 10 * time.Minute
	// requestTimeout bounds every page but the streams.
	requestTimeout = 10 * time.Second
)

// Templates are the console's page templates: templates/layout.html, the
// frame of every page, which fills in the page's "title" and "main", and
// one templates/NAME.html per page that defines them.
//
//go:embed templates/*.html
var Templates embed.FS

//go:embed static
var staticFiles embed.FS

// csp is the Content-Security-Policy of the console's pages: their own
// scripts, styles and requests only, and no inline script or style.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Config holds what the console is built on.
type Config struct {
	// Sessions stores sessions and one-time links.
	Sessions SessionStore
	// OIDC names the identity provider; without an issuer, sign-in is by
	// one-time link only.
	OIDC OIDCConfig
	// BaseURL is the service's public URL (scheme and host, e.g.
	// https://capacity.example.org): the OpenID Connect redirect is made
	// from it, and cookies are Secure when it is https. Empty: the
	// redirect is made from each request's host (the provider still checks
	// it against the client's registered redirects).
	BaseURL string
	// SessionTTL is a session's lifetime; zero: DefaultSessionTTL.
	SessionTTL time.Duration
	// TimeZone shows dates until the browser has said its own; nil: UTC.
	TimeZone *time.Location
	// Services are the domain services the pages read and change.
	Services Services
	Logger   *slog.Logger
	// Now is the clock of sessions; default time.Now.
	Now func() time.Time
}

// Handler serves the console: its pages at Prefix+"/" and below, its
// static files under Prefix+"/static/".
type Handler struct {
	cfg Config
	// pages are the templates of each page (templates/NAME.html but
	// layout.html), each with the layout it fills.
	pages   map[string]*template.Template
	static  http.Handler
	mux     *http.ServeMux
	locales *catalogue
	oidc    *oidcClient
	secure  bool
}

// New returns the console's Handler, its templates and catalogues parsed.
func New(cfg Config) (*Handler, error) {
	cfg.SessionTTL = cmp.Or(cfg.SessionTTL, DefaultSessionTTL)
	if cfg.TimeZone == nil {
		cfg.TimeZone = time.UTC
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	locales, err := loadCatalogue()
	if err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, pages: pages, locales: locales, secure: strings.HasPrefix(cfg.BaseURL, "https://"),
		static: http.StripPrefix(Prefix+"/static/", http.FileServerFS(static))}
	if cfg.OIDC.Issuer != "" {
		h.oidc = newOIDCClient(cfg.OIDC, strings.TrimSuffix(cfg.BaseURL, "/"))
	}
	h.mux = h.routes()
	return h, nil
}

// parsePages parses each page's template with the layout it fills.
func parsePages() (map[string]*template.Template, error) {
	layout, err := template.New("layout.html").Funcs(templateFuncs).ParseFS(Templates, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(Templates, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := make(map[string]*template.Template)
	for _, name := range names {
		if name == "templates/layout.html" {
			continue
		}
		page, err := template.Must(layout.Clone()).ParseFS(Templates, name)
		if err != nil {
			return nil, err
		}
		pages[strings.TrimSuffix(strings.TrimPrefix(name, "templates/"), ".html")] = page
	}
	return pages, nil
}

// ServeHTTP serves a request whose path starts with Prefix.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Prefix && !strings.HasPrefix(r.URL.Path, Prefix+"/") {
		http.NotFound(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// routes are the console's routes: the open ones (static files and
// sign-in), and the pages of a session, each area's from its own file.
func (h *Handler) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"/static/", h.serveStatic)
	mux.HandleFunc("GET "+Prefix+"/signin", h.signinPage)
	mux.HandleFunc("GET "+Prefix+"/signin/start", h.startSignin)
	mux.HandleFunc("GET "+Prefix+"/callback", h.callback)
	mux.HandleFunc("GET "+Prefix+"/link/{token}", h.useLink)
	mux.HandleFunc("POST "+Prefix+"/language", h.setLanguage)
	r := router{h: h, mux: mux}
	r.page("POST "+Prefix+"/signout", anyone, h.signout)
	r.page("GET "+Prefix+"/{$}", anyone, h.home)
	r.page("GET "+Prefix, anyone, h.home)
	h.activityRoutes(r)
	h.registrationRoutes(r)
	h.poolRoutes(r)
	h.onsaleRoutes(r)
	h.webhookRoutes(r)
	h.checkinRoutes(r)
	h.doorRoutes(r)
	return mux
}

// serveStatic serves the embedded static files, without listings.
func (h *Handler) serveStatic(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/") {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "public, max-age=300")
	h.static.ServeHTTP(w, r)
}

// caller is the registration caller of a session's request: the session's
// user with its roles, so that the domain checks and records it as it
// would a token's.
func caller(r *http.Request, g Grant) registration.Caller {
	return registration.Caller{UserID: g.Sub, Admin: g.Admin(), Roles: g.Roles, RequestID: r.Header.Get("X-Request-Id")}
}
