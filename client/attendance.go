package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Why a registration was cancelled (Registration.CancelReason), and why
// the system released a seat (Event.Reason, on registration.released).
const (
	// CancelReasonUser: cancelled by its holder.
	CancelReasonUser = "user"
	// CancelReasonAdmin: cancelled by an admin.
	CancelReasonAdmin = "admin"
	// CancelReasonUnconfirmed: released at its activity's ConfirmBy, not
	// confirmed.
	CancelReasonUnconfirmed = "unconfirmed"
	// CancelReasonNoShow: released ReleaseNoShowsAfterMinutes after its
	// activity's StartsAt, with no accepted entry.
	CancelReasonNoShow = "no_show"
)

// AttendanceSummary is an activity's attendance in numbers, over every
// registration that holds a seat.
type AttendanceSummary struct {
	// Registered counts the registrations that hold a seat, CheckedIn
	// those of them with an accepted entry, NoShow those without one.
	Registered int `json:"registered"`
	CheckedIn  int `json:"checked_in"`
	NoShow     int `json:"no_show"`
	// NoShowRate is NoShow / Registered (0 when Registered is 0).
	NoShowRate float64 `json:"no_show_rate"`
}

// AttendanceItem is one registration's attendance.
type AttendanceItem struct {
	RegistrationID string `json:"registration_id"`
	UserID         string `json:"user_id"`
	Seats          int    `json:"seats"`
	Status         Status `json:"status"`
	// CheckedIn is whether any check-in list accepted an entry of it;
	// FirstEntryAt is the first one (nil: none).
	CheckedIn    bool       `json:"checked_in"`
	FirstEntryAt *time.Time `json:"first_entry_at"`
	// Seconds is its time inside between the activity's StartsAt and
	// EndsAt, Percent that time as a percentage of the activity's length;
	// both nil while the activity has no StartsAt or no EndsAt.
	Seconds *int     `json:"seconds"`
	Percent *float64 `json:"percent"`
	// Eligible is whether the attendance earns credit: Percent at least
	// the activity's AttendancePercent, or CheckedIn when it has none.
	Eligible bool `json:"eligible"`
}

// AttendancePage is one answer of ActivityAttendance: the summary of the
// whole activity and one page of its registrations that hold a seat.
type AttendancePage struct {
	Summary    AttendanceSummary `json:"summary"`
	Items      []AttendanceItem  `json:"items"`
	NextCursor *string           `json:"next_cursor"`
}

// RegistrationAttendance is one registration's attendance with its signed
// statement.
type RegistrationAttendance struct {
	AttendanceItem
	// Statement is, once the activity has ended, a compact JWS (EdDSA)
	// signed with a key of CheckinKeys whose payload holds reg, act, sub,
	// starts_at, ends_at, seconds, percent, eligible and iat; nil before
	// the activity's EndsAt, or while it has no StartsAt or EndsAt.
	Statement *string `json:"statement"`
}

// SeriesAttendance is how many of the people who hold a seat come, over
// the activities of a series that have ended.
type SeriesAttendance struct {
	SeriesID string `json:"series_id"`
	// Activities counts the series' activities that have ended.
	Activities int `json:"activities"`
	Registered int `json:"registered"`
	CheckedIn  int `json:"checked_in"`
	// ShowRate is CheckedIn / Registered; nil while Registered is 0.
	ShowRate *float64 `json:"show_rate"`
	// SuggestedCapacity is, when a room was given, the largest capacity
	// for which more than room people come with a chance of at most risk;
	// nil without a room or a ShowRate.
	SuggestedCapacity *int `json:"suggested_capacity"`
}

// Confirm confirms that the holder of a registration will come (its owner
// or an admin): its ConfirmedAt is set. A registration confirmed already
// comes back unchanged. A refusal is an *Error: confirmation_closed (not
// confirmed and the activity's ConfirmBy passed) or invalid_transition (it
// holds no seat).
func (c *Client) Confirm(ctx context.Context, registrationID string) (Registration, error) {
	var r Registration
	return r, c.post(ctx, "/v1/registrations/"+seg(registrationID)+"/confirm", nil, &r)
}

// ActivityAttendance returns the attendance summary of an activity and one
// page of its registrations that hold a seat, in creation order (admin):
// from the start with cursor "", else after the NextCursor of the previous
// page; limit 0 takes the service's default.
func (c *Client) ActivityAttendance(ctx context.Context, activityID, cursor string, limit int) (AttendancePage, error) {
	var p AttendancePage
	return p, c.get(ctx, "/v1/activities/"+seg(activityID)+"/attendance", pageQuery(limit, cursor), &p)
}

// ExportAttendance streams an activity's attendance as CSV (admin): a
// header row
// "registration_id,user_id,seats,status,checked_in,first_entry_at,seconds,percent,eligible"
// then one row per registration that holds a seat. The caller closes the
// reader.
func (c *Client) ExportAttendance(ctx context.Context, activityID string) (io.ReadCloser, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/activities/" + seg(activityID) + "/attendance.csv",
		ok: []int{http.StatusOK}})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// RegistrationAttendance returns a registration's attendance and, once its
// activity has ended, its signed statement (its owner or an admin).
func (c *Client) RegistrationAttendance(ctx context.Context, id string) (RegistrationAttendance, error) {
	var a RegistrationAttendance
	return a, c.get(ctx, "/v1/registrations/"+seg(id)+"/attendance", nil, &a)
}

// SeriesAttendance returns how many came over a series' ended activities
// (admin). With room > 0 (the seats the room has) the answer suggests a
// capacity for which more than room people come with a chance of at most
// risk (0 < risk < 1; 0 sends none: the service's default, 0.05).
func (c *Client) SeriesAttendance(ctx context.Context, seriesID string, room int, risk float64) (SeriesAttendance, error) {
	q := url.Values{}
	if room > 0 {
		q.Set("room", strconv.Itoa(room))
	}
	if risk != 0 {
		q.Set("risk", strconv.FormatFloat(risk, 'g', -1, 64))
	}
	var s SeriesAttendance
	return s, c.get(ctx, "/v1/series/"+seg(seriesID)+"/attendance", q, &s)
}
