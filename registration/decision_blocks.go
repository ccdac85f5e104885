package registration

import (
	"slices"
	"time"
)

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
