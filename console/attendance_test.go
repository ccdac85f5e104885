package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/console"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// endedActivity is an activity of 60 minutes that ended two hours ago,
// with a threshold of 80 %: alice was inside 45 minutes, bob from its
// tenth minute to its end, carol never came. It returns the activity and
// the registrations by user.
func endedActivity(t *testing.T, inst *apptest.Instance) (string, map[string]client.Registration) {
	t.Helper()
	ctx := context.Background()
	act := inst.CreateActivity(t, "Seminar", 10)
	regs := map[string]client.Registration{}
	for _, user := range []string{"alice", "bob", "carol"} {
		regs[user] = inst.MustSignup(t, act, user)
	}
	api := inst.API(t, "admin", true)
	l, err := api.CreateCheckinList(ctx, client.NewCheckinList{Name: "Hall", ActivityIDs: []string{act}, Entry: client.EntryReentry})
	require.NoError(t, err)
	start := time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Minute)
	for _, u := range []struct {
		user, typ string
		minute    int
	}{{"alice", client.ScanEntry, 0}, {"alice", client.ScanExit, 45}, {"bob", client.ScanEntry, 10}} {
		at := start.Add(time.Duration(u.minute) * time.Minute)
		_, err := api.Redeem(ctx, l.ID, client.RedeemRequest{RegistrationID: regs[u.user].ID, Type: u.typ, Device: "d1", Force: true, At: &at}, "")
		require.NoError(t, err)
	}
	end, percent := start.Add(time.Hour), 80
	_, err = api.UpdateActivity(ctx, act, client.ActivityPatch{StartsAt: &start, EndsAt: &end, AttendancePercent: &percent})
	require.NoError(t, err)
	return act, regs
}

// TestTheAttendanceOfAnEndedActivity: the attendance page shows the
// summary and each registration's time inside (in minutes and percent)
// and eligibility, its CSV download works, and it passes axe-core in
// every language.
func TestTheAttendanceOfAnEndedActivity(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act, regs := endedActivity(t, inst)
	path := "/console/activities/" + act + "/attendance"
	s := signInTab(t, inst, "en", "ana", "admin")
	s.open(path)
	for field, want := range map[string]string{"registered": "3", "checked_in": "2", "no_show": "1", "no_show_rate": "33.3%"} {
		require.Equal(t, want, text(t, s.ctx, `#summary [data-summary="`+field+`"]`), field)
	}
	require.Equal(t, 3, countOf(t, s.ctx, "#attendance tbody tr"))
	for user, want := range map[string][3]string{"alice": {"45 min", "75.0%", "No"}, "bob": {"50 min", "83.3%", "Yes"},
		"carol": {"0 min", "0.0%", "No"}} {
		row := `#attendance tr[data-registration="` + regs[user].ID + `"] `
		require.Equal(t, want[0], text(t, s.ctx, row+`[data-cell="minutes"]`), user)
		require.Equal(t, want[1], text(t, s.ctx, row+`[data-cell="percent"]`), user)
		require.Equal(t, want[2], text(t, s.ctx, row+`[data-cell="eligible"]`), user)
	}
	require.Contains(t, text(t, s.ctx, `#attendance tr[data-registration="`+regs["carol"].ID+`"]`), "Never")

	// The CSV link is the API's export, through the session.
	require.Equal(t, "/console/api/v1/activities/"+act+"/attendance.csv", attr(t, s.ctx, "#csv", "href"))
	got := eval[[]string](s, `fetch(document.getElementById('csv').href).then(async r =>
		[String(r.status), r.headers.get('Content-Type') || '', (await r.text()).split('\n')[0]])`)
	require.Equal(t, "200", got[0])
	require.Contains(t, got[1], "text/csv")
	require.Equal(t, "registration_id,user_id,seats,status,checked_in,first_entry_at,seconds,percent,eligible", got[2])
	s.accessible("attendance (en)")

	for _, lang := range console.Languages[1:] {
		s := signInTab(t, inst, lang, "ana", "admin")
		s.open(path)
		require.Equal(t, 3, countOf(t, s.ctx, "#attendance tbody tr"))
		s.accessible("attendance (" + lang + ")")
	}
	// An unknown activity has none; a malformed cursor is refused.
	require.Equal(t, 404, s.status("/console/activities/a_01ARZ3NDEKTSV4RRFFQ69G5FAV/attendance"))
	require.Equal(t, 400, s.status(path+"?cursor=%21%21"))
}
