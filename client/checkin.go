package client

import (
	"context"
	"io"
	"net/http"
	"strconv"
)

// Ticket returns a registration's ticket (its owner or an admin); a
// registration that holds no seat is refused with ticket_revoked.
func (c *Client) Ticket(ctx context.Context, registrationID string) (RegistrationTicket, error) {
	var t RegistrationTicket
	return t, c.get(ctx, "/v1/registrations/"+seg(registrationID)+"/ticket", nil, &t)
}

// TicketSVG returns a registration's ticket as a QR code, an SVG image
// (its owner or an admin).
func (c *Client) TicketSVG(ctx context.Context, registrationID string) ([]byte, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/registrations/" + seg(registrationID) + "/ticket.svg",
		ok: []int{http.StatusOK}})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// CheckinKeys returns the public keys that sign tickets (public).
func (c *Client) CheckinKeys(ctx context.Context) (CheckinKeySet, error) {
	var k CheckinKeySet
	return k, c.get(ctx, "/v1/checkin/keys", nil, &k)
}

// CreateCheckinList creates a check-in list (admin).
func (c *Client) CreateCheckinList(ctx context.Context, in NewCheckinList) (CheckinList, error) {
	var l CheckinList
	_, _, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/checkin-lists", body: in, ok: []int{http.StatusCreated}}, &l)
	return l, err
}

// GetCheckinList returns a check-in list with its counts (an admin, or a
// door role of the list).
func (c *Client) GetCheckinList(ctx context.Context, id string) (CheckinList, error) {
	var l CheckinList
	return l, c.get(ctx, "/v1/checkin-lists/"+seg(id), nil, &l)
}

// CheckinListOptions select one page of check-in lists: those of
// ActivityID ("": every list), at most Limit (0: the service's default)
// after Cursor.
type CheckinListOptions struct {
	ActivityID string
	Limit      int
	Cursor     string
}

// ListCheckinLists returns one page of check-in lists, newest first
// (admin).
func (c *Client) ListCheckinLists(ctx context.Context, o CheckinListOptions) (CheckinListPage, error) {
	q := pageQuery(o.Limit, o.Cursor)
	if o.ActivityID != "" {
		q.Set("activity_id", o.ActivityID)
	}
	var p CheckinListPage
	return p, c.get(ctx, "/v1/checkin-lists", q, &p)
}

// UpdateCheckinList changes the fields of p that are set (admin).
func (c *Client) UpdateCheckinList(ctx context.Context, id string, p CheckinListPatch) (CheckinList, error) {
	var l CheckinList
	_, _, err := c.call(ctx, request{method: http.MethodPatch, path: "/v1/checkin-lists/" + seg(id), body: p, ok: []int{http.StatusOK}}, &l)
	return l, err
}

// DeleteCheckinList deletes a check-in list (admin).
func (c *Client) DeleteCheckinList(ctx context.Context, id string) error {
	_, _, err := c.call(ctx, request{method: http.MethodDelete, path: "/v1/checkin-lists/" + seg(id), ok: []int{http.StatusNoContent}}, nil)
	return err
}

// Redeem records a scan at a check-in list (an admin, or a door role of
// the list). A refused scan is an *Error: ticket_revoked, wrong_list,
// checkin_closed, already_checked_in (with Previous), not_inside,
// room_full (with Inside and MaxInside), or invalid_ticket. A non-empty
// idempotencyKey makes retries safe: the same key replays the first
// outcome (Replayed).
func (c *Client) Redeem(ctx context.Context, listID string, in RedeemRequest, idempotencyKey string) (CheckinResult, error) {
	r := request{method: http.MethodPost, path: "/v1/checkin-lists/" + seg(listID) + "/redeem", body: in, ok: []int{http.StatusOK}}
	if idempotencyKey != "" {
		r.header = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	var res CheckinResult
	_, h, err := c.call(ctx, r, &res)
	if err != nil {
		return res, err
	}
	res.Replayed = h.Get("Idempotent-Replayed") == "true"
	return res, nil
}

// Checkins returns a check-in list's check-ins after seq after, in seq
// order, at most limit (0: the service's default) (an admin, or a door
// role of the list).
func (c *Client) Checkins(ctx context.Context, listID string, after int64, limit int) (CheckinFeed, error) {
	q := pageQuery(limit, "")
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	var f CheckinFeed
	return f, c.get(ctx, "/v1/checkin-lists/"+seg(listID)+"/checkins", q, &f)
}

// TicketSync returns one page of what a door device needs of a check-in
// list's registrations (an admin, or a door role of the list): from the
// start with cursor "", else after the NextCursor of the previous page,
// then what changed since. limit 0 takes the service's default; with
// waitSeconds (0–30) an empty answer waits that long for a change.
func (c *Client) TicketSync(ctx context.Context, listID, cursor string, limit, waitSeconds int) (TicketSyncPage, error) {
	q := pageQuery(limit, cursor)
	if waitSeconds > 0 {
		q.Set("wait", strconv.Itoa(waitSeconds))
	}
	var p TicketSyncPage
	return p, c.get(ctx, "/v1/checkin-lists/"+seg(listID)+"/tickets", q, &p)
}

// WalkIn signs someone up at the door and checks them in (an admin, or a
// door role of the list): Result "entered" (201), or "waitlisted" (202,
// Checkin nil) when no seat was free and the activity keeps a waiting
// list. A refusal is an *Error (wrong_list, activity_full,
// already_registered, registration_closed, limit_reached, room_full,
// checkin_closed).
func (c *Client) WalkIn(ctx context.Context, listID string, in NewWalkIn) (CheckinResult, error) {
	var res CheckinResult
	_, _, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/checkin-lists/" + seg(listID) + "/walk-ins", body: in,
		ok: []int{http.StatusCreated, http.StatusAccepted}}, &res)
	return res, err
}

// CheckinStream is an open stream of a check-in list's counts. Close it
// when done.
type CheckinStream struct{ events eventStream }

// StreamCheckinCounts opens the live counts of a check-in list (an admin,
// or a door role of the list). The stream ends when ctx ends or Close is
// called.
func (c *Client) StreamCheckinCounts(ctx context.Context, listID string) (*CheckinStream, error) {
	events, err := c.openStream(ctx, "/v1/checkin-lists/"+seg(listID)+"/stream")
	if err != nil {
		return nil, err
	}
	return &CheckinStream{events: events}, nil
}

// Next waits for the next "counts" event and returns it.
func (s *CheckinStream) Next() (CheckinCounts, error) {
	var n CheckinCounts
	if err := s.events.next("counts", "counts event", &n); err != nil {
		return CheckinCounts{}, err
	}
	return n, nil
}

// Close closes the stream.
func (s *CheckinStream) Close() error { return s.events.close() }
