package console

import (
	"context"
	"net/http"
	"net/url"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/registration"
)

// ActivityService is what the console asks of the service behind its
// activities pages (registration.Service).
type ActivityService interface {
	SearchActivities(ctx context.Context, query, before string, limit int) (registration.ActivityPage, error)
	GetActivity(ctx context.Context, id string) (registration.Activity, error)
	CreateActivity(ctx context.Context, in registration.NewActivity) (registration.Activity, error)
	UpdateActivity(ctx context.Context, id string, p registration.ActivityPatch, c registration.Caller) (registration.Activity, error)
}

// ActivityLists is what an activity's dashboard asks of the check-in
// service (checkin.Service): the check-in lists that include the activity.
type ActivityLists interface {
	Lists(ctx context.Context, activityID, before string, limit int) (checkin.ListPage, error)
}

// Sizes of the activities pages.
const (
	// activitiesPerPage is the length of a page of the activity list.
	activitiesPerPage = 50
	// dashboardLists is the most check-in lists a dashboard follows.
	dashboardLists = 20
)

// activityRoutes registers the activities pages.
func (h *Handler) activityRoutes(r router) {
	r.page("GET "+Prefix+"/activities", adminOnly, h.activitiesPage)
	r.page("GET "+Prefix+"/activities/new", adminOnly, h.newActivityPage)
	r.page("POST "+Prefix+"/activities", adminOnly, h.createActivity)
	r.page("GET "+Prefix+"/activities/{id}", adminOnly, h.activityDashboard)
	r.page("GET "+Prefix+"/activities/{id}/edit", adminOnly, h.editActivityPage)
	r.page("POST "+Prefix+"/activities/{id}", adminOnly, h.updateActivity)
}

// activityLists is the service of the check-in lists the dashboards
// show: the Checkins service when it can list them (nil: none shown).
func (h *Handler) activityLists() ActivityLists {
	l, _ := h.cfg.Services.Checkins.(ActivityLists)
	return l
}

// activitiesList is the data of the activity list: one page of the
// activities whose title contains Query (every one when it is empty),
// newest first, and the links to the next and the first page.
type activitiesList struct {
	Query string
	Items []registration.Activity
	// Next is the next page's path, empty on the last page; First is the
	// first page's, empty on the first page.
	Next, First string
}

// activitiesPage lists the activities, newest first, searched by title
// (q) and paged by the service's cursor (cursor).
func (h *Handler) activitiesPage(w http.ResponseWriter, r *request) {
	q, cursor := r.URL.Query().Get("q"), r.URL.Query().Get("cursor")
	before := ""
	if cursor != "" {
		id, err := registration.DecodeCursor(cursor, registration.ActivityCursor)
		if err != nil {
			h.renderError(w, r, http.StatusBadRequest, "activities.bad_cursor")
			return
		}
		before = id
	}
	page, err := h.cfg.Services.Activities.SearchActivities(r.Context(), q, before, activitiesPerPage)
	if capacityd.ErrorCode(err) == capacityd.EInvalid {
		h.renderError(w, r, http.StatusBadRequest, "activities.bad_search")
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	data := activitiesList{Query: q, Items: page.Items}
	link := func(cursor string) string {
		v := url.Values{}
		if q != "" {
			v.Set("q", q)
		}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		if len(v) == 0 {
			return Prefix + "/activities"
		}
		return Prefix + "/activities?" + v.Encode()
	}
	if page.NextCursor != nil {
		data.Next = link(*page.NextCursor)
	}
	if cursor != "" {
		data.First = link("")
	}
	h.render(w, r, http.StatusOK, "activities", data)
}

// activityDashboardData is the data of an activity's dashboard: its
// settings, its seats as the display tier shows them when the page is
// made (the seat stream keeps them current), and the check-in lists that
// include it.
type activityDashboardData struct {
	Activity registration.Activity
	Seats    registration.Seats
	Lists    []checkin.List
	// Saved says the page follows a change the organiser made.
	Saved bool
}

// AttendancePercent is the activity's attendance_percent (0 when not
// set).
func (d activityDashboardData) AttendancePercent() int {
	if p := d.Activity.AttendancePercent; p != nil {
		return *p
	}
	return 0
}

// ReleaseNoShowsAfterMinutes is the activity's
// release_no_shows_after_minutes (0 when not set).
func (d activityDashboardData) ReleaseNoShowsAfterMinutes() int {
	if m := d.Activity.ReleaseNoShowsAfterMinutes; m != nil {
		return *m
	}
	return 0
}

// activityDashboard shows an activity's settings and its live numbers.
func (h *Handler) activityDashboard(w http.ResponseWriter, r *request) {
	ctx, id := r.Context(), r.PathValue("id")
	a, err := h.cfg.Services.Activities.GetActivity(ctx, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	data := activityDashboardData{Activity: a, Saved: r.URL.Query().Get("saved") != ""}
	// The seats from the display tier, as the public seat read shows them:
	// the stream the page opens goes on from there.
	if data.Seats, err = h.cfg.Services.Seats(ctx, id); err != nil {
		h.fail(w, r, err)
		return
	}
	if lists := h.activityLists(); lists != nil {
		page, err := lists.Lists(ctx, id, "", dashboardLists)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		data.Lists = page.Items
	}
	h.render(w, r, http.StatusOK, "activity", data)
}
