package client

import (
	"context"
	"net/http"
	"time"
)

// Block holds seats of an activity for an audience: the signups that send
// its Code (SignupOptions.Code), or whose token's roles hold its Role.
// Exactly one of Code and Role is set. Its unused seats (Seats - Used) are
// the activity's Reserved: no one else may take them.
type Block struct {
	ID         string `json:"id"`
	ActivityID string `json:"activity_id"`
	Seats      int    `json:"seats"`
	// Used is the seats its audience holds now.
	Used int     `json:"used"`
	Code *string `json:"code,omitempty"`
	Role *string `json:"role,omitempty"`
	// ExpiresAt is when it ends on its own, its unused seats returning to
	// the public; nil: never.
	ExpiresAt *time.Time `json:"expires_at"`
	CreatedAt time.Time  `json:"created_at"`
}

// NewBlock is what CreateBlock sends: Seats, and Code or Role (exactly
// one), optionally ExpiresAt.
type NewBlock struct {
	Seats     int        `json:"seats"`
	Code      string     `json:"code,omitempty"`
	Role      string     `json:"role,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// BlockList is the answer of ListBlocks.
type BlockList struct {
	Items []Block `json:"items"`
}

// CreateBlock holds seats of an activity for an audience (admin). A block
// larger than the seats free (in the activity or one of its pools) is
// refused with activity_full.
func (c *Client) CreateBlock(ctx context.Context, activityID string, in NewBlock) (Block, error) {
	var b Block
	_, _, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/activities/" + seg(activityID) + "/blocks",
		body: in, ok: []int{http.StatusCreated}}, &b)
	return b, err
}

// ListBlocks returns the live blocks of an activity, oldest first (admin).
func (c *Client) ListBlocks(ctx context.Context, activityID string) ([]Block, error) {
	var l BlockList
	err := c.get(ctx, "/v1/activities/"+seg(activityID)+"/blocks", nil, &l)
	return l.Items, err
}

// DeleteBlock ends a block (admin): its unused seats return to the public
// at once, admitting the waiting list; the registrations made from it
// stay.
func (c *Client) DeleteBlock(ctx context.Context, id string) error {
	_, _, err := c.call(ctx, request{method: http.MethodDelete, path: "/v1/blocks/" + seg(id), ok: []int{http.StatusNoContent}}, nil)
	return err
}
