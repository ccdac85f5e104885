package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDCConfig names the OpenID Connect provider organisers sign in with.
// Its ID tokens carry the user's roles in a "roles" claim, as API tokens
// do ("admin" makes an admin).
type OIDCConfig struct {
	// Issuer is the provider's issuer URL; its discovery document is read
	// at the first sign-in (and again after a failure).
	Issuer       string
	ClientID     string
	ClientSecret string
	// Scopes are asked for beside "openid"; nil: profile.
	Scopes []string
	// Client makes the requests to the provider; nil: http.DefaultClient.
	Client *http.Client
}

// oidcClient signs organisers in with the provider; it discovers the
// provider once, at the first sign-in that needs it.
type oidcClient struct {
	cfg OIDCConfig
	// base is the service's public URL; empty: the request's.
	base string

	mu       sync.Mutex
	provider *oidc.Provider
}

func newOIDCClient(cfg OIDCConfig, base string) *oidcClient {
	if cfg.Scopes == nil {
		cfg.Scopes = []string{"profile"}
	}
	return &oidcClient{cfg: cfg, base: base}
}

// redirect is the console's callback URL, on the service's public URL or,
// without one, on the request's host.
func (c *oidcClient) redirect(r *http.Request) string {
	base := c.base
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + Prefix + "/callback"
}

// context is ctx with the client's HTTP client, for go-oidc and oauth2.
func (c *oidcClient) context(ctx context.Context) context.Context {
	if c.cfg.Client == nil {
		return ctx
	}
	return oidc.ClientContext(ctx, c.cfg.Client)
}

// discover returns the provider, read from its discovery document once.
func (c *oidcClient) discover(ctx context.Context) (*oidc.Provider, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.provider != nil {
		return c.provider, nil
	}
	p, err := oidc.NewProvider(c.context(ctx), c.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discover the OpenID provider %s: %w", c.cfg.Issuer, err)
	}
	c.provider = p
	return p, nil
}

func (c *oidcClient) oauth2(p *oidc.Provider, r *http.Request) *oauth2.Config {
	return &oauth2.Config{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: c.redirect(r), Scopes: append([]string{oidc.ScopeOpenID}, c.cfg.Scopes...)}
}

// signinPage offers the ways to sign in.
func (h *Handler) signinPage(w http.ResponseWriter, r *http.Request) {
	req := h.openRequest(r)
	h.render(w, req, http.StatusOK, "signin", struct {
		OIDC bool
		Back string
	}{h.oidc != nil, safeBack(r.URL.Query().Get("back"))})
}

// openRequest is a request of a page that needs no session.
func (h *Handler) openRequest(r *http.Request) *request {
	_, secret, _, _ := h.session(r)
	return &request{Request: r, lang: h.language(r), tz: h.timeZone(r), secret: secret, csrf: csrfToken(secret)}
}

// startSignin sends the browser to the provider, with a state, a nonce
// and a PKCE verifier kept in a short-lived cookie. It is a link, not a
// form: the content security policy's form-action keeps forms on the
// console, and a form's redirect to the provider would break it.
func (h *Handler) startSignin(w http.ResponseWriter, r *http.Request) {
	req := h.openRequest(r)
	if h.oidc == nil {
		h.renderError(w, req, http.StatusNotFound, "signin.not_configured")
		return
	}
	p, err := h.oidc.discover(r.Context())
	if err != nil {
		h.cfg.Logger.Error("console sign-in", "err", err)
		h.renderError(w, req, http.StatusBadGateway, "signin.provider_unreachable")
		return
	}
	state, nonce, verifier := newSecret(), newSecret(), oauth2.GenerateVerifier()
	back := safeBack(r.URL.Query().Get("back"))
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: strings.Join([]string{state, nonce, verifier, back}, " "),
		Path: Prefix, MaxAge: 600, HttpOnly: true, Secure: h.secure, SameSite: http.SameSiteLaxMode})
	to := h.oidc.oauth2(p, r).AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce))
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// callback finishes an OpenID Connect sign-in: the code is exchanged with
// the PKCE verifier, the ID token verified (issuer, audience, expiry,
// nonce), and a session started for its subject and roles.
func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	req := h.openRequest(r)
	g, back, err := h.exchange(r)
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Path: Prefix, MaxAge: -1, HttpOnly: true, Secure: h.secure})
	if err != nil {
		h.cfg.Logger.Warn("console sign-in refused", "err", err)
		h.renderError(w, req, http.StatusUnauthorized, "signin.failed")
		return
	}
	if err := h.startSession(w, r, g); err != nil {
		h.fail(w, req, err)
		return
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// exchange checks the callback against the sign-in's cookie and returns
// the grant of its ID token.
func (h *Handler) exchange(r *http.Request) (Grant, string, error) {
	if h.oidc == nil {
		return Grant{}, "", errors.New("OpenID Connect is not configured")
	}
	c, err := r.Cookie(oidcCookie)
	if err != nil {
		return Grant{}, "", errors.New("no sign-in in progress")
	}
	parts := strings.Split(c.Value, " ")
	q := r.URL.Query()
	if len(parts) != 4 || q.Get("state") == "" || q.Get("state") != parts[0] {
		return Grant{}, "", errors.New("the state does not match the sign-in's")
	}
	if e := q.Get("error"); e != "" {
		return Grant{}, "", fmt.Errorf("the provider refused: %s", e)
	}
	p, err := h.oidc.discover(r.Context())
	if err != nil {
		return Grant{}, "", err
	}
	ctx := h.oidc.context(r.Context())
	tok, err := h.oidc.oauth2(p, r).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(parts[2]))
	if err != nil {
		return Grant{}, "", fmt.Errorf("exchange the code: %w", err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok {
		return Grant{}, "", errors.New("the token response has no id_token")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: h.oidc.cfg.ClientID}).Verify(ctx, raw)
	if err != nil {
		return Grant{}, "", err
	}
	if idt.Nonce != parts[1] {
		return Grant{}, "", errors.New("the ID token's nonce does not match the sign-in's")
	}
	var claims struct {
		Roles []string `json:"roles"`
	}
	if err := idt.Claims(&claims); err != nil {
		return Grant{}, "", fmt.Errorf("the ID token's roles: %w", err)
	}
	if !validSubject(idt.Subject) {
		return Grant{}, "", errors.New("the ID token's subject is not a valid user id")
	}
	return Grant{Sub: idt.Subject, Roles: claims.Roles}, safeBack(parts[3]), nil
}

// validSubject reports whether sub is a user id the API accepts: 1 to 128
// characters.
func validSubject(sub string) bool {
	n := len([]rune(sub))
	return n >= 1 && n <= 128
}

// useLink signs in with a one-time link, once, and sends the browser to
// the console without the link's token in its address.
func (h *Handler) useLink(w http.ResponseWriter, r *http.Request) {
	req := h.openRequest(r)
	w.Header().Set("Referrer-Policy", "no-referrer")
	g, err := h.cfg.Sessions.UseLink(r.Context(), hashSecret(r.PathValue("token")))
	switch {
	case errors.Is(err, ErrNoSession):
		h.renderError(w, req, http.StatusUnauthorized, "signin.link_used")
		return
	case err != nil:
		h.fail(w, req, err)
		return
	}
	if err := h.startSession(w, r, g); err != nil {
		h.fail(w, req, err)
		return
	}
	http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
}

// signout revokes the session on every instance and clears its cookie.
func (h *Handler) signout(w http.ResponseWriter, r *request) {
	if err := h.cfg.Sessions.RevokeSession(r.Context(), hashSecret(r.secret)); err != nil {
		h.fail(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: Prefix, MaxAge: -1, HttpOnly: true, Secure: h.secure,
		SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r.Request, Prefix+"/signin", http.StatusSeeOther)
}
