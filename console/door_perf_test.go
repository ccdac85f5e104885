package console_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// doorPerfTickets is the size of the list whose first sync is measured,
// and doorPerfSyncBytes the most that sync may take on the wire.
const (
	doorPerfTickets   = 2000
	doorPerfSyncBytes = 200_000
)

// TestDoorPerformance measures, and logs (it asserts no time, only the bytes of the sync): the first
// load of a door page until it can work offline (the page, its scripts,
// the keys and the sync of a 2,000-registration list), the bytes that
// sync took on the wire, and the time of a decision online and offline
// (from the scan to the result on the page, measured in the page).
func TestDoorPerformance(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ev := newDoorEvent(t, inst, doorPerfTickets+10, client.NewCheckinList{}, "alice", "bob", "carol", "dave", "erin", "fay")
	start := time.Now()
	counts := apptest.SignupBurst(t, []*apptest.Instance{inst}, ev.activity, "perf-", doorPerfTickets-len(ev.regs))
	require.Equal(t, doorPerfTickets-len(ev.regs), counts[201], counts)
	t.Logf("signed up %d users in %s", doorPerfTickets-len(ev.regs), time.Since(start).Round(time.Millisecond))
	users := []string{"alice", "bob", "carol", "dave", "erin", "fay"}
	tickets := map[string]string{}
	for _, u := range users {
		tickets[u] = doorTicket(t, inst, ev, u)
	}

	s := signInTab(t, inst, "en", "dan", "door-a")
	doorEval[bool](s, `localStorage.setItem('capacityd-door-device', 'perf-1'); true`)
	start = time.Now()
	s.doorNavigate(ev.list.ID)
	s.doorReady()
	wall := time.Since(start)
	require.Equal(t, strconv.Itoa(doorPerfTickets), attr(t, s.ctx, "#door", "data-tickets"))
	var sync struct {
		Pages                              int
		Transfer, Encoded, Decoded, Millis float64
	}
	raw := doorEval[string](s, `JSON.stringify(performance.getEntriesByType('resource')
		.filter(e => e.name.includes('/tickets?') && !e.name.includes('wait='))
		.reduce((a, e) => ({Pages: a.Pages + 1, Transfer: a.Transfer + e.transferSize, Encoded: a.Encoded + e.encodedBodySize,
			Decoded: a.Decoded + e.decodedBodySize, Millis: a.Millis + e.duration}), {Pages: 0, Transfer: 0, Encoded: 0, Decoded: 0, Millis: 0}))`)
	require.NoError(t, json.Unmarshal([]byte(raw), &sync))
	t.Logf("first offline-ready load: %s ms in the page (navigation to ready), %s wall; %d registrations",
		attr(t, s.ctx, "#door", "data-ready-ms"), wall.Round(time.Millisecond), doorPerfTickets)
	t.Logf("the %d-registration sync: %d pages, %.0f bytes on the wire (%.0f body bytes, %.0f decoded), %.0f ms of requests",
		doorPerfTickets, sync.Pages, sync.Transfer, sync.Encoded, sync.Decoded, sync.Millis)
	require.Less(t, sync.Encoded, float64(doorPerfSyncBytes), "the first sync's bodies on the wire (gzip)")

	var online, offline []float64
	for _, u := range users[:3] {
		r := s.doorWedge(tickets[u])
		require.Equal(t, "entered", r.Outcome, r)
		online = append(online, parseMS(t, r.MS))
	}
	s.doorNetwork(false)
	s.doorWaitOnline(false)
	for _, u := range users[3:] {
		r := s.doorWedge(tickets[u])
		require.Equal(t, "entered", r.Outcome, r)
		require.Equal(t, "device", r.Decided)
		offline = append(offline, parseMS(t, r.MS))
	}
	r := s.doorWedge(tickets["alice"])
	require.Equal(t, "already_checked_in", r.Reason)
	offline = append(offline, parseMS(t, r.MS))
	t.Logf("a decision online: %s ms; offline: %s ms (scan to result, in the page)", msList(online), msList(offline))
	s.doorNetwork(true)
	s.doorQueue(0)
	require.Len(t, doorHistory(t, inst, ev.list.ID), 6)
	do(t, s.ctx, doorWait, chromedp.Reload(), waitTrue(`document.getElementById('door').dataset.ready === '1'`, doorWait, "ready again"))
	t.Logf("a second load (copy kept): ready after %s ms", attr(t, s.ctx, "#door", "data-ready-ms"))
}

func parseMS(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, s)
	return v
}

func msList(v []float64) string {
	v = slices.Clone(v)
	slices.Sort(v)
	return fmt.Sprintf("%v (median %.1f)", v, v[len(v)/2])
}
