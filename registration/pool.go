package registration

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd"
)

// MaxPoolsPerActivity is the most pools one activity may belong to.
const MaxPoolsPerActivity = 4

// Pool is a number of seats shared by several activities (a hall that
// holds two activities, a lab shared by parallel workshops): a signup must
// fit its activity and every pool the activity belongs to. Taken is the
// seats of the occupying registrations of all its activities.
type Pool struct {
	// Seq orders pools by creation for keyset pagination.
	Seq int64 `json:"-"`

	ID       string `json:"id"`
	Title    string `json:"title"`
	Capacity int    `json:"capacity"`
	Taken    int    `json:"taken"`
	// Reserved is the unused seats of its activities' blocks: no signup
	// outside a block's audience may take them.
	Reserved   int       `json:"reserved"`
	Remaining  int       `json:"remaining"`
	Activities []string  `json:"activities"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// PoolPage is one page of the pool listing.
type PoolPage struct {
	Items      []Pool  `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// NewPool is what an admin sends to create a pool.
type NewPool struct {
	Title    string
	Capacity int
}

// Validate checks a new pool against the API's ranges.
func (n NewPool) Validate() error { return validateFields(&n.Title, &n.Capacity, nil) }

// PoolPatch changes the fields of a pool that are set.
type PoolPatch struct {
	Title    *string
	Capacity *int
}

// Validate checks the fields a pool patch sets.
func (p PoolPatch) Validate() error {
	if p.Title == nil && p.Capacity == nil {
		return capacityd.Errorf(capacityd.EInvalid, "nothing to change: set title or capacity")
	}
	return validateFields(p.Title, p.Capacity, nil)
}

// PoolCommand changes a pool (an admin's request). It is applied in a
// change transaction like every seat change: a capacity raise promotes
// from the waiting lists of the pool's activities.
type PoolCommand struct {
	Origin
	PoolID string
	Patch  PoolPatch
}

func (c PoolCommand) origin() Origin { return c.Origin }

// PoolSeatState is a pool's seats at one moment of the authority: as of
// its LastSeq (every transaction that changes the seats of one of its
// activities, its capacity or its activities moves it forward) and of its
// capacity as of UpdatedAt.
type PoolSeatState struct {
	PoolID     string
	Capacity   int
	Taken      int
	Reserved   int
	LastSeq    int64
	UpdatedAt  time.Time
	Activities []string
}

// SeatRoom returns the pool's room.
func (p PoolSeatState) SeatRoom() Room {
	return Room{Pool: p.PoolID, Capacity: p.Capacity, Taken: p.Taken, Reserved: p.Reserved}
}

// Remaining returns the pool's remaining seats (Room.Remaining).
func (p PoolSeatState) Remaining() int { return p.SeatRoom().Remaining() }

// SeatRoom returns the pool's room.
func (p Pool) SeatRoom() Room {
	return Room{Pool: p.ID, Capacity: p.Capacity, Taken: p.Taken, Reserved: p.Reserved}
}

// PoolNotFound returns the not_found error of a pool that does not exist.
func PoolNotFound(id string) error {
	return capacityd.Errorf(capacityd.ENotFound, "pool %s not found", id)
}

// UnknownPools returns the invalid_request error of an activity that names
// pools that do not exist.
func UnknownPools(ids []string) error {
	return capacityd.Errorf(capacityd.EInvalid, "pools not found: %s", strings.Join(ids, ", "))
}

// validatePools checks an activity's list of pools: at most
// MaxPoolsPerActivity ids, each well formed, none twice. It sorts them.
func validatePools(pools []string) error {
	if len(pools) > MaxPoolsPerActivity {
		return capacityd.Errorf(capacityd.EInvalid, "an activity belongs to at most %d pools", MaxPoolsPerActivity)
	}
	for _, id := range pools {
		if !strings.HasPrefix(id, "p_") || !storable(id) || len(id) > 64 {
			return capacityd.Errorf(capacityd.EInvalid, "pools must hold pool ids (p_…), not %q", id)
		}
	}
	slices.Sort(pools)
	if len(slices.Compact(slices.Clone(pools))) != len(pools) {
		return capacityd.Errorf(capacityd.EInvalid, "pools must not name a pool twice")
	}
	return nil
}

// CreatePool validates and stores a new pool.
func (s *Service) CreatePool(ctx context.Context, in NewPool) (Pool, error) {
	if err := in.Validate(); err != nil {
		return Pool{}, err
	}
	return s.store.CreatePool(ctx, s.newID("p_"), in)
}

// GetPool returns a pool with its authoritative seat numbers.
func (s *Service) GetPool(ctx context.Context, id string) (Pool, error) {
	if !IsPoolID(id) || !storable(id) {
		return Pool{}, PoolNotFound(id)
	}
	return s.store.GetPool(ctx, id)
}

// ListPools returns one page of the pools, newest first.
func (s *Service) ListPools(ctx context.Context, before string, limit int) (PoolPage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return PoolPage{}, err
	}
	items, err := s.store.ListPools(ctx, before, limit+1)
	if err != nil {
		return PoolPage{}, err
	}
	var p PoolPage
	p.Items, p.NextCursor = cutPage(items, limit, func(p Pool) string { return p.ID })
	return p, nil
}

// UpdatePool changes a pool in a change transaction, like every seat
// change: lowering the capacity below taken evicts nobody, raising it
// promotes from the waiting lists of its activities at once.
func (s *Service) UpdatePool(ctx context.Context, id string, p PoolPatch, c Caller) (Pool, error) {
	if err := p.Validate(); err != nil {
		return Pool{}, err
	}
	if err := validateCaller(c); err != nil {
		return Pool{}, err
	}
	if !IsPoolID(id) || !storable(id) {
		return Pool{}, PoolNotFound(id)
	}
	out, err := s.submit(ctx, id, PoolCommand{Origin: c.origin(), PoolID: id, Patch: p})
	if err != nil {
		return Pool{}, err
	}
	if out.Err != nil {
		return Pool{}, out.Err
	}
	return *out.Pool, nil
}
