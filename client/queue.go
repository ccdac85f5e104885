package client

import (
	"context"
	"net/http"
	"time"
)

// Ticket is the caller's place in an activity's admission queue.
type Ticket struct {
	ActivityID string `json:"activity_id"`
	UserID     string `json:"user_id"`
	// State is "waiting", "admitted", "used", "expired" or "sold_out".
	State string `json:"state"`
	// Position is fixed once given (1 = first); nil for a place taken
	// before the activity opens, until it opens.
	Position *int64 `json:"position"`
	// Ahead and EstimatedWaitSeconds are set while waiting with a
	// position: the places before this one, and the expected wait.
	Ahead                *int64 `json:"ahead"`
	EstimatedWaitSeconds *int64 `json:"estimated_wait_seconds"`
	// AdmissionToken is set while admitted: pass it as
	// SignupOptions.AdmissionToken before TokenExpiresAt.
	AdmissionToken *string    `json:"admission_token"`
	TokenExpiresAt *time.Time `json:"token_expires_at"`
	// PollAfterMS is when to ask again (QueueTicket), in milliseconds.
	PollAfterMS int64 `json:"poll_after_ms"`
}

// PollAfter returns PollAfterMS as a duration.
func (t Ticket) PollAfter() time.Duration { return time.Duration(t.PollAfterMS) * time.Millisecond }

// JoinQueue takes the caller's place in the activity's admission queue, or
// returns the place the caller holds.
func (c *Client) JoinQueue(ctx context.Context, activityID string) (Ticket, error) {
	var t Ticket
	_, _, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/activities/" + seg(activityID) + "/queue",
		ok: []int{http.StatusOK}}, &t)
	return t, err
}

// QueueTicket returns the caller's place in the activity's admission queue
// (a not_found *Error if the caller never joined). Asking counts as
// presence: a waiting place not asked about for the queue's
// AbsentSeconds lapses.
func (c *Client) QueueTicket(ctx context.Context, activityID string) (Ticket, error) {
	var t Ticket
	return t, c.get(ctx, "/v1/activities/"+seg(activityID)+"/queue/me", nil, &t)
}
