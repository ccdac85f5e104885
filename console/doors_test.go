package console_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/console"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// clPostRedeem posts the door form of list to the console from the tab's
// page, with the session's CSRF token and the given Idempotency-Key, as a
// browser without scripts sends it, and returns the answer's status and
// the outcome its page shows.
func (s *session) clPostRedeem(list, code, key string) (status int, outcome string) {
	s.t.Helper()
	got := eval[[]string](s, fmt.Sprintf(`fetch('/console/doors/%s/redeem', {method: 'POST',
		headers: {'Content-Type': 'application/x-www-form-urlencoded'},
		body: new URLSearchParams({csrf: document.body.dataset.csrf, code: %q, type: 'entry', key: %q})})
		.then(async r => {
			const doc = new DOMParser().parseFromString(await r.text(), 'text/html');
			const res = doc.getElementById('result');
			return [String(r.status), res ? res.dataset.outcome : ''];
		})`, list, code, key))
	var n int
	_, err := fmt.Sscan(got[0], &n)
	require.NoError(s.t, err)
	return n, got[1]
}

// doorType scans code into the page's code field (a scanner, or someone
// typing, then Enter) and returns the result.
func (s *session) doorType(code string) doorResult {
	s.t.Helper()
	before := s.doorShown().Seq
	do(s.t, s.ctx, doorWait,
		chromedp.Focus("#code"),
		chromedp.KeyEvent(code+"\r"),
		waitTrue(fmt.Sprintf(`+document.getElementById('result').dataset.seq > %d`, before), doorWait, "the scan's result"),
	)
	require.Empty(s.t, attr(s.t, s.ctx, "#code", "value"))
	return s.doorShown()
}

// doorLists makes an activity with registrations for alice, bob and
// carol, and two lists of it: hall (door role door-a) and side (door-b).
func doorLists(t *testing.T, inst *apptest.Instance) (hall, side client.CheckinList, regs map[string]client.Registration) {
	t.Helper()
	ctx := context.Background()
	act := inst.CreateActivity(t, "Grand rounds", 10)
	regs = map[string]client.Registration{}
	for _, user := range []string{"alice", "bob", "carol"} {
		regs[user] = inst.MustSignup(t, act, user)
	}
	api := inst.API(t, "admin", true)
	hall, err := api.CreateCheckinList(ctx, client.NewCheckinList{Name: "Hall A", ActivityIDs: []string{act}, DoorRoles: []string{"door-a"}})
	require.NoError(t, err)
	side, err = api.CreateCheckinList(ctx, client.NewCheckinList{Name: "Side door", ActivityIDs: []string{act}, DoorRoles: []string{"door-b"}})
	require.NoError(t, err)
	return hall, side, regs
}

// TestADoorRoleChecksInAtItsDoor: a door role's landing page lists its
// door, whose page checks a registration in by id typed into its field
// ("entered"), refuses it the second time saying when and where it
// entered, and takes a ticket; the form of a browser without scripts sent
// twice is one scan; the role opens no other list's door, search or admin
// page.
func TestADoorRoleChecksInAtItsDoor(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	hall, side, regs := doorLists(t, inst)
	s := signInTab(t, inst, "en", "dan", "door-a")
	require.Equal(t, 1, countOf(t, s.ctx, `main a[href="/console/doors/`+hall.ID+`"]`))
	require.Equal(t, 0, countOf(t, s.ctx, `main a[href="/console/doors/`+side.ID+`"]`))
	s.doorOpen(hall.ID, "hall-a-1")
	require.Equal(t, "Hall A", text(t, s.ctx, "main h1"))
	do(t, s.ctx, doorWait, waitTrue(`!!document.getElementById('door').dataset.counted`, doorWait, "the stream's first counts"))

	r := s.doorType(regs["alice"].ID)
	require.Equal(t, "entered", r.Outcome, r)
	require.Equal(t, "Entered", r.Words)
	require.Contains(t, r.Who, "alice")
	do(t, s.ctx, doorWait, waitText("#count-checked-in", "1", doorWait))

	r = s.doorType(regs["alice"].ID)
	require.Equal(t, "refused", r.Outcome, r)
	require.Equal(t, "Already checked in.", r.Why)
	require.Contains(t, r.Previous, "through device hall-a-1")

	ticket, err := inst.API(t, "admin", true).Ticket(context.Background(), regs["bob"].ID)
	require.NoError(t, err)
	r = s.doorType(ticket.Ticket)
	require.Equal(t, "entered", r.Outcome, r)
	require.Contains(t, r.Who, "bob")
	s.doorMode("exit")
	r = s.doorType(regs["carol"].ID)
	require.Equal(t, "refused", r.Outcome, r)
	require.Equal(t, "This registration is not inside: it cannot exit.", r.Why)
	s.doorMode("entry")
	r = s.doorType("nonsense")
	require.Contains(t, r.Why, "This is not a ticket of this service")

	// The form of a browser without scripts, sent twice, is one scan.
	status, outcome := s.clPostRedeem(hall.ID, regs["carol"].ID, "door-test-key-1")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "entered", outcome)
	status, outcome = s.clPostRedeem(hall.ID, regs["carol"].ID, "door-test-key-1")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "entered", outcome, "the first answer, replayed")
	feed, err := inst.API(t, "admin", true).Checkins(context.Background(), hall.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, feed.Items, 3, "alice, bob and carol once each")

	// Another list's door and search, and the admin pages, are not the
	// role's.
	require.Equal(t, http.StatusForbidden, s.status("/console/doors/"+side.ID))
	require.Equal(t, http.StatusForbidden, s.status("/console/doors/"+side.ID+"/search?user=alice"))
	status, _ = s.clPostRedeem(side.ID, regs["alice"].ID, "door-test-key-2")
	require.Equal(t, http.StatusForbidden, status)
	for _, path := range []string{"/console/checkin-lists", "/console/checkin-lists/new", "/console/checkin-lists/" + hall.ID,
		"/console/checkin-lists/" + hall.ID + "/edit", "/console/activities/" + regs["alice"].ActivityID + "/attendance"} {
		require.Equal(t, http.StatusForbidden, s.status(path), path)
	}
}

// TestTheDoorWorksWithoutScripts: in a browser that runs no script the
// door page is a form that checks a registration in and shows the result,
// refusing a second entry with the time and device of the first.
func TestTheDoorWorksWithoutScripts(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	hall, _, regs := doorLists(t, inst)
	s := signInTab(t, inst, "en", "dan", "door-a")
	_, err := chromedp.Call(s.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
	require.NoError(t, err)
	do(t, s.ctx, doorWait, chromedp.Navigate(inst.URL+"/console/doors/"+hall.ID), chromedp.WaitVisible("#scan"))
	for _, want := range []string{"entered", "refused"} {
		do(t, s.ctx, doorWait,
			chromedp.SendKeys("#code", regs["alice"].ID),
			chromedp.Click(`#scan button[type="submit"]`),
			chromedp.WaitVisible(`#result[data-outcome="`+want+`"]`))
	}
	require.Equal(t, "Already checked in.", text(t, s.ctx, "#result-reason"))
	require.Contains(t, text(t, s.ctx, "#result-previous"), "through device console")
	do(t, s.ctx, doorWait, chromedp.Click(`#scan button[type="submit"]`), chromedp.WaitVisible("#code-error"))
	require.Equal(t, "Scan a ticket or type a registration id first.", text(t, s.ctx, "#code-error"))
}

// TestDoorFindsAndSeatsPeopleWithoutTickets: someone without a ticket is
// found by user id (online from the service, offline from the device's
// copy) and checked in from the result; a walk-in is registered and let
// in, or refused when the activity is full; an admin opens any door.
func TestDoorFindsAndSeatsPeopleWithoutTickets(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ev := newDoorEvent(t, inst, 4, client.NewCheckinList{}, "alice", "bob", "carol")
	s := signInTab(t, inst, "en", "dan", "door-a")
	s.doorOpen(ev.list.ID, "hall-a-1")
	s.doorReady()

	find := func(user string, n int) {
		do(t, s.ctx, doorWait,
			void(chromedp.Evaluate[bool](`document.getElementById('find').open = true; document.getElementById('search-results').textContent = ''; true`)),
			chromedp.SetValue("#search-user", user),
			chromedp.Click(`#search button[type="submit"]`),
			waitTrue(fmt.Sprintf(`document.querySelectorAll('#search-results li').length === %d && !!document.getElementById('search-status').textContent`, n),
				doorWait, fmt.Sprintf("%d registrations found", n)),
		)
	}
	find("carol", 1)
	require.Contains(t, text(t, s.ctx, "#search-results"), ev.regs["carol"].ID)
	before := s.doorShown().Seq
	do(t, s.ctx, doorWait, chromedp.Click(`#search-results button[data-registration="`+ev.regs["carol"].ID+`"]`),
		waitTrue(fmt.Sprintf(`+document.getElementById('result').dataset.seq > %d`, before), doorWait, "the result"))
	r := s.doorShown()
	require.Equal(t, "entered", r.Outcome, r)
	require.Contains(t, r.Who, "carol")
	find("nobody", 0)
	require.Equal(t, "No registration of this user.", text(t, s.ctx, "#search-status"))

	walkIn := func(user string) doorResult {
		before := s.doorShown().Seq
		do(t, s.ctx, doorWait,
			void(chromedp.Evaluate[bool](`document.getElementById('walkin-tool').open = true; true`)),
			chromedp.SetValue("#walkin-user", user),
			chromedp.Click(`#walkin button[type="submit"]`),
			waitTrue(fmt.Sprintf(`+document.getElementById('result').dataset.seq > %d`, before), doorWait, "the walk-in's result"))
		return s.doorShown()
	}
	r = walkIn("walt")
	require.Equal(t, "entered", r.Outcome, r)
	require.Contains(t, r.Who, "walt")
	r = walkIn("wanda")
	require.Equal(t, "refused", r.Outcome, r)
	require.Equal(t, "activity_full", r.Reason)
	r = walkIn("alice")
	require.Equal(t, "already_registered", r.Reason, r)

	// Offline, the device's own copy answers.
	s.doorNetwork(false)
	s.doorWaitOnline(false)
	find("bo", 1)
	require.Contains(t, text(t, s.ctx, "#search-results"), ev.regs["bob"].ID)
	do(t, s.ctx, doorWait,
		void(chromedp.Evaluate[bool](`document.getElementById('walkin-tool').open = true; true`)),
		chromedp.SetValue("#walkin-user", "wes"),
		chromedp.Click(`#walkin button[type="submit"]`),
		waitText("#walkin-error", "Walk-ins need the network.", doorWait))
	require.Equal(t, "true", attr(t, s.ctx, "#walkin-user", "aria-invalid"))

	admin := signInTab(t, inst, "en", "ana", "admin")
	admin.doorOpen(ev.list.ID, "")
	require.Equal(t, "Hall A", text(t, admin.ctx, "main h1"))
	require.Equal(t, 1, countOf(t, admin.ctx, `a[href="/console/checkin-lists/`+ev.list.ID+`"]`))
}

// TestDoorSearchAnswersJSON: the door's search answers JSON, refuses a
// user id the domain refuses and a session without the list's role.
func TestDoorSearchAnswersJSON(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	hall, side, regs := doorLists(t, inst)
	s := signInTab(t, inst, "en", "dan", "door-a")
	got := eval[[]any](s, fmt.Sprintf(`Promise.all([
		fetch('/console/doors/%[1]s/search?user=bob').then(async r => [r.status, await r.json()]),
		fetch('/console/doors/%[1]s/search?user=').then(async r => [r.status, (await r.json()).error.code]),
		fetch('/console/doors/%[2]s/search?user=bob').then(async r => [r.status, (await r.json()).error.code])])`, hall.ID, side.ID))
	ok := got[0].([]any)
	require.EqualValues(t, http.StatusOK, ok[0])
	items := ok[1].(map[string]any)["items"].([]any)
	require.Len(t, items, 1)
	require.Equal(t, regs["bob"].ID, items[0].(map[string]any)["registration_id"])
	require.Equal(t, true, items[0].(map[string]any)["valid"])
	require.Equal(t, []any{float64(http.StatusBadRequest), "invalid_request"}, got[1])
	require.Equal(t, []any{float64(http.StatusForbidden), "forbidden"}, got[2])
}

// TestTheDoorPageIsAccessible: a door role's landing page with its door,
// and the door page in each of its states (ready, entered, refused,
// offline with scans to upload, its tools open), pass axe-core in
// English, Traditional and Simplified Chinese.
func TestTheDoorPageIsAccessible(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	users := []string{"alice", "bob", "carol", "dave", "erin", "fay"}
	ev := newDoorEvent(t, inst, 10, client.NewCheckinList{}, users...)
	for i, lang := range console.Languages {
		s := signInTab(t, inst, lang, "dan", "door-a")
		require.Equal(t, 1, countOf(t, s.ctx, `main a[href="/console/doors/`+ev.list.ID+`"]`))
		s.accessible("home with a door (" + lang + ")")
		s.doorOpen(ev.list.ID, "hall-a-"+lang)
		s.doorReady()
		s.accessible("door, ready (" + lang + ")")
		first, second := ev.regs[users[2*i]].ID, ev.regs[users[2*i+1]].ID
		require.Equal(t, "entered", s.doorType(first).Outcome)
		s.accessible("door, entered (" + lang + ")")
		require.Equal(t, "refused", s.doorType(first).Outcome)
		s.accessible("door, refused (" + lang + ")")
		do(t, s.ctx, doorWait, void(chromedp.Evaluate[bool](`document.querySelectorAll('details.door-tool').forEach(d => d.open = true); true`)))
		s.accessible("door, tools open (" + lang + ")")
		s.doorNetwork(false)
		s.doorWaitOnline(false)
		require.Equal(t, "entered", s.doorType(second).Outcome)
		s.doorQueue(1)
		s.accessible("door, offline (" + lang + ")")
		s.doorNetwork(true)
		s.doorQueue(0)
	}
	require.Len(t, doorHistory(t, inst, ev.list.ID), 6)
}
