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

// blockFor returns the block a signup for n seats takes its seats from:
// the live block of its code, or the oldest live block of one of its
// roles, when it has room for all n seats (and the activity and its pools
// have them once that block's own seats are counted free). A code that
// names no live block is refused.
func (d *decision) blockFor(c SignupCommand, n int) (*Block, error) {
	if c.Code != "" && !slices.ContainsFunc(d.blocks, func(b *Block) bool { return b.Code != nil && sameCode(*b.Code, c.Code) }) {
		return nil, UnknownCode(d.act.ID)
	}
	for _, b := range d.blocks {
		// Its own unused seats are free to its audience: what is free
		// besides them must not be overdrawn (a capacity lowered after
		// the block was made).
		if b.serves(c.Code, c.Roles) && b.Unused() >= n && d.counts(n).Unreserve(b.Unused()).Fits(n) {
			return b, nil
		}
	}
	return nil, nil
}

// reserve counts n more seats reserved (negative: fewer), in the activity
// and its pools.
func (d *decision) reserve(n int) {
	d.act.Reserved += n
	for _, p := range d.pools {
		p.Reserved += n
	}
}

// useBlock counts n seats of the block used: no longer reserved (the
// signup that uses them takes them).
func (d *decision) useBlock(b *Block, n int) {
	b.Used += n
	d.reserve(-n)
	d.touchBlock(b, false, "")
}

// release frees n seats of the registration r: back to its block while
// the block lives, else to the public.
func (d *decision) release(r *Registration, n int) {
	d.take(-n)
	if r.BlockID == nil {
		return
	}
	for _, b := range d.blocks {
		if b.ID == *r.BlockID {
			n = min(n, b.Used)
			b.Used -= n
			d.reserve(n)
			d.touchBlock(b, false, "")
			return
		}
	}
}

// touchBlock records a change of b for the plan.
func (d *decision) touchBlock(b *Block, created bool, ended EventType) {
	c, ok := d.changedBlocks[b.ID]
	if !ok {
		c = &BlockChange{}
		d.changedBlocks[b.ID] = c
		d.blockOrder = append(d.blockOrder, b.ID)
	}
	c.Block = *b
	c.Created = c.Created || created
	if ended != "" {
		c.Ended = ended
	}
}

// block applies a BlockCommand.
func (d *decision) block(i int, c BlockCommand, now time.Time) error {
	if c.Op == BlockCreate {
		n := c.New.Seats
		if c := d.counts(n); !c.Fits(n) {
			d.outcomes[i] = Outcome{Err: ActivityFull(d.act.ID, c)}
			return nil
		}
		b := &Block{ID: c.BlockID, ActivityID: d.act.ID, Seats: n, ExpiresAt: c.New.ExpiresAt, CreatedAt: d.st.At}
		if c.New.Code != "" {
			code := c.New.Code
			b.Code = &code
		} else {
			role := c.New.Role
			b.Role = &role
		}
		d.blocks = append(d.blocks, b)
		d.reserve(n)
		d.touchBlock(b, true, "")
		d.recordBlock(b, EventBlockCreated, n, c.Origin)
		snapshot := *b
		d.outcomes[i] = Outcome{Block: &snapshot, Changed: true}
		return nil
	}
	k := slices.IndexFunc(d.blocks, func(b *Block) bool { return b.ID == c.BlockID })
	if k < 0 {
		if c.Op == BlockExpire {
			// Ended already: another instance claimed the same due block
			// (claims end with their statement), or an admin deleted it.
			d.outcomes[i] = Outcome{}
			return nil
		}
		d.outcomes[i] = Outcome{Err: BlockNotFound(c.BlockID)}
		return nil
	}
	b := d.blocks[k]
	typ := EventBlockDeleted
	if c.Op == BlockExpire {
		if b.ExpiresAt == nil || b.ExpiresAt.After(now) {
			d.outcomes[i] = Outcome{}
			return nil
		}
		typ = EventBlockExpired
	}
	unused := b.Unused()
	d.blocks = slices.Delete(d.blocks, k, k+1)
	d.reserve(-unused)
	d.touchBlock(b, false, typ)
	d.recordBlock(b, typ, unused, c.Origin)
	d.outcomes[i] = Outcome{Changed: true}
	return d.promote(c.Origin)
}

// recordBlock appends a block event: its creation (seats: the block's
// seats) or its end (seats: the unused seats it returned).
func (d *decision) recordBlock(b *Block, typ EventType, seats int, o Origin) {
	d.seq++
	id := b.ID
	d.events = append(d.events, Event{
		ID: EventID(d.act.ID, d.seq), Seq: d.seq, ActivityID: d.act.ID, BlockID: &id,
		Type: typ, Seats: seats, Actor: o.Actor, RequestID: o.RequestID, At: d.st.At,
	})
}
