package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/console"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// clSignIn is signInTab in a browser context of its own. The tabs of one
// browser context share their cookies, and every test's instance is on
// 127.0.0.1: a tab of a test running at the same time that signs in would
// otherwise take this tab's session cookie.
func clSignIn(t *testing.T, inst *apptest.Instance, lang, sub string, roles ...string) *session {
	t.Helper()
	ctx, cancel := chromedp.NewContext(tab(t), chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(900, 720)))
	link, err := console.NewLink(context.Background(), inst.App.Store, console.Grant{Sub: sub, Roles: roles}, time.Minute, time.Now())
	require.NoError(t, err)
	_, err = chromedp.Call(ctx, network.Enable, network.EnableParams{})
	require.NoError(t, err)
	_, err = chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": lang}})
	require.NoError(t, err)
	do(t, ctx, 40*time.Second, chromedp.Navigate(inst.URL+link), chromedp.WaitVisible("main h1"))
	require.Equal(t, lang, attr(t, ctx, "html", "lang"))
	return &session{t: t, ctx: ctx, inst: inst}
}

// clOpen goes to the console path and waits for its page (chromedp's
// Navigate does not come back from a URL with a query here).
func (s *session) clOpen(path string) {
	s.t.Helper()
	do(s.t, s.ctx, 15*time.Second, void(chromedp.Evaluate[bool](
		fmt.Sprintf(`document.body.dataset.leaving = '1'; location.assign(%q); true`, path))))
	s.clWaitNewPage()
}

// clWaitNewPage waits for the page a navigation leads to; a wait that the
// navigation interrupts (its document went away) is tried again.
func (s *session) clWaitNewPage() {
	s.t.Helper()
	arrived := waitTrue(`!!document.body && !document.body.dataset.leaving && document.readyState === 'complete' && !!document.querySelector('main h1')`,
		2*time.Second, "the next page")
	deadline := time.Now().Add(40 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(s.ctx, 3*time.Second)
		err := chromedp.Do(ctx, arrived)
		cancel()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			require.NoError(s.t, err)
		}
	}
}

// clEval evaluates js in the tab.
func clEval[T any](t *testing.T, s *session, js string) T {
	t.Helper()
	v, err := chromedp.Run(s.ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	return v
}

// TestACheckinListIsCreatedAndFollowedLive: an admin creates a list
// through the form (the domain's refusals shown beside their fields),
// watches its counts move live while another instance records scans, sees
// a forced upload's conflict in its history, edits it and deletes it.
func TestACheckinListIsCreatedAndFollowedLive(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	other := apptest.Start(t, apptest.Options{DatabaseURL: inst.DatabaseURL})
	act := inst.CreateActivity(t, "Grand rounds", 10)
	alice := inst.MustSignup(t, act, "alice")
	s := clSignIn(t, inst, "en", "ana", "admin")

	s.clOpen("/console/checkin-lists/new?activity=" + act)
	require.Equal(t, act, clEval[string](t, s, `document.getElementById('activity_ids').value`))
	form := map[string]string{"name": "Hall A", "activity_ids": act + " a_01ARZ3NDEKTSV4RRFFQ69G5FAV", "entry": "once",
		"max_inside": "5", "door_roles": "door-a"}
	s.fill(form)
	s.submit("main form.stack button[type=submit]", "main h1")
	require.Contains(t, text(t, s.ctx, "#activity_ids-error"), "activity a_01ARZ3NDEKTSV4RRFFQ69G5FAV not found")
	require.Equal(t, "true", attr(t, s.ctx, "#activity_ids", "aria-invalid"))
	require.Equal(t, "Hall A", clEval[string](t, s, `document.getElementById('name').value`), "the form keeps what was typed")

	form["activity_ids"], form["opens_at"], form["closes_at"] = act, "2030-01-02T10:00", "2030-01-02T09:00"
	s.fill(form)
	s.submit("main form.stack button[type=submit]", "main h1")
	require.Contains(t, text(t, s.ctx, "#closes_at-error"), "closes_at must be after opens_at")
	require.Contains(t, attr(t, s.ctx, "#closes_at", "aria-describedby"), "closes_at-error")

	form["opens_at"], form["closes_at"] = "", ""
	s.fill(form)
	s.submit("main form.stack button[type=submit]", "main h1")
	path := clEval[string](t, s, `location.pathname`)
	require.True(t, strings.HasPrefix(path, "/console/checkin-lists/cl_"), path)
	id := strings.TrimPrefix(path, "/console/checkin-lists/")
	require.Equal(t, "Hall A", text(t, s.ctx, "main h1"))
	require.Equal(t, "/console/api/v1/checkin-lists/"+id+"/stream", attr(t, s.ctx, "#counts", "data-stream"))
	require.Equal(t, "5", text(t, s.ctx, `#counts [data-field="max_inside"]`))

	// Scans recorded through another instance move the counts live.
	ctx := context.Background()
	do(t, s.ctx, 30*time.Second, waitTrue(`!!document.getElementById('counts').dataset.updated`, 30*time.Second, "the stream's first counts"))
	api := other.API(t, "admin", true)
	_, err := api.Redeem(ctx, id, client.RedeemRequest{RegistrationID: alice.ID, Device: "hall-a-1"}, "")
	require.NoError(t, err)
	do(t, s.ctx, 30*time.Second,
		waitText(`#counts [data-field="checked_in"]`, "1", 30*time.Second),
		waitText(`#counts [data-field="inside"]`, "1", 30*time.Second))
	// An offline device's upload of a second entry is recorded, as a
	// conflict.
	at := time.Now().Add(-time.Minute).UTC()
	_, err = api.Redeem(ctx, id, client.RedeemRequest{RegistrationID: alice.ID, Device: "hall-a-2", Force: true, At: &at}, "")
	require.NoError(t, err)
	do(t, s.ctx, 30*time.Second, waitText(`#counts [data-field="conflicts"]`, "1", 30*time.Second))

	s.clOpen(path)
	require.Equal(t, 2, countOf(t, s.ctx, "#history tbody tr"))
	require.Equal(t, "2", attr(t, s.ctx, "#history tbody tr", "data-seq"), "newest first")
	require.Equal(t, "already_checked_in", attr(t, s.ctx, `#history tr[data-seq="2"]`, "data-conflict"))
	row := text(t, s.ctx, `#history tr[data-seq="2"]`)
	require.Contains(t, row, "Already checked in")
	require.Contains(t, row, "hall-a-2")
	require.Contains(t, row, alice.ID)
	require.Equal(t, 0, countOf(t, s.ctx, `#history tr[data-seq="1"][data-conflict]`))

	s.clOpen("/console/checkin-lists?activity=" + act)
	require.Equal(t, 1, countOf(t, s.ctx, `tr[data-list="`+id+`"]`))

	// Edit, then delete.
	s.clOpen(path + "/edit")
	require.Equal(t, "door-a", clEval[string](t, s, `document.getElementById('door_roles').value`))
	s.fill(map[string]string{"name": "Hall A, main door", "max_inside": ""})
	s.submit("main form.stack button[type=submit]", "main h1")
	require.Equal(t, path, clEval[string](t, s, `location.pathname`))
	require.Equal(t, "Hall A, main door", text(t, s.ctx, "main h1"))
	require.Equal(t, "No limit", text(t, s.ctx, `#counts [data-field="max_inside"]`))
	s.submit(`form[action$="/delete"] button`, "main h1")
	require.Equal(t, "/console/checkin-lists", clEval[string](t, s, `location.pathname`))
	require.Equal(t, 0, countOf(t, s.ctx, `tr[data-list="`+id+`"]`))
	require.Equal(t, 404, s.status(path))
}

// TestTheCheckinPagesAreAccessible: the lists, the form with a refusal
// beside its field, a list with a conflict in its history, and its edit
// form pass axe-core in English, Traditional and Simplified Chinese.
func TestTheCheckinPagesAreAccessible(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act := inst.CreateActivity(t, "Grand rounds", 10)
	alice := inst.MustSignup(t, act, "alice")
	api := inst.API(t, "admin", true)
	ctx := context.Background()
	limit := 40
	l, err := api.CreateCheckinList(ctx, client.NewCheckinList{Name: "Hall A", ActivityIDs: []string{act}, MaxInside: &limit, DoorRoles: []string{"door-a"}})
	require.NoError(t, err)
	_, err = api.Redeem(ctx, l.ID, client.RedeemRequest{RegistrationID: alice.ID, Device: "hall-a-1"}, "")
	require.NoError(t, err)
	_, err = api.Redeem(ctx, l.ID, client.RedeemRequest{RegistrationID: alice.ID, Device: "hall-a-2", Force: true}, "")
	require.NoError(t, err)
	for _, lang := range console.Languages {
		s := clSignIn(t, inst, lang, "ana", "admin")
		s.clOpen("/console/checkin-lists")
		require.Equal(t, 1, countOf(t, s.ctx, `tr[data-list="`+l.ID+`"]`))
		s.accessible("check-in lists (" + lang + ")")
		s.clOpen("/console/checkin-lists/new")
		s.fill(map[string]string{"name": "Side door", "activity_ids": act, "max_inside": "0"})
		s.submit("main form.stack button[type=submit]", "main h1")
		require.Equal(t, 1, countOf(t, s.ctx, "#max_inside-error"))
		s.accessible("new check-in list, refused (" + lang + ")")
		s.clOpen("/console/checkin-lists/" + l.ID)
		require.Equal(t, 1, countOf(t, s.ctx, "#history tr[data-conflict]"))
		s.accessible("check-in list (" + lang + ")")
		s.clOpen("/console/checkin-lists/" + l.ID + "/edit")
		s.accessible("edit check-in list (" + lang + ")")
	}
}
