package store_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

var admin = registration.Origin{Actor: "admin:boss"}

// createBlock applies a block's creation and returns its outcome.
func createBlock(t *testing.T, s *store.Store, activityID string, nb registration.NewBlock) registration.Outcome {
	t.Helper()
	o, _ := applyOne(t, s, activityID, registration.BlockCommand{Origin: admin, Op: registration.BlockCreate, BlockID: newID("b"), New: nb})
	return o
}

func endBlock(t *testing.T, s *store.Store, activityID, blockID string, op registration.BlockOp) (registration.Outcome, []registration.Applied) {
	t.Helper()
	return applyOne(t, s, activityID, registration.BlockCommand{Origin: admin, Op: op, BlockID: blockID})
}

func codeSignup(user, code string) registration.SignupCommand {
	c := signupOf(user)
	c.Code = code
	return c
}

// burst signs up n users on the activity from two stores at once and
// returns how many took a seat.
func burst(t *testing.T, stores []*store.Store, activityID, prefix string, n int) int {
	t.Helper()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			applied, err := stores[g%len(stores)].Apply(context.Background(), []registration.CommandBatch{
				{ActivityID: activityID, Commands: []registration.Command{signupOf(fmt.Sprintf("%s%d", prefix, g))}},
			}, time.Now())
			if !assertNoErr(t, err) {
				return
			}
			if o := applied[0].Plan.Outcomes[0]; o.Err == nil && o.Registration.Status == registration.Pending {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	return int(admitted.Load())
}

// TestBlockHoldsItsSeatsAgainstABurst: capacity 10, a code block of 4.
// A public burst from two stores gets exactly 6; a code signup on the
// publicly full activity takes a block seat; a cancelled block
// registration gives its seat back to the block, not to the public;
// deleting the block returns its unused seats, and exactly that many more
// are admitted; the block registrations stay.
func TestBlockHoldsItsSeatsAgainstABurst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.NewDatabase(t)
	stores := []*store.Store{store.New(testenv.Pool(t, url, 8)), store.New(testenv.Pool(t, url, 8))}
	id := createActivities(t, stores[0], 1, 10)[0]

	o := createBlock(t, stores[0], id, registration.NewBlock{Seats: 4, Code: "SPEAKERS-27"})
	require.NoError(t, o.Err)
	block := *o.Block
	a, err := stores[1].GetActivity(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 4, a.Reserved)
	require.Equal(t, 6, a.Remaining)

	require.Equal(t, 6, burst(t, stores, id, "public", 30), "the public gets the unreserved seats only")

	o, _ = applyOne(t, stores[1], id, codeSignup("speaker1", "SPEAKERS-27"))
	require.NoError(t, o.Err)
	require.Equal(t, registration.Pending, o.Registration.Status)
	require.Equal(t, block.ID, *o.Registration.BlockID)
	o, _ = applyOne(t, stores[0], id, codeSignup("speaker2", "nope"))
	require.ErrorContains(t, o.Err, "code is not valid")

	// A second speaker, then one cancels: the seat goes back to the block.
	o, _ = applyOne(t, stores[0], id, codeSignup("speaker2", "SPEAKERS-27"))
	require.NoError(t, o.Err)
	o, _ = applyOne(t, stores[0], id, cancelOf(o.Registration.ID))
	require.NoError(t, o.Err)
	a, err = stores[0].GetActivity(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 7, a.Taken)
	require.Equal(t, 3, a.Reserved)
	require.Equal(t, 0, a.Remaining)
	require.Equal(t, 0, burst(t, stores, id, "again", 10), "a seat given back to the block stays reserved")

	blocks, err := stores[1].ListBlocks(ctx, id)
	require.NoError(t, err)
	require.Len(t, blocks, 1)
	require.Equal(t, 1, blocks[0].Used)

	o, applied := endBlock(t, stores[1], id, block.ID, registration.BlockDelete)
	require.NoError(t, o.Err)
	events := applied[0].Plan.Events
	require.Len(t, events, 1)
	require.Equal(t, registration.EventBlockDeleted, events[0].Type)
	require.Equal(t, 3, events[0].Seats, "the deletion returns the unused seats")
	require.Equal(t, 3, burst(t, stores, id, "after", 20), "exactly the returned seats are admitted")

	a, err = stores[0].GetActivity(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 10, a.Taken)
	require.Equal(t, 0, a.Reserved)
	blocks, err = stores[0].ListBlocks(ctx, id)
	require.NoError(t, err)
	require.Empty(t, blocks)
	_, err = stores[0].GetBlock(ctx, block.ID)
	require.ErrorContains(t, err, "not found")
	o, _ = applyOne(t, stores[0], id, codeSignup("speaker3", "SPEAKERS-27"))
	require.ErrorContains(t, o.Err, "code is not valid", "a deleted block's code is refused")
}

// TestRoleBlockOnAWaitlistedActivity: a role block of 2 on a waitlisted
// activity of 3: the public waits after one seat; a resident takes a
// block seat; deleting the block promotes the first in line at once.
func TestRoleBlockOnAWaitlistedActivity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := store.New(testenv.Pool(t, testenv.NewDatabase(t), 4))
	a, err := s.CreateActivity(ctx, newID("a"), registration.NewActivity{Title: "rounds", Capacity: 3, HoldSeconds: 900, Waitlist: true})
	require.NoError(t, err)
	o := createBlock(t, s, a.ID, registration.NewBlock{Seats: 2, Role: "resident"})
	require.NoError(t, o.Err)
	block := o.Block.ID

	o, _ = applyOne(t, s, a.ID, signupOf("p1"))
	require.Equal(t, registration.Pending, o.Registration.Status)
	o, _ = applyOne(t, s, a.ID, signupOf("p2"))
	require.Equal(t, registration.Waitlisted, o.Registration.Status)
	waiting := o.Registration.ID

	resident := signupOf("r1")
	resident.Roles = []string{"member", "resident"}
	o, _ = applyOne(t, s, a.ID, resident)
	require.NoError(t, o.Err)
	require.Equal(t, registration.Pending, o.Registration.Status)
	require.Equal(t, block, *o.Registration.BlockID)

	o, applied := endBlock(t, s, a.ID, block, registration.BlockDelete)
	require.NoError(t, o.Err)
	events := applied[0].Plan.Events
	require.Len(t, events, 2)
	require.Equal(t, registration.EventBlockDeleted, events[0].Type)
	require.Equal(t, registration.EventPromoted, events[1].Type)
	require.Equal(t, waiting, events[1].RegistrationID)

	got, err := s.ActivityEvents(ctx, registration.EventFilter{ActivityID: a.ID, Limit: 100})
	require.NoError(t, err)
	for i, e := range got {
		require.EqualValues(t, i+1, e.Seq, "the feed is gapless")
	}
	require.Equal(t, registration.EventBlockCreated, got[0].Type)
	require.Equal(t, block, *got[0].BlockID)
	require.Equal(t, "admin:boss", got[0].Actor)
	require.Equal(t, block, *got[3].BlockID, "the block registration's event carries the block")
}

// TestBlockExpiresAndPromotes: a due block is claimed and expired, its
// seats promote the waiting list; an expiry that is not due, or of a
// block another store expired already, changes nothing.
func TestBlockExpiresAndPromotes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.NewDatabase(t)
	s := store.New(testenv.Pool(t, url, 4))
	a, err := s.CreateActivity(ctx, newID("a"), registration.NewActivity{Title: "expiring", Capacity: 2, HoldSeconds: 900, Waitlist: true})
	require.NoError(t, err)
	soon := time.Now().Add(time.Second).UTC().Truncate(time.Microsecond)
	o := createBlock(t, s, a.ID, registration.NewBlock{Seats: 2, Code: "VIP", ExpiresAt: &soon})
	require.NoError(t, o.Err)
	block := o.Block.ID
	o, _ = applyOne(t, s, a.ID, signupOf("w1"))
	require.Equal(t, registration.Waitlisted, o.Registration.Status)

	o, _ = endBlock(t, s, a.ID, block, registration.BlockExpire)
	require.NoError(t, o.Err)
	require.False(t, o.Changed, "not due yet")
	due, err := s.ClaimDueBlocks(ctx, time.Now(), 10)
	require.NoError(t, err)
	require.Empty(t, due)

	// Due once its time passed (then the expiry below runs after it too).
	require.Eventually(t, func() bool {
		due, err = s.ClaimDueBlocks(ctx, time.Now(), 10)
		return err != nil || len(due) > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, []registration.DueBlock{{BlockID: block, ActivityID: a.ID}}, due)
	expire := registration.BlockCommand{Origin: registration.Origin{Actor: registration.ActorSystem},
		Op: registration.BlockExpire, BlockID: block}
	o, _ = applyOne(t, s, a.ID, expire)
	require.NoError(t, o.Err)
	require.True(t, o.Changed)
	// A second instance that claimed the same block before the expiry
	// committed finds it ended: nothing to do, and no error to log.
	o, _ = applyOne(t, store.New(testenv.Pool(t, url, 2)), a.ID, expire)
	require.NoError(t, o.Err)
	require.False(t, o.Changed)
	got, err := s.ActivityEvents(ctx, registration.EventFilter{ActivityID: a.ID, Limit: 100})
	require.NoError(t, err)
	types := make([]registration.EventType, len(got))
	for i, e := range got {
		types[i] = e.Type
	}
	require.Equal(t, []registration.EventType{registration.EventBlockCreated, registration.EventWaitlisted,
		registration.EventBlockExpired, registration.EventPromoted}, types)
	require.Equal(t, registration.ActorSystem, got[2].Actor)
	act, err := s.GetActivity(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, 1, act.Taken)
	require.Equal(t, 0, act.Reserved)
}

// TestBlockIsHeldInItsPools: a block of an activity in a pool holds its
// seats in the pool too: the pool's other activity gets only what is left
// besides them, from two stores at once; a block bigger than the pool's
// free seats is refused; deleting the block promotes across the pool.
func TestBlockIsHeldInItsPools(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.NewDatabase(t)
	stores := []*store.Store{store.New(testenv.Pool(t, url, 8)), store.New(testenv.Pool(t, url, 8))}
	p := createPool(t, stores[0], 6)
	blocked := createPooled(t, stores[0], 10, false, p)
	other := createPooled(t, stores[0], 10, true, p)

	o := createBlock(t, stores[0], blocked, registration.NewBlock{Seats: 7, Code: "BIG"})
	require.ErrorContains(t, o.Err, "no")
	o = createBlock(t, stores[0], blocked, registration.NewBlock{Seats: 4, Code: "HALL"})
	require.NoError(t, o.Err)
	block := o.Block.ID
	pool, err := stores[1].GetPool(ctx, p)
	require.NoError(t, err)
	require.Equal(t, 2, pool.Remaining)

	require.Equal(t, 2, burst(t, stores, other, "o", 20), "the pool keeps the block's seats")
	a, err := stores[0].GetActivity(ctx, other)
	require.NoError(t, err)
	require.Equal(t, 18, a.Waiting)
	require.Equal(t, 0, a.Remaining)

	o, _ = applyOne(t, stores[1], blocked, codeSignup("hall1", "HALL"))
	require.NoError(t, o.Err)
	require.Equal(t, registration.Pending, o.Registration.Status)

	_, applied := endBlock(t, stores[0], blocked, block, registration.BlockDelete)
	promoted := 0
	for _, ap := range applied {
		for _, e := range ap.Plan.Events {
			if e.Type == registration.EventPromoted {
				require.Equal(t, other, e.ActivityID)
				promoted++
			}
		}
	}
	require.Equal(t, 3, promoted, "the block's unused seats promote across the pool")
	pool, err = stores[1].GetPool(ctx, p)
	require.NoError(t, err)
	require.Equal(t, 6, pool.Taken)
	require.Equal(t, 0, pool.Remaining)
}
