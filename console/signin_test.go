package console_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/console"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// staffUser is a user of the test's OpenID provider whose ID token
// carries roles, as the organisation's provider's do.
type staffUser struct {
	sub   string
	roles []string
}

func (u staffUser) ID() string { return u.sub }

func (u staffUser) Userinfo([]string) ([]byte, error) { return []byte(`{"sub":"` + u.sub + `"}`), nil }

func (u staffUser) Claims(_ []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	return struct {
		*mockoidc.IDTokenClaims
		Roles []string `json:"roles"`
	}{base, u.roles}, nil
}

// oidcInstance starts an OpenID provider (discovery, authorization with
// PKCE, token and keys endpoints over HTTP) and an instance whose console
// signs in with it.
func oidcInstance(t *testing.T) (*mockoidc.MockOIDC, *apptest.Instance) {
	t.Helper()
	idp, err := mockoidc.Run()
	require.NoError(t, err)
	t.Cleanup(func() { _ = idp.Shutdown() })
	cfg := idp.Config()
	inst := apptest.Start(t, apptest.Options{App: appOptionsWithOIDC(console.OIDCConfig{
		Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
	})})
	return idp, inst
}

// TestSigningInWithTheOpenIDProvider: a signed-out organiser is sent to
// sign in, goes through the provider (discovery, code with PKCE, ID token
// with nonce and roles) and lands on the page they asked for, with no
// code or token left in the address; signing out ends the session on the
// server, so that its old cookie opens nothing.
func TestSigningInWithTheOpenIDProvider(t *testing.T) {
	t.Parallel()
	idp, inst := oidcInstance(t)
	idp.QueueUser(staffUser{sub: "olivia", roles: []string{"admin"}})
	ctx := tab(t)
	do(t, ctx, 20*time.Second,
		chromedp.Navigate(inst.URL+"/console/?from=test"),
		chromedp.WaitVisible(`#signin`),
		chromedp.Click(`#signin`),
	)
	waitSignedIn(t, ctx, "olivia")
	location, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	require.Equal(t, inst.URL+"/console/?from=test", location)
	require.Equal(t, 1, countOf(t, ctx, "header nav"), "an admin sees the admin pages")

	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{inst.URL + "/console/"}})
	require.NoError(t, err)
	var old *http.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == "capacityd_console" {
			require.True(t, c.HTTPOnly)
			require.Equal(t, network.CookieSameSiteLax, c.SameSite)
			old = &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	require.NotNil(t, old)
	require.Equal(t, http.StatusOK, getWith(t, inst.URL+"/console/", old))

	do(t, ctx, 10*time.Second,
		chromedp.Click(`form[action="/console/signout"] button`),
		chromedp.WaitVisible(`#signin`),
	)
	require.Equal(t, http.StatusSeeOther, getWith(t, inst.URL+"/console/", old), "a signed-out session's cookie opens nothing")

	// A door role's sign-in: no admin pages.
	idp.QueueUser(staffUser{sub: "dan", roles: []string{"door-a"}})
	do(t, ctx, 20*time.Second,
		chromedp.Click(`#signin`),
	)
	waitSignedIn(t, ctx, "dan")
	require.Equal(t, 0, countOf(t, ctx, "header nav"))
}

// TestACallbackThatIsNotTheSigninsIsRefused: a callback whose state is
// not the one the browser's sign-in started with (a forged or replayed
// one) starts no session.
func TestACallbackThatIsNotTheSigninsIsRefused(t *testing.T) {
	t.Parallel()
	_, inst := oidcInstance(t)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(inst.URL + "/console/signin/start?back=%2Fconsole%2F")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	to, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "S256", to.Query().Get("code_challenge_method"))
	require.NotEmpty(t, to.Query().Get("nonce"))
	resp, err = client.Get(inst.URL + "/console/callback?code=x&state=" + url.QueryEscape(to.Query().Get("state")+"forged"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	for _, c := range jar.Cookies(resp.Request.URL) {
		require.NotEqual(t, "capacityd_console", c.Name)
	}
}

// getWith is the status of a GET with only the given cookie, redirects
// not followed.
func getWith(t *testing.T, u string, c *http.Cookie) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	req.AddCookie(c)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	if resp.StatusCode == http.StatusSeeOther {
		require.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/console/signin"))
	}
	return resp.StatusCode
}

// waitSignedIn waits, through the redirects of a sign-in (each a new
// document), until the page shows sub's session.
func waitSignedIn(t *testing.T, ctx context.Context, sub string) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	js := `(document.querySelector('.who') || {}).textContent || ''`
	var last string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); <-tick.C {
		if who, err := chromedp.Run(ctx, chromedp.Evaluate[string](js)); err == nil {
			if last = who; who == sub {
				return
			}
		}
	}
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
	cookies, _ := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	for _, c := range cookies.Cookies {
		t.Logf("cookie %s=%s path %s domain %s", c.Name, c.Value, c.Path, c.Domain)
	}
	t.Fatalf("the page (%s) shows the session of %q, not %q:\n%s", loc, last, sub, body)
}
