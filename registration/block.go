package registration

import (
	"cmp"
	"context"
	"crypto/subtle"
	"slices"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd"
)

// MaxAudienceLen is the most characters a block's code or role may have.
const MaxAudienceLen = 64

// Block holds seats of an activity for an audience: the signups that
// carry its Code, or whose token's roles hold its Role. Its unused seats
// (Seats - Used) are the activity's Reserved: no one else may take them,
// in the activity or in any of its pools.
type Block struct {
	ID         string     `json:"id"`
	ActivityID string     `json:"activity_id"`
	Seats      int        `json:"seats"`
	Used       int        `json:"used"`
	Code       *string    `json:"code,omitempty"`
	Role       *string    `json:"role,omitempty"`
	ExpiresAt  *time.Time `json:"expires_at"`
	CreatedAt  time.Time  `json:"created_at"`
}

// Unused returns the block's seats that nobody took yet.
func (b Block) Unused() int { return max(0, b.Seats-b.Used) }

// serves reports whether a signup with code and roles is the block's
// audience.
func (b Block) serves(code string, roles []string) bool {
	if b.Code != nil {
		return code != "" && sameCode(*b.Code, code)
	}
	return b.Role != nil && slices.Contains(roles, *b.Role)
}

// sameCode compares a block's code with a signup's in constant time:
// codes are secrets.
func sameCode(code, given string) bool {
	return subtle.ConstantTimeCompare([]byte(code), []byte(given)) == 1
}

// Reserved returns the unused seats of blocks.
func Reserved(blocks []Block) int {
	n := 0
	for _, b := range blocks {
		n += b.Unused()
	}
	return n
}

// NewBlock is what an admin sends to hold seats of an activity: Seats for
// the signups with Code, or for the members of Role (exactly one of
// them), until ExpiresAt when set.
type NewBlock struct {
	Seats     int
	Code      string
	Role      string
	ExpiresAt *time.Time
}

// Validate checks a new block against the API's ranges at now.
func (n NewBlock) Validate(now time.Time) error {
	if n.Seats < 1 || n.Seats > MaxCapacity {
		return capacityd.Errorf(capacityd.EInvalid, "seats must be between 1 and %d", MaxCapacity)
	}
	if (n.Code == "") == (n.Role == "") {
		return capacityd.Errorf(capacityd.EInvalid, "set exactly one of code and role")
	}
	for name, v := range map[string]string{"code": n.Code, "role": n.Role} {
		if v != "" && !validAudience(v) {
			return capacityd.Errorf(capacityd.EInvalid, "%s must be 1 to %d printable ASCII characters", name, MaxAudienceLen)
		}
	}
	if n.ExpiresAt != nil && !n.ExpiresAt.After(now) {
		return capacityd.Errorf(capacityd.EInvalid, "expires_at must be in the future")
	}
	return nil
}

// validAudience reports whether a code or role is 1 to MaxAudienceLen
// printable ASCII characters without spaces.
func validAudience(s string) bool {
	if len(s) < 1 || len(s) > MaxAudienceLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// validCode checks a signup's code: empty (none) or a code a block could
// have.
func validCode(code string) error {
	if code != "" && !validAudience(code) {
		return capacityd.Errorf(capacityd.EInvalid, "code must be 1 to %d printable ASCII characters", MaxAudienceLen)
	}
	return nil
}

// BlockOp is what a BlockCommand does.
type BlockOp int

// Block operations.
const (
	// BlockCreate holds the block's seats, if that many are free.
	BlockCreate BlockOp = iota + 1
	// BlockDelete ends the block: its unused seats return to the public.
	BlockDelete
	// BlockExpire ends the block if its expiry is due.
	BlockExpire
)

// BlockCommand creates, deletes or expires a block of the activity. A
// deletion or expiry returns the unused seats to the public in the same
// transaction that promotes the waiting list (and across the activity's
// pools).
type BlockCommand struct {
	Origin
	Op BlockOp
	// BlockID is the block's public id (the new one's for BlockCreate).
	BlockID string
	// New is the block to create.
	New NewBlock
}

func (c BlockCommand) origin() Origin { return c.Origin }

// BlockNotFound returns the not_found error of a block that does not
// exist or has ended.
func BlockNotFound(id string) error {
	return capacityd.Errorf(capacityd.ENotFound, "block %s not found", id)
}

// UnknownCode returns the invalid_request error of a signup whose code
// names no live block of the activity.
func UnknownCode(activityID string) error {
	return capacityd.Errorf(capacityd.EInvalid, "the code is not valid for activity %s (unknown or expired)", activityID)
}

// Block event types: a block's creation and end, recorded in its
// activity's feed. Seats is the block's seats (created) or the unused
// seats it returned to the public (deleted, expired).
const (
	EventBlockCreated EventType = "block.created"
	EventBlockDeleted EventType = "block.deleted"
	EventBlockExpired EventType = "block.expired"
)

// BlockEventTypes lists the block event types.
var BlockEventTypes = []EventType{EventBlockCreated, EventBlockDeleted, EventBlockExpired}

// IsBlockEvent reports whether t is a block event type.
func (t EventType) IsBlockEvent() bool { return strings.HasPrefix(string(t), "block.") }

// BlockChange is a block a plan created or changed, in its final state.
type BlockChange struct {
	Block Block
	// Created is true for a new block; Ended is EventBlockDeleted or
	// EventBlockExpired for one that ended.
	Created bool
	Ended   EventType
}

// DueBlock is a block whose expiry is due, claimed for expiry.
type DueBlock struct {
	BlockID    string
	ActivityID string
}

// CreateBlock holds seats of an activity for an audience, through the
// activity's queue: 409 activity_full when fewer are free (in the
// activity or one of its pools).
func (s *Service) CreateBlock(ctx context.Context, activityID string, in NewBlock, c Caller) (Block, error) {
	if err := in.Validate(s.now()); err != nil {
		return Block{}, err
	}
	if in.ExpiresAt != nil {
		t := in.ExpiresAt.UTC().Truncate(time.Microsecond)
		in.ExpiresAt = &t
	}
	out, err := s.submit(ctx, activityID, BlockCommand{Origin: c.origin(), Op: BlockCreate, BlockID: s.newID("b_"), New: in})
	if err = cmp.Or(err, out.Err); err != nil {
		return Block{}, err
	}
	return *out.Block, nil
}

// ListBlocks returns the live blocks of an activity, oldest first.
func (s *Service) ListBlocks(ctx context.Context, activityID string) ([]Block, error) {
	return s.store.ListBlocks(ctx, activityID)
}

// DeleteBlock ends a block: its unused seats return to the public at
// once, and the waiting list is promoted in the same transaction.
func (s *Service) DeleteBlock(ctx context.Context, id string, c Caller) error {
	b, err := s.store.GetBlock(ctx, id)
	if err != nil {
		return err
	}
	out, err := s.submit(ctx, b.ActivityID, BlockCommand{Origin: c.origin(), Op: BlockDelete, BlockID: id})
	return cmp.Or(err, out.Err)
}
