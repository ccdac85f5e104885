package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// TestAnOrganiserRunsAnEventFromTheConsole: an organiser signs in
// through the OpenID provider, creates a pool and an activity with a
// waiting list in it, watches its dashboard count signups made through
// the API on another instance, cancels a registration and sees the
// waiting party promoted, gives seats back for a group, holds a block,
// opens a check-in list, exports the registrations, and signs out — after
// which the old session's cookie opens nothing.
func TestAnOrganiserRunsAnEventFromTheConsole(t *testing.T) {
	t.Parallel()
	idp, a := oidcInstance(t)
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	idp.QueueUser(staffUser{sub: "olivia", roles: []string{"admin"}})
	ctx := tab(t)
	do(t, ctx, 30*time.Second, chromedp.Navigate(a.URL+"/console/pools/new"), chromedp.WaitVisible("#signin"), chromedp.Click("#signin"))
	waitSignedIn(t, ctx, "olivia")
	s := &session{t: t, ctx: ctx, inst: a}
	require.Equal(t, "/console/pools/new", s.path(), "back on the page asked for")

	s.fill(map[string]string{"pool-title": "Main hall", "pool-capacity": "10"})
	s.submit(`main form button[type="submit"]`, "main h1")
	pool := strings.TrimPrefix(s.path(), "/console/pools/")
	require.True(t, strings.HasPrefix(pool, "p_"), s.path())

	s.open("/console/activities/new")
	s.fill(map[string]string{"f-title": "Cardiology grand rounds", "f-capacity": "3", "f-max-seats-per-registration": "2", "f-pools": pool})
	do(t, ctx, 5*time.Second, chromedp.Click("#f-waitlist"))
	s.submit(`#activity-form button[type="submit"]`, "#seats")
	act := strings.TrimPrefix(s.path(), "/console/activities/")
	activity, err := a.API(t, "admin", true).GetActivity(context.Background(), act)
	require.NoError(t, err)
	require.True(t, activity.Waitlist)
	require.Equal(t, []string{pool}, activity.Pools)

	// Signups on the other instance move the dashboard without a reload.
	ana := signup(t, b, act, "ana", 1, false)
	ben := signup(t, b, act, "ben", 2, false)
	cyd := signup(t, b, act, "cyd", 1, true)
	do(t, ctx, 15*time.Second,
		waitText(`#seats [data-field="taken"]`, "3", 10*time.Second),
		waitText(`#seats [data-field="waiting"]`, "1", 10*time.Second),
	)

	// Cancelling ana's seat promotes cyd; giving one of ben's two seats
	// back frees a seat.
	s.open("/console/registrations/" + ana.ID)
	s.submit("#cancel-form button", "#notice")
	require.NotEqual(t, "waitlisted", string(registrationOf(t, a, cyd.ID).Status), "promoted")
	s.open("/console/registrations/" + ben.ID)
	s.fill(map[string]string{"seats-keep": "1"})
	s.submit("#seats-form button", "#notice")
	require.Equal(t, 1, registrationOf(t, a, ben.ID).Seats)
	s.open("/console/activities/" + act)
	do(t, ctx, 15*time.Second,
		waitText(`#seats [data-field="taken"]`, "2", 10*time.Second),
		waitText(`#seats [data-field="waiting"]`, "0", 10*time.Second),
	)

	// A block of one seat for a code, the code shown once.
	s.open("/console/activities/" + act + "/blocks")
	s.fill(map[string]string{"block-seats": "1", "block-code-input": "SPEAKER-1"})
	s.submit(`form[action$="/blocks"] button[type="submit"]`, "#block-code")
	require.Contains(t, text(t, ctx, "#block-code"), "SPEAKER-1")

	// A check-in list of the activity.
	s.open("/console/checkin-lists/new?activity=" + act)
	s.fill(map[string]string{"name": "Main door"})
	s.submit(`main form button[type="submit"]`, "#counts")
	require.True(t, strings.HasPrefix(s.path(), "/console/checkin-lists/cl_") || strings.HasPrefix(s.path(), "/console/checkin-lists/"), s.path())

	// The registrations as CSV, downloaded with the session.
	csv, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(
		`fetch("/console/api/v1/activities/%s/registrations.csv").then(r => r.status + " " + r.headers.get("Content-Type"))`, act),
		chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(csv, "200 text/csv"), csv)
	csvBody, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(
		`fetch('/console/api/v1/activities/%s/registrations.csv').then(r => r.text())`, act), chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	for _, user := range []string{"ana", "ben", "cyd"} {
		require.Contains(t, csvBody, user)
	}

	// Signing out ends the session everywhere: its cookie opens nothing.
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{a.URL + "/console/"}})
	require.NoError(t, err)
	var old *http.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == "capacityd_console" {
			old = &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	require.NotNil(t, old)
	require.Equal(t, http.StatusOK, getWith(t, b.URL+"/console/", old), "a session works on every instance")
	s.submit(`form[action="/console/signout"] button`, "#signin")
	require.Equal(t, http.StatusSeeOther, getWith(t, a.URL+"/console/", old))
	require.Equal(t, http.StatusSeeOther, getWith(t, b.URL+"/console/", old))
}
