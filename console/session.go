package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd/registration"
)

// Cookie names.
const (
	sessionCookie  = "capacityd_console"
	languageCookie = "capacityd_lang"
	timeZoneCookie = "capacityd_tz"
	oidcCookie     = "capacityd_console_oidc"
)

// ErrNoSession is returned by a SessionStore for a session or link that
// does not exist, has expired, was revoked or was already used.
var ErrNoSession = errors.New("no such session")

// Grant is who a session or a sign-in link is for.
type Grant struct {
	Sub       string
	Roles     []string
	ExpiresAt time.Time
}

// Admin reports whether the grant carries the admin role.
func (g Grant) Admin() bool { return slices.Contains(g.Roles, "admin") }

// SessionStore keeps sessions and one-time links under the SHA-256 of
// their secrets, shared by every instance.
type SessionStore interface {
	CreateSession(ctx context.Context, secretHash []byte, g Grant) error
	Session(ctx context.Context, secretHash []byte) (Grant, error)
	RevokeSession(ctx context.Context, secretHash []byte) error
	CreateLink(ctx context.Context, secretHash []byte, g Grant) error
	UseLink(ctx context.Context, secretHash []byte) (Grant, error)
}

// newSecret returns a random secret of 128 bits (crypto/rand.Text).
func newSecret() string { return rand.Text() }

func hashSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// csrfToken is the CSRF token of the session whose secret is given: a hash
// a page of another site cannot compute, since it cannot read the cookie.
func csrfToken(secret string) string {
	sum := sha256.Sum256([]byte("capacityd console csrf\x00" + secret))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// NewLink stores a one-time sign-in link for g that can be used until ttl
// (zero: DefaultLinkTTL) has passed, and returns its path under Prefix.
func NewLink(ctx context.Context, store SessionStore, g Grant, ttl time.Duration, now time.Time) (string, error) {
	if ttl <= 0 {
		ttl = DefaultLinkTTL
	}
	g.ExpiresAt = now.Add(ttl)
	token := newSecret()
	if err := store.CreateLink(ctx, hashSecret(token), g); err != nil {
		return "", err
	}
	return Prefix + "/link/" + token, nil
}

// startSession stores a new session for g and sets its cookie.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, g Grant) error {
	secret := newSecret()
	g.ExpiresAt = h.cfg.Now().Add(h.cfg.SessionTTL)
	if err := h.cfg.Sessions.CreateSession(r.Context(), hashSecret(secret), g); err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: secret, Path: Prefix, Expires: g.ExpiresAt,
		HttpOnly: true, Secure: h.secure, SameSite: http.SameSiteLaxMode})
	return nil
}

// session is the request's session: its grant and its secret, or ok
// false.
func (h *Handler) session(r *http.Request) (g Grant, secret string, ok bool, err error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 128 {
		return Grant{}, "", false, nil
	}
	g, err = h.cfg.Sessions.Session(r.Context(), hashSecret(c.Value))
	if errors.Is(err, ErrNoSession) {
		return Grant{}, "", false, nil
	}
	return g, c.Value, err == nil, err
}

// access says who may use a page.
type access int

const (
	// anyone signed in.
	anyone access = iota
	// admins only.
	adminOnly
)

// request is what a page handler gets: the request, its session, and the
// page's language and time zone.
type request struct {
	*http.Request
	grant  Grant
	csrf   string
	lang   string
	tz     *time.Location
	secret string
}

// pageFunc serves a page of a session.
type pageFunc func(w http.ResponseWriter, r *request)

// router registers the pages of a session on the console's mux.
type router struct {
	h   *Handler
	mux *http.ServeMux
}

// page registers f for pattern, behind a session of the given access and,
// for every method but GET and HEAD, a valid CSRF token.
func (rt router) page(pattern string, who access, f pageFunc) {
	h := rt.h
	rt.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		stream := strings.HasSuffix(r.URL.Path, "/stream")
		if !stream {
			ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		g, secret, ok, err := h.session(r)
		lang, tz := h.language(r), h.timeZone(r)
		req := &request{Request: r, grant: g, lang: lang, tz: tz, secret: secret, csrf: csrfToken(secret)}
		switch {
		case err != nil:
			h.fail(w, req, err)
		case !ok && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			http.Redirect(w, r, Prefix+"/signin?back="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		case !ok:
			h.renderError(w, req, http.StatusUnauthorized, "error.signed_out")
		case r.Method != http.MethodGet && r.Method != http.MethodHead && !validCSRF(r, req.csrf):
			h.renderError(w, req, http.StatusForbidden, "error.csrf")
		case who == adminOnly && !g.Admin():
			h.renderError(w, req, http.StatusForbidden, "error.admins_only")
		default:
			f(w, req)
		}
	})
}

// validCSRF reports whether r carries the session's CSRF token, in the
// form's "csrf" field or the X-CSRF-Token header (scripts' requests).
func validCSRF(r *http.Request, want string) bool {
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// safeBack is where to go after signing in: a console path, never another
// site.
func safeBack(back string) string {
	if !strings.HasPrefix(back, Prefix) || strings.HasPrefix(back, "//") || strings.Contains(back, "\\") {
		return Prefix + "/"
	}
	if u, err := url.Parse(back); err != nil || u.Host != "" || u.Scheme != "" {
		return Prefix + "/"
	}
	return back
}

// SessionCaller is the registration caller of r's session (ok false when r
// has none), and whether r carries the session's CSRF token; the API's
// edge serves the console's scripts with it.
func (h *Handler) SessionCaller(r *http.Request) (c registration.Caller, csrfOK, ok bool, err error) {
	g, secret, ok, err := h.session(r)
	if err != nil || !ok {
		return registration.Caller{}, false, false, err
	}
	want := csrfToken(secret)
	got := r.Header.Get("X-CSRF-Token")
	return caller(r, g), got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1, true, nil
}
