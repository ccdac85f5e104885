package client

import (
	"context"
	"net/http"
)

// RegisterNote creates a note with zero counts, unless it exists, and
// returns its counts; created is true when it was new (admin). It is
// idempotent. A service in the registered notes mode counts views and
// waters of registered notes only, and answers not_found for any other.
func (c *Client) RegisterNote(ctx context.Context, noteID string) (s NoteStats, created bool, err error) {
	status, _, err := c.call(ctx, request{method: http.MethodPut, path: "/v1/notes/" + seg(noteID),
		ok: []int{http.StatusOK, http.StatusCreated}}, &s)
	return s, status == http.StatusCreated, err
}

// RecordView records one view of a note and returns its counts, this view
// included (public).
func (c *Client) RecordView(ctx context.Context, noteID string) (NoteStats, error) {
	var s NoteStats
	return s, c.post(ctx, "/v1/notes/"+seg(noteID)+"/views", nil, &s)
}

// RecordWater records one water (like) of a note and returns its counts,
// this water included (public). A second water of a note from one client
// address within the service's water window is refused with rate_limited.
func (c *Client) RecordWater(ctx context.Context, noteID string) (NoteStats, error) {
	var s NoteStats
	return s, c.post(ctx, "/v1/notes/"+seg(noteID)+"/waters", nil, &s)
}

// NoteStats returns a note's counts, read from the authority (public).
func (c *Client) NoteStats(ctx context.Context, noteID string) (NoteStats, error) {
	var s NoteStats
	return s, c.get(ctx, "/v1/notes/"+seg(noteID)+"/stats", nil, &s)
}

// Health returns nil while the service's process runs.
func (c *Client) Health(ctx context.Context) error {
	_, _, err := c.call(ctx, request{method: http.MethodGet, path: "/healthz", ok: []int{http.StatusOK}}, nil)
	return err
}

// Ready returns the service's readiness. When PostgreSQL is unreachable
// it returns the readiness and an *Error with status 503 and code
// unavailable.
func (c *Client) Ready(ctx context.Context) (Readiness, error) {
	var r Readiness
	status, h, err := c.call(ctx, request{method: http.MethodGet, path: "/readyz",
		ok: []int{http.StatusOK, http.StatusServiceUnavailable}}, &r)
	if err == nil && status == http.StatusServiceUnavailable {
		e := &Error{Status: status, Code: CodeUnavailable, Message: "postgres: " + r.Postgres}
		e.RetryAfter = retryAfter(h)
		return r, e
	}
	return r, err
}
