package console_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/console"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// clScan checks a code in at the door page open in the tab, as type
// (entry or exit), and waits for the result.
func (s *session) clScan(code, typ string) {
	s.t.Helper()
	s.clSet(map[string]string{"code": code})
	do(s.t, s.ctx, 15*time.Second, chromedp.Click(`input[name="type"][value="`+typ+`"]`))
	s.clSubmit("main form button[type=submit]")
	require.Equal(s.t, 1, countOf(s.t, s.ctx, "#result"))
}

// clPostRedeem posts the door form of list to the console from the tab's
// page, with the session's CSRF token and the given Idempotency-Key, and
// returns the answer's status and whether its page says the scan was a
// replay.
func (s *session) clPostRedeem(list, code, key string) (status int, outcome string) {
	s.t.Helper()
	s.clSameOriginWrites()
	got := clEval[[]string](s.t, s, fmt.Sprintf(`fetch('/console/doors/%s/redeem', {method: 'POST',
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
// door, whose page checks a registration in by id ("entered"), refuses it
// the second time saying when and where it entered, and takes a ticket;
// a form sent twice is one scan; the role opens no other list's door and
// no admin page.
func TestADoorRoleChecksInAtItsDoor(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	hall, side, regs := doorLists(t, inst)
	s := clSignIn(t, inst, "en", "dan", "door-a")
	require.Equal(t, 1, countOf(t, s.ctx, `main a[href="/console/doors/`+hall.ID+`"]`))
	require.Equal(t, 0, countOf(t, s.ctx, `main a[href="/console/doors/`+side.ID+`"]`))
	s.clSubmit(`main a[href="/console/doors/` + hall.ID + `"]`)
	require.Equal(t, "Hall A", text(t, s.ctx, "main h1"))
	do(t, s.ctx, 30*time.Second, waitTrue(`!!document.getElementById('counts').dataset.updated`, 30*time.Second, "the stream's first counts"))

	s.clScan(regs["alice"].ID, "entry")
	require.Equal(t, "entered", attr(t, s.ctx, "#result", "data-outcome"))
	require.Equal(t, "Entered", text(t, s.ctx, "#result-words"))
	require.Contains(t, text(t, s.ctx, "#result-who"), "alice")
	require.Equal(t, "1", text(t, s.ctx, `#counts [data-field="checked_in"]`))

	s.clScan(regs["alice"].ID, "entry")
	require.Equal(t, "refused", attr(t, s.ctx, "#result", "data-outcome"))
	require.Equal(t, "Already checked in.", text(t, s.ctx, "#result-reason"))
	require.Contains(t, text(t, s.ctx, "#result-previous"), "by device console")
	require.Contains(t, attr(t, s.ctx, "#code", "aria-describedby"), "result-words")

	ticket, err := inst.API(t, "admin", true).Ticket(context.Background(), regs["bob"].ID)
	require.NoError(t, err)
	s.clScan(ticket.Ticket, "entry")
	require.Equal(t, "entered", attr(t, s.ctx, "#result", "data-outcome"))
	require.Contains(t, text(t, s.ctx, "#result-who"), "bob")
	s.clScan(regs["carol"].ID, "exit")
	require.Equal(t, "refused", attr(t, s.ctx, "#result", "data-outcome"))
	require.Equal(t, "This registration is not inside: it cannot exit.", text(t, s.ctx, "#result-reason"))
	s.clScan("nonsense", "entry")
	require.Contains(t, text(t, s.ctx, "#result-reason"), "This is not a ticket of this service")

	// The same form sent twice is one scan.
	status, outcome := s.clPostRedeem(hall.ID, regs["carol"].ID, "door-test-key-1")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "entered", outcome)
	status, outcome = s.clPostRedeem(hall.ID, regs["carol"].ID, "door-test-key-1")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "entered", outcome, "the first answer, replayed")
	feed, err := inst.API(t, "admin", true).Checkins(context.Background(), hall.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, feed.Items, 3, "alice, bob and carol once each")

	// Another list's door, and the admin pages, are not the role's.
	require.Equal(t, http.StatusForbidden, s.status("/console/doors/"+side.ID))
	status, _ = s.clPostRedeem(side.ID, regs["alice"].ID, "door-test-key-2")
	require.Equal(t, http.StatusForbidden, status)
	for _, path := range []string{"/console/checkin-lists", "/console/checkin-lists/new", "/console/checkin-lists/" + hall.ID,
		"/console/checkin-lists/" + hall.ID + "/edit", "/console/activities/" + regs["alice"].ActivityID + "/attendance"} {
		require.Equal(t, http.StatusForbidden, s.status(path), path)
	}
}

// TestTheDoorPageIsAccessible: a door role's landing page with its door,
// and the door page with a result, pass axe-core in English, Traditional
// and Simplified Chinese; an admin opens any door.
func TestTheDoorPageIsAccessible(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	hall, side, regs := doorLists(t, inst)
	for i, lang := range console.Languages {
		s := clSignIn(t, inst, lang, "dan", "door-a")
		require.Equal(t, 1, countOf(t, s.ctx, `main a[href="/console/doors/`+hall.ID+`"]`))
		s.accessible("home with a door (" + lang + ")")
		s.clOpen("/console/doors/" + hall.ID)
		s.accessible("door (" + lang + ")")
		user := []string{"alice", "bob", "carol"}[i]
		s.clScan(regs[user].ID, "entry")
		require.Equal(t, "entered", attr(t, s.ctx, "#result", "data-outcome"))
		s.accessible("door, entered (" + lang + ")")
		s.clScan(regs[user].ID, "entry")
		require.Equal(t, "refused", attr(t, s.ctx, "#result", "data-outcome"))
		s.accessible("door, refused (" + lang + ")")
	}
	admin := clSignIn(t, inst, "en", "ana", "admin")
	admin.clOpen("/console/doors/" + side.ID)
	require.Equal(t, "Side door", text(t, admin.ctx, "main h1"))
}
