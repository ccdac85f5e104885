package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// SignupOptions are the optional parts of a signup.
type SignupOptions struct {
	// IdempotencyKey makes retries safe: the same key replays the first
	// outcome. Empty sends none.
	IdempotencyKey string
	// Metadata is stored with the registration and returned as is: any
	// value that encodes as a JSON object of at most 4 KiB; nil sends
	// none.
	Metadata any
	// Seats is how many seats to ask for, all or nothing; 0 sends none
	// (one seat).
	Seats int
	// Code is a block's code: the block's seats serve the signup first.
	// Empty sends none.
	Code string
	// AdmissionToken is the admission token of the user's admitted place
	// in the activity's queue (Ticket.AdmissionToken), sent as the
	// Admission-Token header. Empty sends none.
	AdmissionToken string
}

// SignupResult is the outcome of a signup the service accepted.
type SignupResult struct {
	Registration Registration
	// Waitlisted is true when no seat was free and the registration joined
	// the waiting list (202); false when it was admitted (201).
	Waitlisted bool
	// Replayed is true when this is the stored outcome of an earlier
	// request with the same IdempotencyKey.
	Replayed bool
}

// Signup signs the token's user up for an activity. A refusal is an *Error
// (activity_full, already_registered with RegistrationID, …).
func (c *Client) Signup(ctx context.Context, activityID string, o SignupOptions) (SignupResult, error) {
	body := map[string]any{}
	if o.Metadata != nil {
		body["metadata"] = o.Metadata
	}
	if o.Seats != 0 {
		body["seats"] = o.Seats
	}
	if o.Code != "" {
		body["code"] = o.Code
	}
	r := request{method: http.MethodPost, path: "/v1/activities/" + seg(activityID) + "/registrations", body: body,
		ok: []int{http.StatusCreated, http.StatusAccepted}}
	r.header = http.Header{}
	if o.IdempotencyKey != "" {
		r.header.Set("Idempotency-Key", o.IdempotencyKey)
	}
	if o.AdmissionToken != "" {
		r.header.Set("Admission-Token", o.AdmissionToken)
	}
	var res SignupResult
	status, h, err := c.call(ctx, r, &res.Registration)
	if err != nil {
		return res, err
	}
	res.Waitlisted = status == http.StatusAccepted
	res.Replayed = h.Get("Idempotent-Replayed") == "true"
	return res, nil
}

// GetRegistration returns a registration (its owner or an admin).
func (c *Client) GetRegistration(ctx context.Context, id string) (Registration, error) {
	var r Registration
	return r, c.get(ctx, "/v1/registrations/"+seg(id), nil, &r)
}

// CancelRegistration cancels a registration (its owner or an admin). A
// registration already cancelled or expired comes back unchanged.
func (c *Client) CancelRegistration(ctx context.Context, id string) (Registration, error) {
	var r Registration
	return r, c.post(ctx, "/v1/registrations/"+seg(id)+"/cancel", nil, &r)
}

// ReduceSeats gives some of a registration's seats back: it keeps seats
// (owner or admin).
func (c *Client) ReduceSeats(ctx context.Context, id string, seats int) (Registration, error) {
	var r Registration
	return r, c.post(ctx, "/v1/registrations/"+seg(id)+"/seats", map[string]int{"seats": seats}, &r)
}

// SetRegistrationStatus moves a registration to awaiting_payment or
// approved (admin).
func (c *Client) SetRegistrationStatus(ctx context.Context, id string, to Status) (Registration, error) {
	var r Registration
	return r, c.post(ctx, "/v1/registrations/"+seg(id)+"/status", map[string]Status{"status": to}, &r)
}

// RegistrationListOptions select one page of an activity's registrations:
// Status "" lists every status.
type RegistrationListOptions struct {
	Status Status
	Limit  int
	Cursor string
}

// ListRegistrations returns one page of an activity's registrations, in
// creation order (admin).
func (c *Client) ListRegistrations(ctx context.Context, activityID string, o RegistrationListOptions) (RegistrationPage, error) {
	q := pageQuery(o.Limit, o.Cursor)
	if o.Status != "" {
		q.Set("status", string(o.Status))
	}
	var p RegistrationPage
	return p, c.get(ctx, "/v1/activities/"+seg(activityID)+"/registrations", q, &p)
}

// MyRegistrations returns one page of the token user's own registrations
// over all activities, newest first.
func (c *Client) MyRegistrations(ctx context.Context, o ListOptions) (RegistrationPage, error) {
	var p RegistrationPage
	return p, c.get(ctx, "/v1/me/registrations", pageQuery(o.Limit, o.Cursor), &p)
}

// ExportRegistrations streams an activity's registrations as CSV (admin):
// a header row "id,user_id,status,created_at,updated_at,expires_at,metadata"
// then one row per registration in creation order. Status "" exports every
// status. The caller closes the reader.
func (c *Client) ExportRegistrations(ctx context.Context, activityID string, status Status) (io.ReadCloser, error) {
	var q url.Values
	if status != "" {
		q = url.Values{"status": {string(status)}}
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/activities/" + seg(activityID) + "/registrations.csv",
		query: q, ok: []int{http.StatusOK}})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// RegistrationEvents returns every event of a registration in seq order
// (its owner or an admin).
func (c *Client) RegistrationEvents(ctx context.Context, id string) ([]Event, error) {
	var list struct {
		Items []Event `json:"items"`
	}
	return list.Items, c.get(ctx, "/v1/registrations/"+seg(id)+"/events", nil, &list)
}

// EventFeedOptions select events of an activity's feed: those after seq
// After, at most Limit (0: the service's default), waiting up to
// WaitSeconds (0–30) for one when there is none yet.
type EventFeedOptions struct {
	After       int64
	Limit       int
	WaitSeconds int
}

// ActivityEvents returns the activity's events after o.After in seq order
// (admin). With WaitSeconds it is a long poll.
func (c *Client) ActivityEvents(ctx context.Context, activityID string, o EventFeedOptions) (EventFeed, error) {
	q := pageQuery(o.Limit, "")
	if o.After > 0 {
		q.Set("after", strconv.FormatInt(o.After, 10))
	}
	if o.WaitSeconds > 0 {
		q.Set("wait", strconv.Itoa(o.WaitSeconds))
	}
	var f EventFeed
	return f, c.get(ctx, "/v1/activities/"+seg(activityID)+"/events", q, &f)
}
