package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// The helpers of the door page's browser tests (door_*_test.go).

// doorWait is how long a door test waits for the page: the machine is
// shared, and the tests run with -race.
const doorWait = 30 * time.Second

// doorEvent is an activity with registrations and a check-in list of it
// whose door role is door-a.
type doorEvent struct {
	activity string
	list     client.CheckinList
	regs     map[string]client.Registration
}

// newDoorEvent makes an activity of capacity seats with a registration
// for each user, and a list of it for door-a (entry once unless list says
// otherwise).
func newDoorEvent(t *testing.T, inst *apptest.Instance, capacity int, list client.NewCheckinList, users ...string) doorEvent {
	t.Helper()
	act := inst.CreateActivity(t, "Grand rounds", capacity)
	ev := doorEvent{activity: act, regs: map[string]client.Registration{}}
	for _, u := range users {
		ev.regs[u] = inst.MustSignup(t, act, u)
	}
	list.ActivityIDs = []string{act}
	if list.Name == "" {
		list.Name = "Hall A"
	}
	if list.DoorRoles == nil {
		list.DoorRoles = []string{"door-a"}
	}
	l, err := inst.API(t, "admin", true).CreateCheckinList(context.Background(), list)
	require.NoError(t, err)
	ev.list = l
	return ev
}

// doorTicket is the ticket of user's registration, as its owner reads it.
func doorTicket(t *testing.T, inst *apptest.Instance, ev doorEvent, user string) string {
	t.Helper()
	r := inst.MustDo(t, http.MethodGet, "/v1/registrations/"+ev.regs[user].ID+"/ticket", inst.Token(t, user, false), nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	var tk struct {
		Ticket string `json:"ticket"`
	}
	r.JSON(t, &tk)
	return tk.Ticket
}

// doorCancel cancels user's registration, as its owner.
func doorCancel(t *testing.T, inst *apptest.Instance, ev doorEvent, user string) {
	t.Helper()
	r := inst.MustDo(t, http.MethodPost, "/v1/registrations/"+ev.regs[user].ID+"/cancel", inst.Token(t, user, false), map[string]any{})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
}

// doorHistory is the list's check-ins, read with an admin token.
func doorHistory(t *testing.T, inst *apptest.Instance, list string) []client.CheckIn {
	t.Helper()
	feed, err := inst.API(t, "admin", true).Checkins(context.Background(), list, 0, 500)
	require.NoError(t, err)
	return feed.Items
}

// doorEval evaluates js in the tab (awaiting a promise).
func doorEval[T any](s *session, js string) T {
	s.t.Helper()
	v, err := chromedp.Run(s.ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	require.NoError(s.t, err)
	return v
}

// doorOpen opens the door page of list as device, and waits for its
// script.
func (s *session) doorOpen(list, device string) {
	s.t.Helper()
	if device != "" {
		doorEval[bool](s, fmt.Sprintf(`localStorage.setItem('capacityd-door-device', %q); true`, device))
	}
	s.doorNavigate(list)
}

// doorNavigate loads the door page of list and waits for its script.
func (s *session) doorNavigate(list string) {
	s.t.Helper()
	do(s.t, s.ctx, doorWait,
		chromedp.Navigate(s.inst.URL+"/console/doors/"+list),
		waitTrue(`!!document.getElementById('door') && document.getElementById('door').classList.contains('door-live')`, doorWait, "the door's script"),
	)
}

// doorReady waits until the page can work offline: its worker keeps the
// page, the keys and the whole list are on the device.
func (s *session) doorReady() {
	s.t.Helper()
	do(s.t, s.ctx, doorWait, waitTrue(`document.getElementById('door').dataset.ready === '1'`, doorWait, "the door to be ready offline"))
}

// doorResult is what the result panel shows.
type doorResult struct {
	Seq      int    `json:"seq"`
	Outcome  string `json:"outcome"`
	Reason   string `json:"reason"`
	Decided  string `json:"decided"`
	Words    string `json:"words"`
	Why      string `json:"why"`
	Who      string `json:"who"`
	Previous string `json:"previous"`
	Note     string `json:"note"`
	MS       string `json:"ms"`
}

// doorShown reads the result panel.
func (s *session) doorShown() doorResult {
	s.t.Helper()
	raw := doorEval[string](s, `(() => { const r = document.getElementById('result'), x = (id) => document.getElementById(id).textContent;
		return JSON.stringify({seq: +r.dataset.seq, outcome: r.dataset.outcome, reason: r.dataset.reason || '', decided: r.dataset.decided || '',
			words: x('result-words'), why: x('result-reason'), who: x('result-who'), previous: x('result-previous'), note: x('result-note'),
			ms: r.dataset.ms || ''}); })()`)
	var r doorResult
	require.NoError(s.t, json.Unmarshal([]byte(raw), &r))
	return r
}

// doorWedge scans code as a keyboard-wedge scanner does (the code's keys
// and Enter, with no field focused), and returns the result it shows.
// The keys are dispatched to the focused element in one turn of the
// page's script: a scanner types a code in milliseconds, but keys sent
// one by one through the DevTools protocol on a loaded machine were once
// more than the page's pause between two scans (1 s) apart, and the page
// rightly took the rest of the code for a new scan.
func (s *session) doorWedge(code string) doorResult {
	s.t.Helper()
	before := s.doorShown().Seq
	keys, err := json.Marshal(append(strings.Split(code, ""), "Enter"))
	require.NoError(s.t, err)
	do(s.t, s.ctx, doorWait,
		void(chromedp.Evaluate[bool](`document.activeElement && document.activeElement.blur && document.activeElement.blur(); true`)),
		void(chromedp.Evaluate[bool](fmt.Sprintf(`%s.forEach(function (k) {
			(document.activeElement || document.body).dispatchEvent(new KeyboardEvent('keydown', { key: k, bubbles: true, cancelable: true }));
		}); true`, keys))),
		waitTrue(fmt.Sprintf(`+document.getElementById('result').dataset.seq > %d`, before), doorWait, "the scan's result"),
	)
	return s.doorShown()
}

// doorMode picks entry or exit on the page's switch.
func (s *session) doorMode(typ string) {
	s.t.Helper()
	do(s.t, s.ctx, doorWait, chromedp.Click(`label[for="type-`+typ+`"]`),
		waitTrue(fmt.Sprintf(`document.getElementById('door').dataset.mode === %q`, typ), doorWait, "the switch"))
}

// doorNetwork cuts the tab's network (and its service worker's), as a
// venue's network that goes away does, or gives it back.
func (s *session) doorNetwork(on bool) {
	s.t.Helper()
	yes := true
	_, err := chromedp.Call(s.ctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
		EmulateOfflineServiceWorker: &yes,
		MatchedNetworkConditions:    []*network.Conditions{{Offline: !on, DownloadThroughput: -1, UploadThroughput: -1}},
	})
	require.NoError(s.t, err)
	_, err = chromedp.Call(s.ctx, network.OverrideNetworkState, network.OverrideNetworkStateParams{Offline: !on, DownloadThroughput: -1, UploadThroughput: -1})
	require.NoError(s.t, err)
}

// doorWaitOnline waits until the page says it is online (on) or offline.
func (s *session) doorWaitOnline(on bool) {
	s.t.Helper()
	want := "0"
	if on {
		want = "1"
	}
	do(s.t, s.ctx, doorWait, waitTrue(fmt.Sprintf(`document.getElementById('door').dataset.online === %q`, want), doorWait, "the page's network state"))
}

// doorQueue waits until the page holds n scans to upload.
func (s *session) doorQueue(n int) {
	s.t.Helper()
	do(s.t, s.ctx, doorWait, waitTrue(fmt.Sprintf(`document.getElementById('door').dataset.queue === '%d'`, n), doorWait,
		fmt.Sprintf("%d scans to upload", n)))
}

// doorForget asks the page to forget this device's copy of its list.
func (s *session) doorForget() {
	s.t.Helper()
	do(s.t, s.ctx, doorWait,
		void(chromedp.Evaluate[bool](`document.getElementById('settings').open = true; true`)),
		chromedp.Click(`#forget-submit`))
}

// doorCopy counts what the device keeps of list in IndexedDB: its
// registrations, its rules, counts and cursor, and its scans.
func (s *session) doorCopy(list string) int {
	s.t.Helper()
	return doorEval[int](s, fmt.Sprintf(`new Promise((resolve, reject) => {
		const open = indexedDB.open('capacityd-door');
		open.onerror = () => reject(open.error);
		open.onsuccess = () => {
			const x = open.result.transaction(['tickets', 'meta', 'scans']);
			const all = IDBKeyRange.bound([%[1]q], [%[1]q, []]);
			const counts = [x.objectStore('tickets').count(all), x.objectStore('meta').count(IDBKeyRange.bound(%[1]q + ':', %[1]q + ':\uffff')),
				x.objectStore('scans').index('state').count(all)];
			x.oncomplete = () => { open.result.close(); resolve(counts.reduce((a, r) => a + r.result, 0)); };
		};
	})`, list))
}
