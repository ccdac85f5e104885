package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/console"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// dialogs answers the confirmation dialogs a tab opens (a form's
// data-confirm): accepted or dismissed as accept says, each counted, the
// last one's question kept.
type dialogs struct {
	accept atomic.Bool
	opened atomic.Int32
	last   atomic.Value
}

// answerDialogs answers every dialog of the session's tab from now on,
// accepting them until told otherwise.
func (s *session) answerDialogs() *dialogs {
	d := &dialogs{}
	d.accept.Store(true)
	events := chromedp.Events(s.ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			d.opened.Add(1)
			d.last.Store(ev.Message)
			_, _ = chromedp.Call(s.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: d.accept.Load()})
		}
	}()
	return d
}

// click clicks the element, waits for the page it leads to to load and
// for its element then, and returns the page's HTTP status.
func (s *session) click(sel, then string) int64 {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
	require.NoError(s.t, err, "click %s", sel)
	wctx, wcancel := context.WithTimeout(s.ctx, 20*time.Second)
	defer wcancel()
	if err := chromedp.Do(wctx, chromedp.WaitReady(chromedp.CSS(then))); err != nil {
		s.t.Fatalf("after a click on %s, the page (%d) has no %s: %v\n%s", sel, resp.Status, then, err,
			eval[string](s, `location.href + "\n" + document.documentElement.outerHTML`))
	}
	return resp.Status
}

// post posts a form to a console path from the tab's page (its cookies),
// with the page's CSRF token when csrf is set, and returns the status.
func (s *session) post(path string, csrf bool, fields map[string]string) int {
	s.t.Helper()
	js := fmt.Sprintf(`(() => {
		const body = new URLSearchParams(%s);
		if (%t) { body.set('csrf', document.body.dataset.csrf); }
		return fetch(%q, {method: 'POST', body, redirect: 'manual'}).then(r => r.type === 'opaqueredirect' ? 303 : r.status);
	})()`, jsonObject(fields), csrf, path)
	return eval[int](s, js)
}

func jsonObject(m map[string]string) string {
	out := "{"
	for k, v := range m {
		out += fmt.Sprintf("%q: %q,", k, v)
	}
	return out + "}"
}

// registrationOf reads a registration through the API as an admin.
func registrationOf(t *testing.T, inst *apptest.Instance, id string) client.Registration {
	t.Helper()
	r, err := inst.API(t, "root", true).GetRegistration(context.Background(), id)
	require.NoError(t, err)
	return r
}

// signup signs user up through the API and returns the registration,
// requiring it to be waitlisted or not as wait says.
func signup(t *testing.T, inst *apptest.Instance, activityID, user string, seats int, wait bool) client.Registration {
	t.Helper()
	res, err := inst.Signup(t, activityID, user, client.SignupOptions{Seats: seats})
	require.NoError(t, err)
	require.Equal(t, wait, res.Waitlisted, user)
	return res.Registration
}

// TestAnAdminManagesRegistrationsAndTheWaitingLine: on an activity of two
// seats with a waiting list, four users sign up through the API (two
// wait). The registrations page lists them, narrows them to a user id or
// a status, pages through them and downloads both exports through the
// session; cancelling a seated registration through its form (after the
// dialog asks) promotes the first in line, which the waiting page and
// the promoted one's history show; the history names the admin; a
// change the domain refuses is shown on the page, not as a failure; and
// a form posted without its CSRF token is refused and changes nothing.
func TestAnAdminManagesRegistrationsAndTheWaitingLine(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act := inst.CreateWaitlisted(t, "Journal club", 2)
	alice := signup(t, inst, act, "alice", 0, false)
	bob := signup(t, inst, act, "bob", 0, false)
	carol := signup(t, inst, act, "carol", 0, true)
	dave := signup(t, inst, act, "dave", 0, true)

	s := signInTab(t, inst, "en", "ana", "admin")
	list := "/console/activities/" + act + "/registrations"
	s.open(list)
	require.Equal(t, 4, countOf(t, s.ctx, "#registrations tbody tr"))
	require.Equal(t, "Registrations: Journal club", text(t, s.ctx, "main h1"))

	// Search by user id, then narrow by status.
	do(t, s.ctx, 15*time.Second, chromedp.SendKeys(chromedp.CSS("#search-user"), "carol"))
	s.click("form.search button", "#search-user[value='carol']")
	require.Equal(t, 1, countOf(t, s.ctx, "#registrations tbody tr"))
	require.Equal(t, carol.ID, attr(t, s.ctx, "#registrations tbody tr", "data-id"))
	s.open(list + "?status=waitlisted")
	require.Equal(t, 2, countOf(t, s.ctx, "#registrations tbody tr[data-status='waitlisted']"))
	s.open(list + "?user=carol&status=pending")
	require.Equal(t, 1, countOf(t, s.ctx, "#registrations-empty"))
	s.open(list + "?user=" + strings.Repeat("x", 200))
	require.Contains(t, text(t, s.ctx, "#search-user-error"), "user_id must have")
	require.Equal(t, "true", attr(t, s.ctx, "#search-user", "aria-invalid"))

	// Keyset pages.
	s.open(list + "?limit=3")
	require.Equal(t, 3, countOf(t, s.ctx, "#registrations tbody tr"))
	s.click("#next-page", "#first-page")
	require.Equal(t, 1, countOf(t, s.ctx, "#registrations tbody tr"))
	require.Equal(t, 0, countOf(t, s.ctx, "#next-page"))
	require.Equal(t, dave.ID, attr(t, s.ctx, "#registrations tbody tr", "data-id"))

	// Both exports download through the session.
	s.open(list)
	for _, sel := range []string{"#registrations-csv", "#attendance-csv"} {
		got := eval[string](s, fmt.Sprintf(`fetch(document.querySelector(%q).href).then(r => r.status + ' ' + r.headers.get('Content-Type'))`, sel))
		require.Regexp(t, `^200 text/csv`, got, sel)
		require.True(t, eval[bool](s, fmt.Sprintf(`document.querySelector(%q).hasAttribute('download')`, sel)), sel)
	}
	csv := eval[string](s, `fetch(document.querySelector('#registrations-csv').href).then(r => r.text())`)
	require.Contains(t, csv, alice.ID+",alice,pending")

	// Cancel alice's seat through the form: the dialog asks first; a
	// dismissed dialog changes nothing.
	d := s.answerDialogs()
	s.open("/console/registrations/" + alice.ID)
	d.accept.Store(false)
	do(t, s.ctx, 10*time.Second, chromedp.Click(chromedp.CSS("#cancel-form button")))
	require.EqualValues(t, 1, d.opened.Load())
	require.Equal(t, client.Pending, registrationOf(t, inst, alice.ID).Status)
	require.Equal(t, "Cancel the registration of alice? Its seats go to the waiting list at once.", d.last.Load())
	d.accept.Store(true)
	s.click("#cancel-form button", "#notice[data-done='cancel']")
	require.Equal(t, "cancelled", attr(t, s.ctx, "#reg-status", "data-status"))
	require.Equal(t, "The registration was cancelled.", text(t, s.ctx, "#notice"))
	require.Equal(t, "admin:ana", attr(t, s.ctx, "#history tr[data-type='registration.cancelled']", "data-actor"))
	require.Equal(t, "admin:ana", text(t, s.ctx, "#history tr[data-type='registration.cancelled'] .actor"))
	require.Equal(t, client.Cancelled, registrationOf(t, inst, alice.ID).Status)

	// Carol got the seat: the line is dave alone, first.
	s.open("/console/activities/" + act + "/waiting")
	require.Equal(t, 1, countOf(t, s.ctx, "#waiting tbody tr"))
	require.Equal(t, "dave", attr(t, s.ctx, "#waiting tbody tr", "data-user"))
	require.Equal(t, "1", text(t, s.ctx, "#waiting tbody tr .position"))
	do(t, s.ctx, 10*time.Second, waitTrue(`document.querySelector('#seats-live').dataset.updated !== undefined`, 8*time.Second, "the seat stream"))
	require.Equal(t, "1", text(t, s.ctx, "#seats-live [data-field='waiting']"))
	s.open("/console/registrations/" + carol.ID)
	require.Equal(t, "pending", attr(t, s.ctx, "#reg-status", "data-status"))
	require.Equal(t, "system", attr(t, s.ctx, "#history tr[data-type='registration.promoted']", "data-actor"))

	// A change the domain refuses is shown beside its form: dave waits,
	// and a waiting registration cannot be approved.
	s.open("/console/registrations/" + dave.ID)
	require.Equal(t, http.StatusConflict, s.post("/console/registrations/"+dave.ID+"/status", true, map[string]string{"status": "approved"}))
	do(t, s.ctx, 10*time.Second, chromedp.SetValue(chromedp.CSS("#status-to"), "approved"))
	require.EqualValues(t, http.StatusConflict, s.click("#status-form button", "#status-error"))
	require.Contains(t, text(t, s.ctx, "#status-error"), "cannot move from waitlisted to approved")
	require.Equal(t, "true", attr(t, s.ctx, "#status-to", "aria-invalid"))
	require.Equal(t, client.Waitlisted, registrationOf(t, inst, dave.ID).Status)

	// Without its CSRF token, a form is refused and changes nothing.
	s.open("/console/registrations/" + bob.ID)
	require.Equal(t, http.StatusForbidden, s.post("/console/registrations/"+bob.ID+"/cancel", false, nil))
	require.Equal(t, http.StatusForbidden, s.post("/console/registrations/"+bob.ID+"/cancel", false, map[string]string{"csrf": "forged"}))
	require.Equal(t, client.Pending, registrationOf(t, inst, bob.ID).Status)
}

// TestAnAdminGivesSeatsBackConfirmsAndChangesTheStatus: on an activity
// whose registrations hold up to three seats and whose confirm_by is
// tomorrow, a party of three gives two back through its form (the party
// of two waiting gets them), is confirmed, and moves to awaiting payment
// then approved; each change is in its history by the admin. A number of
// seats the domain refuses is shown beside the field.
func TestAnAdminGivesSeatsBackConfirmsAndChangesTheStatus(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	confirmBy := time.Now().Add(24 * time.Hour)
	a, err := inst.API(t, "root", true).CreateActivity(context.Background(), client.NewActivity{
		Title: "Workshop", Capacity: 4, Waitlist: true, MaxSeatsPerRegistration: 3, ConfirmBy: &confirmBy})
	require.NoError(t, err)
	erin := signup(t, inst, a.ID, "erin", 3, false)
	frank := signup(t, inst, a.ID, "frank", 2, true)

	s := signInTab(t, inst, "en", "ana", "admin")
	s.answerDialogs()
	s.open("/console/registrations/" + erin.ID)
	require.Equal(t, "3", text(t, s.ctx, "#reg-seats"))

	// More seats than it holds: refused beside the field.
	do(t, s.ctx, 10*time.Second, chromedp.SetValue(chromedp.CSS("#seats-keep"), "5"))
	require.EqualValues(t, http.StatusConflict, s.click("#seats-form button", "#seats-error"))
	require.Contains(t, text(t, s.ctx, "#seats-error"), "seats can only be given back")
	require.Equal(t, "true", attr(t, s.ctx, "#seats-keep", "aria-invalid"))
	require.Equal(t, "5", attr(t, s.ctx, "#seats-keep", "value"))
	require.Equal(t, 3, registrationOf(t, inst, erin.ID).Seats)

	do(t, s.ctx, 10*time.Second, chromedp.SetValue(chromedp.CSS("#seats-keep"), "1"))
	s.click("#seats-form button", "#notice[data-done='seats']")
	require.Equal(t, "1", text(t, s.ctx, "#reg-seats"))
	require.Equal(t, "admin:ana", attr(t, s.ctx, "#history tr[data-type='registration.seats_changed']", "data-actor"))
	require.Contains(t, text(t, s.ctx, "#history tr[data-type='registration.seats_changed']"), "3 → 1")
	require.Equal(t, client.Pending, registrationOf(t, inst, frank.ID).Status)

	s.click("#confirm-form button", "#notice[data-done='confirm']")
	require.Equal(t, "The registration was confirmed.", text(t, s.ctx, "#notice"))
	require.Equal(t, "admin:ana", attr(t, s.ctx, "#history tr[data-type='registration.confirmed']", "data-actor"))
	require.NotNil(t, registrationOf(t, inst, erin.ID).ConfirmedAt)
	require.Equal(t, 0, countOf(t, s.ctx, "#confirm-form"))

	for _, to := range []client.Status{client.AwaitingPayment, client.Approved} {
		do(t, s.ctx, 10*time.Second, chromedp.SetValue(chromedp.CSS("#status-to"), string(to)))
		s.click("#status-form button", "#reg-status[data-status='"+string(to)+"']")
		require.Equal(t, "status", attr(t, s.ctx, "#notice", "data-done"))
		require.Equal(t, string(to), attr(t, s.ctx, "#reg-status", "data-status"))
		require.Equal(t, to, registrationOf(t, inst, erin.ID).Status)
	}
	require.Equal(t, 2, countOf(t, s.ctx, "#history tr[data-type='registration.status_changed'][data-actor='admin:ana']"))
}

// TestTheRegistrationsPagesAreAccessibleInEveryLanguage: the list, a
// registration's page (with its history and a refusal shown) and the
// waiting page pass axe-core in English, Traditional and Simplified
// Chinese.
func TestTheRegistrationsPagesAreAccessibleInEveryLanguage(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act := inst.CreateWaitlistedParties(t, "Grand rounds", 2, 2)
	seated := signup(t, inst, act, "alice", 2, false)
	waiting := signup(t, inst, act, "bob", 0, true)
	_, err := inst.API(t, "root", true).ReduceSeats(context.Background(), seated.ID, 1)
	require.NoError(t, err)
	_, err = inst.API(t, "root", true).CancelRegistration(context.Background(), waiting.ID)
	require.NoError(t, err)
	line := signup(t, inst, act, "carol", 2, true)
	for _, lang := range console.Languages {
		s := signInTab(t, inst, lang, "ana", "admin")
		s.open("/console/activities/" + act + "/registrations")
		s.accessible("registrations (" + lang + ")")
		s.open("/console/activities/" + act + "/registrations?user=nobody")
		s.accessible("registrations, no match (" + lang + ")")
		s.open("/console/activities/" + act + "/waiting")
		require.Equal(t, 1, countOf(t, s.ctx, "#waiting tbody tr"))
		s.accessible("waiting (" + lang + ")")
		s.open("/console/registrations/" + seated.ID)
		s.accessible("registration (" + lang + ")")
		s.open("/console/registrations/" + line.ID)
		s.accessible("waiting registration (" + lang + ")")
		s.open("/console/registrations/" + waiting.ID)
		s.accessible("cancelled registration (" + lang + ")")
		s.answerDialogs()
		s.open("/console/registrations/" + line.ID)
		do(t, s.ctx, 10*time.Second, chromedp.SetValue(chromedp.CSS("#seats-keep"), "3"))
		s.click("#seats-form button", "#seats-error")
		s.accessible("registration with a refusal (" + lang + ")")
	}
}

// TestADoorRoleIsRefusedTheRegistrationsPages: a door-role session gets
// 403 on every registrations page and action, and changes nothing.
func TestADoorRoleIsRefusedTheRegistrationsPages(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act := inst.CreateWaitlisted(t, "Doors", 1)
	reg := signup(t, inst, act, "alice", 0, false)
	door := signInTab(t, inst, "en", "dan", "door-a")
	for _, path := range []string{"/console/activities/" + act + "/registrations", "/console/activities/" + act + "/waiting",
		"/console/registrations/" + reg.ID} {
		require.Equal(t, http.StatusForbidden, door.status(path), path)
	}
	for _, action := range []string{"cancel", "status", "seats", "confirm"} {
		require.Equal(t, http.StatusForbidden, door.post("/console/registrations/"+reg.ID+"/"+action, true,
			map[string]string{"status": "approved", "seats": "1"}), action)
	}
	require.Equal(t, client.Pending, registrationOf(t, inst, reg.ID).Status)
}
