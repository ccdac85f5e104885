package console_test

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// TestDoorKeepsAdmittingOffline: with the network cut, the door page
// keeps admitting valid tickets and refusing revoked and duplicate ones
// from its own copy of the list; it opens again offline (its service
// worker) with its scans still to upload; when the network comes back
// every scan it admitted reaches the service exactly once (a ticket
// cancelled meanwhile as a conflict, shown to the staff), and the counts
// agree. Its copy of the list cannot be forgotten while scans wait to be
// sent, and can be once they are.
func TestDoorKeepsAdmittingOffline(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ev := newDoorEvent(t, inst, 10, client.NewCheckinList{}, "alice", "bob", "carol", "dave", "erin")
	tickets := map[string]string{}
	for u := range ev.regs {
		tickets[u] = doorTicket(t, inst, ev, u)
	}
	doorCancel(t, inst, ev, "bob")

	s := signInTab(t, inst, "en", "dan", "door-a")
	s.doorOpen(ev.list.ID, "hall-a-1")
	s.doorReady()
	s.doorNetwork(false)
	s.doorWaitOnline(false)

	r := s.doorWedge(tickets["alice"])
	require.Equal(t, "entered", r.Outcome, r)
	require.Equal(t, "device", r.Decided)
	require.Contains(t, r.Who, "alice")
	require.Contains(t, r.Note, "Decided on this device")
	r = s.doorWedge(tickets["alice"])
	require.Equal(t, "refused", r.Outcome, r)
	require.Equal(t, "already_checked_in", r.Reason)
	require.Contains(t, r.Previous, "through device hall-a-1")
	r = s.doorWedge(tickets["bob"])
	require.Equal(t, "refused", r.Outcome, r)
	require.Equal(t, "ticket_revoked", r.Reason)
	forged := strings.Split(tickets["alice"], ".")
	forged[2] = base64.RawURLEncoding.EncodeToString(make([]byte, 64))
	r = s.doorWedge(strings.Join(forged, "."))
	require.Equal(t, "invalid_ticket", r.Reason, "a forged ticket")
	doorCancel(t, inst, ev, "erin") // the device cannot know
	r = s.doorWedge(tickets["carol"])
	require.Equal(t, "entered", r.Outcome, r)
	s.doorQueue(2)

	// A reload while offline: the page comes from the service worker, the
	// scans to upload and the copy of the list from IndexedDB.
	s.doorNavigate(ev.list.ID)
	s.doorWaitOnline(false)
	s.doorQueue(2)
	s.doorReady()
	r = s.doorWedge(tickets["alice"])
	require.Equal(t, "already_checked_in", r.Reason, r)
	r = s.doorWedge(tickets["erin"])
	require.Equal(t, "entered", r.Outcome, r)
	r = s.doorWedge(tickets["dave"])
	require.Equal(t, "entered", r.Outcome, r)
	t.Logf("an offline decision took %s ms (scan to result, in the page)", r.MS)
	s.doorQueue(4)
	require.Empty(t, doorHistory(t, inst, ev.list.ID), "nothing reached the service while offline")
	kept := s.doorCopy(ev.list.ID)
	require.GreaterOrEqual(t, kept, 5+4, "the registrations and the scans to send")
	s.doorForget()
	do(t, s.ctx, doorWait, waitTrue(`document.getElementById('forget-status').textContent.startsWith('4 scans wait to be sent')`,
		doorWait, "the scans waiting named"))
	require.Equal(t, kept, s.doorCopy(ev.list.ID), "with scans to send, the copy is kept")
	s.doorQueue(4)

	s.doorNetwork(true)
	s.doorWaitOnline(true)
	s.doorQueue(0)
	history := doorHistory(t, inst, ev.list.ID)
	require.Len(t, history, 4, "each admitted scan once")
	byUser := map[string]client.CheckIn{}
	for _, c := range history {
		require.NotContains(t, byUser, c.UserID, "uploaded twice")
		byUser[c.UserID] = c
		require.True(t, c.Forced)
		require.Equal(t, "hall-a-1", c.Device)
	}
	require.Equal(t, []string{"alice", "carol", "erin", "dave"}, []string{history[0].UserID, history[1].UserID, history[2].UserID, history[3].UserID},
		"uploaded in the order scanned")
	require.NotNil(t, byUser["erin"].Conflict)
	require.Equal(t, "ticket_revoked", *byUser["erin"].Conflict)
	require.Nil(t, byUser["alice"].Conflict)

	l, err := inst.API(t, "admin", true).GetCheckinList(context.Background(), ev.list.ID)
	require.NoError(t, err)
	require.Equal(t, 4, l.CheckedIn)
	require.Equal(t, 1, l.Conflicts)
	do(t, s.ctx, doorWait,
		waitText("#count-checked-in", strconv.Itoa(l.CheckedIn), doorWait),
		waitText("#count-conflicts", "1", doorWait),
		waitTrue(`!!document.querySelector('#attention-list li[data-conflict="ticket_revoked"]')`, doorWait, "the conflict shown"),
	)
	require.Contains(t, text(t, s.ctx, "#attention-list"), "erin")

	// Once every scan is sent, the device's copy can be forgotten.
	s.doorForget()
	require.Eventually(t, func() bool { // the page navigates: a read may meet the old one going
		home, err := chromedp.Run(s.ctx, chromedp.Evaluate[bool](`location.pathname === '/console/' && document.readyState === 'complete'`))
		return err == nil && home
	}, doorWait, 50*time.Millisecond, "the console's home")
	require.Zero(t, s.doorCopy(ev.list.ID), "the copy is forgotten")
}

// TestDoorTwoDevicesOfflineConflict: two devices offline admit the same
// ticket; once both have uploaded, the service holds both check-ins, the
// second flagged already_checked_in, both door pages show the conflict,
// and so does the list's page in the console.
func TestDoorTwoDevicesOfflineConflict(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ev := newDoorEvent(t, inst, 10, client.NewCheckinList{}, "alice")
	ticket := doorTicket(t, inst, ev, "alice")

	one := signInTab(t, inst, "en", "dan", "door-a")
	two := signInTab(t, inst, "en", "eve", "door-a")
	for i, s := range []*session{one, two} {
		s.doorOpen(ev.list.ID, "hall-a-"+strconv.Itoa(i+1))
		s.doorReady()
		s.doorNetwork(false)
		s.doorWaitOnline(false)
	}
	for _, s := range []*session{one, two} {
		r := s.doorWedge(ticket)
		require.Equal(t, "entered", r.Outcome, r)
		require.Equal(t, "device", r.Decided)
		s.doorQueue(1)
	}
	for _, s := range []*session{one, two} {
		s.doorNetwork(true)
		s.doorQueue(0)
	}

	history := doorHistory(t, inst, ev.list.ID)
	require.Len(t, history, 2, "both devices' entries are recorded")
	require.Equal(t, "hall-a-1", history[0].Device)
	require.Nil(t, history[0].Conflict)
	require.Equal(t, "hall-a-2", history[1].Device)
	require.NotNil(t, history[1].Conflict)
	require.Equal(t, "already_checked_in", *history[1].Conflict)
	for _, s := range []*session{one, two} {
		do(t, s.ctx, doorWait,
			waitText("#count-conflicts", "1", doorWait),
			waitTrue(`!!document.querySelector('#attention-list li[data-conflict="already_checked_in"]')`, doorWait, "the conflict shown"))
		require.Contains(t, text(t, s.ctx, "#attention-list"), "hall-a-2")
	}

	admin := signInTab(t, inst, "en", "ana", "admin")
	admin.open("/console/checkin-lists/" + ev.list.ID)
	require.Equal(t, 1, countOf(t, admin.ctx, `#history tr[data-conflict="already_checked_in"]`))
	require.Equal(t, "1", text(t, admin.ctx, `#counts [data-field="conflicts"]`))
}
