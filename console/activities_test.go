package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/console"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// actCount requires n elements matching sel on the page, and shows the
// page's text when they are not.
func (s *session) actCount(sel string, n int) {
	s.t.Helper()
	if got := countOf(s.t, s.ctx, sel); got != n {
		s.t.Fatalf("%d elements match %s, not %d, on the page:\n%s", got, sel, n, text(s.t, s.ctx, "main"))
	}
}

// actLocation is the tab's path and query.
func (s *session) actLocation() *url.URL {
	s.t.Helper()
	loc, err := chromedp.Run(s.ctx, chromedp.Evaluate[string](`location.href`))
	require.NoError(s.t, err)
	u, err := url.Parse(loc)
	require.NoError(s.t, err)
	return u
}

// actZone is the time zone the tab's browser is in, which the console
// reads its forms' times in.
func (s *session) actZone() *time.Location {
	s.t.Helper()
	name, err := chromedp.Run(s.ctx, chromedp.Evaluate[string](`Intl.DateTimeFormat().resolvedOptions().timeZone`))
	require.NoError(s.t, err)
	loc, err := time.LoadLocation(name)
	require.NoError(s.t, err)
	return loc
}

// TestAnActivityIsCreatedEditedAndWatchedLive: an organiser creates an
// activity with a waiting list through the form (the domain's refusal of
// its capacity shown beside the field, what was typed kept), edits it
// (an emptied field is removed, a wrong end time refused beside its
// field), and watches its dashboard count the signups made on another
// instance and a check-in, without reloading.
func TestAnActivityIsCreatedEditedAndWatchedLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inst := apptest.Start(t, apptest.Options{})
	s := signInTab(t, inst, "en", "ana", "admin")
	s.open("/console/activities/new")
	zone := s.actZone()
	s.fill(map[string]string{"f-title": "Journal club", "f-capacity": "-1", "f-max-seats-per-registration": "2",
		"f-starts-at": "2030-03-01T09:00", "f-ends-at": "2030-03-01T11:00", "f-attendance-percent": "80"})
	do(t, s.ctx, 5*time.Second, chromedp.Click("#f-waitlist"))
	s.submit(`#activity-form button[type="submit"]`, "#f-capacity-error")
	require.Contains(t, text(t, s.ctx, "#f-capacity-error"), "capacity must be between 0 and 1000000")
	require.Equal(t, "true", attr(t, s.ctx, "#f-capacity", "aria-invalid"))
	require.Contains(t, attr(t, s.ctx, "#f-capacity", "aria-describedby"), "f-capacity-error")
	require.Equal(t, "Journal club", attr(t, s.ctx, "#f-title", "value"))
	require.Equal(t, "2030-03-01T11:00", attr(t, s.ctx, "#f-ends-at", "value"))
	s.actCount("#f-waitlist:checked", 1)
	s.actCount(".invalid", 1)

	s.fill(map[string]string{"f-capacity": "2"})
	s.submit(`#activity-form button[type="submit"]`, "#seats")
	loc := s.actLocation()
	id := strings.TrimPrefix(loc.Path, "/console/activities/")
	require.True(t, strings.HasPrefix(id, "a_"), loc.String())
	s.actCount("#saved", 1)
	admin := inst.API(t, "admin", true)
	a, err := admin.GetActivity(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "Journal club", a.Title)
	require.Equal(t, 2, a.Capacity)
	require.True(t, a.Waitlist)
	require.Equal(t, 2, a.MaxSeatsPerRegistration)
	require.Equal(t, "strict", a.WaitlistPolicy)
	require.Equal(t, 900, a.HoldSeconds)
	require.True(t, time.Date(2030, 3, 1, 9, 0, 0, 0, zone).Equal(*a.StartsAt), "%v", a.StartsAt)
	require.Equal(t, 80, *a.AttendancePercent)
	require.Nil(t, a.Queue)
	require.Nil(t, a.OpensAt)

	// Edit: the form shows the settings; an end before the start is the
	// domain's refusal, beside its field; then the capacity is raised and
	// the end and the attendance share are removed.
	s.open("/console/activities/" + id + "/edit")
	require.Equal(t, "2", attr(t, s.ctx, "#f-capacity", "value"))
	require.Equal(t, "2030-03-01T09:00", attr(t, s.ctx, "#f-starts-at", "value"))
	s.fill(map[string]string{"f-capacity": "3", "f-ends-at": "2030-03-01T08:00"})
	s.submit(`#activity-form button[type="submit"]`, "#f-ends-at-error")
	require.Contains(t, text(t, s.ctx, "#f-ends-at-error"), "ends_at must be after starts_at")
	require.Equal(t, "3", attr(t, s.ctx, "#f-capacity", "value"))
	s.fill(map[string]string{"f-ends-at": "", "f-attendance-percent": ""})
	s.submit(`#activity-form button[type="submit"]`, "#seats")
	a, err = admin.GetActivity(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 3, a.Capacity)
	require.Nil(t, a.EndsAt)
	require.Nil(t, a.AttendancePercent)
	require.True(t, time.Date(2030, 3, 1, 9, 0, 0, 0, zone).Equal(*a.StartsAt))
	require.True(t, a.Waitlist)

	// The dashboard, live: signups through a second instance on the same
	// database, and a check-in at a list that includes the activity.
	list, err := admin.CreateCheckinList(ctx, client.NewCheckinList{Name: "Main door", ActivityIDs: []string{id}})
	require.NoError(t, err)
	s.open("/console/activities/" + id)
	listSel := "#list-" + list.ID
	do(t, s.ctx, 10*time.Second,
		waitTrue(`document.querySelector('#seats').dataset.updated !== undefined`, 5*time.Second, "the seat stream"),
		waitTrue(`document.querySelector('`+listSel+`').dataset.updated !== undefined`, 5*time.Second, "the list's stream"),
	)
	require.Equal(t, "/v1/activities/"+id+"/seats/stream", attr(t, s.ctx, "#seats", "data-stream"))
	require.Equal(t, "3", text(t, s.ctx, `#seats [data-field="capacity"]`))
	require.Equal(t, "0", text(t, s.ctx, `#seats [data-field="taken"]`))
	other := apptest.Start(t, apptest.Options{DatabaseURL: inst.DatabaseURL})
	var first string
	for i := range 5 {
		res, err := other.API(t, fmt.Sprint("user", i), false).Signup(ctx, id, client.SignupOptions{})
		require.NoError(t, err)
		require.Equal(t, i >= 3, res.Waitlisted, "signup %d", i)
		if i == 0 {
			first = res.Registration.ID
		}
	}
	do(t, s.ctx, 15*time.Second,
		waitText(`#seats [data-field="taken"]`, "3", 10*time.Second),
		waitText(`#seats [data-field="remaining"]`, "0", 10*time.Second),
		waitText(`#seats [data-field="waiting"]`, "2", 10*time.Second),
	)
	_, err = other.API(t, "admin", true).Redeem(ctx, list.ID, client.RedeemRequest{RegistrationID: first, Device: "door-1"}, "scan-1")
	require.NoError(t, err)
	do(t, s.ctx, 15*time.Second,
		waitText(listSel+` [data-field="checked_in"]`, "1", 10*time.Second),
		waitText(listSel+` [data-field="inside"]`, "1", 10*time.Second),
	)
	require.Equal(t, "0", text(t, s.ctx, listSel+` [data-field="conflicts"]`))
}

// TestTheActivityPagesAreAccessibleInEveryLanguage: the list (with a
// search), the new and edit forms (with a message beside a field) and the
// dashboard (with pools, a series, a queue and a check-in list) pass
// axe-core in English, Traditional and Simplified Chinese, and speak the
// page's language.
func TestTheActivityPagesAreAccessibleInEveryLanguage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.API(t, "admin", true)
	pool, err := admin.CreatePool(ctx, client.NewPool{Title: "Main hall", Capacity: 300})
	require.NoError(t, err)
	series, err := admin.CreateSeries(ctx, client.NewSeries{Title: "Spring", MaxPerUser: 2})
	require.NoError(t, err)
	starts := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Minute)
	ends, percent, minutes := starts.Add(2*time.Hour), 75, 15
	a, err := admin.CreateActivity(ctx, client.NewActivity{Title: "心臟科晨會 Cardiology", Capacity: 40, Waitlist: true,
		WaitlistPolicy: "fill", MaxSeatsPerRegistration: 4, Pools: []string{pool.ID}, SeriesID: series.ID,
		Queue: &client.QueueSettings{AdmitPerSecond: 5, MaxAdmitted: 50}, StartsAt: &starts, EndsAt: &ends,
		AttendancePercent: &percent, ReleaseNoShowsAfterMinutes: &minutes})
	require.NoError(t, err)
	_, err = admin.CreateCheckinList(ctx, client.NewCheckinList{Name: "East door", ActivityIDs: []string{a.ID}})
	require.NoError(t, err)
	headings := map[string]string{"en": "Activities", "zh-TW": "活動", "zh-CN": "活动"}
	for _, lang := range console.Languages {
		s := signInTab(t, inst, lang, "ana", "admin")
		s.open("/console/activities")
		require.Equal(t, headings[lang], text(t, s.ctx, "main h1"))
		s.actCount(`#activities a[href="/console/activities/`+a.ID+`"]`, 1)
		s.accessible("activities (" + lang + ")")
		s.open("/console/activities?q=" + url.QueryEscape("晨會"))
		s.actCount("#activities tbody tr", 1)
		s.accessible("activities searched (" + lang + ")")
		s.open("/console/activities/new")
		s.accessible("new activity (" + lang + ")")
		s.fill(map[string]string{"f-title": "x", "f-capacity": "5", "f-queue-admit-per-second": "0"})
		do(t, s.ctx, 5*time.Second, chromedp.Click("#f-queue"))
		s.submit(`#activity-form button[type="submit"]`, "#f-queue-admit-per-second-error")
		require.Contains(t, text(t, s.ctx, "#f-queue-admit-per-second-error"), "queue.admit_per_second")
		s.accessible("new activity refused (" + lang + ")")
		s.open("/console/activities/" + a.ID + "/edit")
		require.Equal(t, "fill", attr(t, s.ctx, "#f-waitlist-policy option[selected]", "value"))
		require.Equal(t, pool.ID, attr(t, s.ctx, "#f-pools", "value"))
		s.actCount("#f-queue:checked", 1)
		s.accessible("edit activity (" + lang + ")")
		s.open("/console/activities/" + a.ID)
		s.actCount(`#settings a[href="/console/pools/`+pool.ID+`"]`, 1)
		s.actCount(`#settings a[href="/console/series/`+series.ID+`"]`, 1)
		s.actCount(`#activity-pages a[href="/console/activities/`+a.ID+`/registrations"]`, 1)
		s.actCount("#checkin [data-stream]", 1)
		s.accessible("activity dashboard (" + lang + ")")
	}
}

// TestTheActivityListIsSearchedAndPaged: the list shows a page of
// activities newest first with a link to the next, and a title search
// keeps its query over its pages.
func TestTheActivityListIsSearchedAndPaged(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	for i := range 53 {
		title := fmt.Sprint("Seminar ", i)
		if i%10 == 0 {
			title = fmt.Sprint("Ward round ", i)
		}
		inst.CreateActivity(t, title, 10)
	}
	s := signInTab(t, inst, "en", "ana", "admin")
	s.open("/console/activities")
	s.actCount("#activities tbody tr", 50)
	require.Equal(t, "Seminar 52", text(t, s.ctx, "#activities tbody tr:first-child a"))
	s.submit(`.pager a[rel="next"]`, `.pager a:not([rel])`)
	s.actCount("#activities tbody tr", 3)
	s.actCount(`.pager a[rel="next"]`, 0)

	s.open("/console/activities")
	s.fill(map[string]string{"activities-q": "WARD"})
	s.submit(`form.search button`, "#activities")
	require.Equal(t, "WARD", s.actLocation().Query().Get("q"))
	s.actCount("#activities tbody tr", 6)
	require.Equal(t, "Ward round 50", text(t, s.ctx, "#activities tbody tr:first-child a"))
	require.Equal(t, "WARD", attr(t, s.ctx, "#activities-q", "value"))
	s.open("/console/activities?q=nothing")
	s.actCount("#activities-none", 1)
	require.Equal(t, http.StatusBadRequest, s.status("/console/activities?cursor=bogus"))
	require.Equal(t, http.StatusNotFound, s.status("/console/activities/a_01JDQ8ZB7Q1W3N8Y6V0K2H5M4C"))
}

// TestADoorRoleIsRefusedTheActivityPages: a door-role session gets 403 on
// every activities page.
func TestADoorRoleIsRefusedTheActivityPages(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateWaitlisted(t, "Closed to doors", 5)
	door := signInTab(t, inst, "en", "dan", "door-a")
	for _, path := range []string{"/console/activities", "/console/activities/new", "/console/activities/" + id,
		"/console/activities/" + id + "/edit"} {
		require.Equal(t, http.StatusForbidden, door.status(path), path)
	}
}
