package client

import (
	"context"
	"net/http"
)

// CreateActivity creates an activity (admin).
func (c *Client) CreateActivity(ctx context.Context, in NewActivity) (Activity, error) {
	var a Activity
	_, _, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/activities", body: in, ok: []int{http.StatusCreated}}, &a)
	return a, err
}

// GetActivity returns an activity (public): with authoritative seat
// numbers for an admin, with the live seat display's for anyone else (see
// Activity.Source).
func (c *Client) GetActivity(ctx context.Context, id string) (Activity, error) {
	var a Activity
	return a, c.get(ctx, "/v1/activities/"+seg(id), nil, &a)
}

// UpdateActivity changes the fields of p that are set (admin).
func (c *Client) UpdateActivity(ctx context.Context, id string, p ActivityPatch) (Activity, error) {
	var a Activity
	_, _, err := c.call(ctx, request{method: http.MethodPatch, path: "/v1/activities/" + seg(id), body: p, ok: []int{http.StatusOK}}, &a)
	return a, err
}

// ListOptions select one page of a list: at most Limit items (0: the
// service's default) after Cursor (empty: the first page).
type ListOptions struct {
	Limit  int
	Cursor string
}

// ListActivities returns one page of activities, newest first (admin).
func (c *Client) ListActivities(ctx context.Context, o ListOptions) (ActivityPage, error) {
	var p ActivityPage
	return p, c.get(ctx, "/v1/activities", pageQuery(o.Limit, o.Cursor), &p)
}

// Seats returns the seats display of an activity (public).
func (c *Client) Seats(ctx context.Context, activityID string) (Seats, error) {
	var s Seats
	return s, c.get(ctx, "/v1/activities/"+seg(activityID)+"/seats", nil, &s)
}

// SeatStream is an open seat stream. Close it when done.
type SeatStream struct{ events eventStream }

// StreamSeats opens the live seat stream of an activity (public). The
// stream ends when ctx ends or Close is called.
func (c *Client) StreamSeats(ctx context.Context, activityID string) (*SeatStream, error) {
	events, err := c.openStream(ctx, "/v1/activities/"+seg(activityID)+"/seats/stream")
	if err != nil {
		return nil, err
	}
	return &SeatStream{events: events}, nil
}

// Next waits for the next "seats" event and returns its state.
func (s *SeatStream) Next() (Seats, error) {
	var st Seats
	if err := s.events.next("seats", "seat event", &st); err != nil {
		return Seats{}, err
	}
	return st, nil
}

// Close closes the stream.
func (s *SeatStream) Close() error { return s.events.close() }
