package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/console"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

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
	s := signInTab(t, inst, "en", "ana", "admin")

	s.open("/console/checkin-lists/new?activity=" + act)
	require.Equal(t, act, eval[string](s, `document.getElementById('activity_ids').value`))
	form := map[string]string{"name": "Hall A", "activity_ids": act + " a_01ARZ3NDEKTSV4RRFFQ69G5FAV", "entry": "once",
		"max_inside": "5", "door_roles": "door-a"}
	s.fill(form)
	s.submit("main form.stack button[type=submit]", "main h1")
	require.Contains(t, text(t, s.ctx, "#activity_ids-error"), "activity a_01ARZ3NDEKTSV4RRFFQ69G5FAV not found")
	require.Equal(t, "true", attr(t, s.ctx, "#activity_ids", "aria-invalid"))
	require.Equal(t, "Hall A", eval[string](s, `document.getElementById('name').value`), "the form keeps what was typed")

	form["activity_ids"], form["opens_at"], form["closes_at"] = act, "2030-01-02T10:00", "2030-01-02T09:00"
	s.fill(form)
	s.submit("main form.stack button[type=submit]", "main h1")
	require.Contains(t, text(t, s.ctx, "#closes_at-error"), "closes_at must be after opens_at")
	require.Contains(t, attr(t, s.ctx, "#closes_at", "aria-describedby"), "closes_at-error")

	form["opens_at"], form["closes_at"] = "", ""
	s.fill(form)
	s.submit("main form.stack button[type=submit]", "main h1")
	path := eval[string](s, `location.pathname`)
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

	s.open(path)
	require.Equal(t, 2, countOf(t, s.ctx, "#history tbody tr"))
	require.Equal(t, "2", attr(t, s.ctx, "#history tbody tr", "data-seq"), "newest first")
	require.Equal(t, "already_checked_in", attr(t, s.ctx, `#history tr[data-seq="2"]`, "data-conflict"))
	row := text(t, s.ctx, `#history tr[data-seq="2"]`)
	require.Contains(t, row, "Already checked in")
	require.Contains(t, row, "hall-a-2")
	require.Contains(t, row, alice.ID)
	require.Equal(t, 0, countOf(t, s.ctx, `#history tr[data-seq="1"][data-conflict]`))

	s.open("/console/checkin-lists?activity=" + act)
	require.Equal(t, 1, countOf(t, s.ctx, `tr[data-list="`+id+`"]`))

	// Edit, then delete.
	s.open(path + "/edit")
	require.Equal(t, "door-a", eval[string](s, `document.getElementById('door_roles').value`))
	s.fill(map[string]string{"name": "Hall A, main door", "max_inside": ""})
	s.submit("main form.stack button[type=submit]", "main h1")
	require.Equal(t, path, eval[string](s, `location.pathname`))
	require.Equal(t, "Hall A, main door", text(t, s.ctx, "main h1"))
	// The page as rendered, and as its live counts keep it.
	do(t, s.ctx, 10*time.Second, waitText(`#counts [data-field="max_inside"]`, "No limit", 10*time.Second))
	s.submit(`form[action$="/delete"] button`, "main h1")
	require.Equal(t, "/console/checkin-lists", eval[string](s, `location.pathname`))
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
		s := signInTab(t, inst, lang, "ana", "admin")
		s.open("/console/checkin-lists")
		require.Equal(t, 1, countOf(t, s.ctx, `tr[data-list="`+l.ID+`"]`))
		s.accessible("check-in lists (" + lang + ")")
		s.open("/console/checkin-lists/new")
		s.fill(map[string]string{"name": "Side door", "activity_ids": act, "max_inside": "0"})
		s.submit("main form.stack button[type=submit]", "main h1")
		require.Equal(t, 1, countOf(t, s.ctx, "#max_inside-error"))
		s.accessible("new check-in list, refused (" + lang + ")")
		s.open("/console/checkin-lists/" + l.ID)
		require.Equal(t, 1, countOf(t, s.ctx, "#history tr[data-conflict]"))
		s.accessible("check-in list (" + lang + ")")
		s.open("/console/checkin-lists/" + l.ID + "/edit")
		s.accessible("edit check-in list (" + lang + ")")
	}
}
