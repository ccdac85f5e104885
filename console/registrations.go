package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// RegistrationService is what the console asks of the service behind its
// registrations pages (registration.Service): an activity's
// registrations, one user's among them, and the waiting line; one
// registration with its history; and the changes an admin makes to it.
type RegistrationService interface {
	GetActivity(ctx context.Context, id string) (registration.Activity, error)
	ListRegistrations(ctx context.Context, f registration.ListFilter) (registration.Page, error)
	ActivityUserRegistrations(ctx context.Context, f registration.ActivityUserFilter) (registration.Page, error)
	GetRegistration(ctx context.Context, id string, c registration.Caller) (registration.Registration, error)
	RegistrationEvents(ctx context.Context, id string, c registration.Caller) ([]registration.Event, error)
	Cancel(ctx context.Context, id string, c registration.Caller) (registration.Registration, error)
	SetStatus(ctx context.Context, id string, to registration.Status, c registration.Caller) (registration.Registration, error)
	ReduceSeats(ctx context.Context, id string, seats int, c registration.Caller) (registration.Registration, error)
	Confirm(ctx context.Context, id string, c registration.Caller) (registration.Registration, error)
}

// regPageSize is how many registrations a page lists unless its
// query asks for another number (limit, which the service bounds).
const regPageSize = 50

// registrationRoutes registers the registrations pages: an activity's
// registrations and its waiting line, and a registration's page with the
// changes an admin makes there.
func (h *Handler) registrationRoutes(r router) {
	r.page("GET "+Prefix+"/activities/{id}/registrations", adminOnly, h.registrationsPage)
	r.page("GET "+Prefix+"/activities/{id}/waiting", adminOnly, h.registrationWaitingPage)
	r.page("GET "+Prefix+"/registrations/{id}", adminOnly, h.registrationPage)
	for _, a := range registrationActions {
		r.page("POST "+Prefix+"/registrations/{id}/"+a.name, adminOnly, h.registrationAction(a))
	}
}

// regStatuses are the statuses a list can be narrowed to, in the order a
// registration's life goes through them.
var regStatuses = []registration.Status{registration.Pending, registration.AwaitingPayment, registration.Approved,
	registration.Waitlisted, registration.Cancelled, registration.Expired}

// registrationsData is the data of an activity's registrations page.
type registrationsData struct {
	Activity registration.Activity
	Items    []registration.Registration
	// Status and User are the filter and the search the list shows.
	Status   string
	User     string
	Statuses []registration.Status
	// Paged is set when the list is a later page; Next is the next
	// page's URL, empty for the last.
	Paged bool
	Next  string
	// CSV and AttendanceCSV download the exports through the session's
	// way into the API.
	CSV, AttendanceCSV string
	// UserError is the service's refusal of the user id searched, Error
	// its refusal of the rest of the query.
	UserError, Error string
}

// registrationsPage lists an activity's registrations in creation order,
// a page at a time, of a status, or one user's.
func (h *Handler) registrationsPage(w http.ResponseWriter, r *request) {
	svc := h.cfg.Services.Registrations
	id := r.PathValue("id")
	act, err := svc.GetActivity(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	data := registrationsData{Activity: act, Status: q.Get("status"), User: q.Get("user"), Statuses: regStatuses,
		Paged: q.Get("after") != ""}
	data.CSV = Prefix + "/api/v1/activities/" + url.PathEscape(id) + "/registrations.csv"
	if data.Status != "" && registration.Status(data.Status).Valid() {
		data.CSV += "?status=" + url.QueryEscape(data.Status)
	}
	data.AttendanceCSV = Prefix + "/api/v1/activities/" + url.PathEscape(id) + "/attendance.csv"
	page, err := h.listRegistrations(r, id, registration.Status(data.Status), data.User)
	if err != nil {
		status, field, msg, ok := regRefusal(err, "user_id")
		if !ok {
			h.fail(w, r, err)
			return
		}
		if field != "" {
			data.UserError = msg
		} else {
			data.Error = msg
		}
		h.render(w, r, status, "registrations", data)
		return
	}
	data.Items = page.Items
	if page.NextCursor != nil {
		data.Next = regPageURL(r, *page.NextCursor)
	}
	h.render(w, r, http.StatusOK, "registrations", data)
}

// listRegistrations reads the page the request asks for: the activity's
// registrations (of status, when set), or those of user when set.
func (h *Handler) listRegistrations(r *request, activityID string, status registration.Status, user string) (registration.Page, error) {
	q := r.URL.Query()
	limit, after, err := regPageQuery(q)
	if err != nil {
		return registration.Page{}, err
	}
	svc := h.cfg.Services.Registrations
	if user != "" {
		return svc.ActivityUserRegistrations(r.Context(), registration.ActivityUserFilter{ActivityID: activityID, UserID: user,
			Status: status, After: after, Limit: limit})
	}
	return svc.ListRegistrations(r.Context(), registration.ListFilter{ActivityID: activityID, Status: status, After: after, Limit: limit})
}

// regPageQuery reads a list page's query: the number of items (limit; the
// console's own size without it) and the cursor of the page before
// (after), decoded as the API decodes its cursors.
func regPageQuery(q url.Values) (limit int, after string, err error) {
	limit = regPageSize
	if v := q.Get("limit"); v != "" {
		// The service bounds it, and refuses a number out of its range.
		if limit, err = strconv.Atoi(v); err != nil {
			return 0, "", capacityd.Errorf(capacityd.EInvalid, "limit must be an integer between 1 and %d", registration.MaxListLimit)
		}
	}
	if v := q.Get("after"); v != "" {
		if after, err = registration.DecodeCursor(v, registration.RegistrationCursor); err != nil {
			return 0, "", err
		}
	}
	return limit, after, nil
}

// regPageURL is the request's URL with the page after cursor.
func regPageURL(r *request, cursor string) string {
	q := r.URL.Query()
	q.Set("after", cursor)
	u := *r.URL
	u.RawQuery = q.Encode()
	return u.RequestURI()
}

// regRefusal classifies a domain error a page shows in place: a refusal of
// the request (invalid_request: 400) or of the change (another code of
// the domain's: 409), with the field it names among fields and its
// message; ok is false for the errors h.fail shows (not found,
// forbidden, unavailable, internal).
func regRefusal(err error, fields ...string) (status int, field, msg string, ok bool) {
	var ce *capacityd.Error
	if !errors.As(err, &ce) {
		return 0, "", "", false
	}
	switch ce.Code {
	case capacityd.ENotFound, capacityd.EForbidden, capacityd.EUnavailable, capacityd.EInternal, capacityd.EUnauthenticated:
		return 0, "", "", false
	case capacityd.EInvalid:
		status = http.StatusBadRequest
	default:
		status = http.StatusConflict
	}
	field, msg = errorMessage(err, fields...)
	return status, field, msg, true
}

// Place is a waiting-list position's number (0 for none): templates pass
// numbers, not pointers, to the catalogue's formats.
func (registrationsData) Place(p *int) int { return derefPlace(p) }

// derefPlace is *p, or 0 for nil.
func derefPlace(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
