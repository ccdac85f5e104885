package histcheck

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// Histories of pools: activities a_1 and a_2 sharing the seats of pool
// p_1, their own seats more than the pool's.

const (
	pool = "p_1"
	act2 = "a_2"
)

func createdPool(b *builder, id string, capacity int) *builder {
	return b.add(history.CreatePool, history.Input{Key: id, Capacity: capacity}, 0, 1, history.Answered,
		history.Output{Status: 201, ID: id, Capacity: capacity})
}

// createdIn creates activity key in pools, for parties of up to 4 seats.
func createdIn(b *builder, key string, capacity int, waitlist bool, policy string, pools ...string) *builder {
	return b.add(history.CreateActivity, history.Input{Key: key, Capacity: capacity, Waitlist: waitlist, Users: 5,
		MaxSeats: 4, Policy: policy, Pools: pools}, 2, 3, history.Answered, history.Output{Status: 201, Capacity: capacity, Waitlist: waitlist})
}

// twoInAPool is pool p_1 of poolSeats seats shared by a_1 and a_2, each
// of 5 seats, with a waiting list of policy.
func twoInAPool(poolSeats int, policy string) *builder {
	b := createdPool(&builder{}, pool, poolSeats)
	createdIn(b, act, 5, true, policy, pool)
	return createdIn(b, act2, 5, true, policy, pool)
}

func partyOn(key string, u, seats int) history.Input {
	return history.Input{Key: key, User: u, Seats: seats, IdempotencyKey: "k"}
}

func cancelOn(key string, u int, id string, seats int) history.Input {
	return history.Input{Key: key, User: u, Registration: id, Held: seats}
}

func cancelledWith(id string, seats int) history.Output {
	return history.Output{Status: 200, Registration: id, RegStatus: cancelled, Seats: seats}
}

// readWith is an authoritative activity read with its remaining.
func readWith(taken, waiting, capacity, remaining int, waitlist bool) history.Output {
	o := read(taken, waiting, capacity, waitlist)
	o.Remaining = new(remaining)
	return o
}

func poolRead(taken, capacity int) history.Output {
	return history.Output{Status: 200, Capacity: capacity, Taken: taken, Remaining: new(max(0, capacity-taken))}
}

func TestPooledHistoryIsLinearizable(t *testing.T) {
	for _, policy := range []string{"strict", "fill"} {
		b := twoInAPool(4, policy)
		b.add(history.Signup, partyOn(act, 0, 2), 10, 20, history.Answered, seated("r0", 2))
		b.add(history.Signup, partyOn(act2, 0, 2), 21, 30, history.Answered, seated("s0", 2))
		// The pool is full: a_2 has 3 seats of its own left, yet a party
		// of 1 waits (a_1 refuses it as full without a waiting list).
		b.add(history.Signup, partyOn(act2, 1, 1), 31, 40, history.Answered, waiting("s1", 1, 1))
		b.add(history.ReadActivity, history.Input{Key: act2}, 41, 42, history.Answered, readWith(2, 1, 5, 0, true))
		b.add(history.ReadPool, history.Input{Key: pool}, 43, 44, history.Answered, poolRead(4, 4))
		// a_1's cancellation frees 2 of the pool's seats: a_2's line takes
		// one, across the pool.
		b.add(history.Cancel, cancelOn(act, 0, "r0", 2), 50, 60, history.Answered, cancelledWith("r0", 2))
		b.add(history.ReadActivity, history.Input{Key: act2}, 61, 62, history.Answered, readWith(3, 0, 5, 1, true))
		b.add(history.ReadActivity, history.Input{Key: act}, 63, 64, history.Answered, readWith(0, 0, 5, 1, true))
		b.add(history.ReadPool, history.Input{Key: pool}, 65, 66, history.Answered, poolRead(3, 4))
		b.add(history.Signup, partyOn(act, 1, 2), 70, 80, history.Answered, waiting("r1", 2, 1))
		b.add(history.ReadActivity, history.Input{Key: act}, 81, 82, history.Answered, readWith(0, 1, 5, 1, true))
		r := Check(b.h, opts)
		require.True(t, r.OK(), "%s: %s", policy, r)
		require.Equal(t, 2, r.Authority.Partitions)
		require.Equal(t, PoolVerdict{Pools: 1, Activities: 2, Registrations: 2, Reads: 2}, r.Pools)
	}
}

func TestOversoldPoolIsCaught(t *testing.T) {
	// Each activity within its own 5 seats, the pool's 4 oversold: 2 + 3.
	b := twoInAPool(4, "strict")
	b.add(history.Signup, partyOn(act, 0, 2), 10, 30, history.Answered, seated("r0", 2))
	b.add(history.Signup, partyOn(act2, 0, 3), 15, 35, history.Answered, seated("s0", 3))
	r := Check(b.h, opts)
	require.Equal(t, porcupine.Ok, r.Authority.Result, "each activity on its own is right: %s", r)
	require.False(t, r.OK())
	require.False(t, r.Pools.OK())
	require.Len(t, r.Pools.Violations, 1)
	require.Contains(t, r.Pools.Violations[0], "pool p_1 (capacity 4): at 35 its activities' registrations surely held 5 seats: r0 ×2, s0 ×3")
	require.Contains(t, r.String(), "pools     Illegal")

	// So is a pool read over capacity, and one showing fewer seats taken
	// than its activities surely held.
	b = twoInAPool(4, "strict")
	b.add(history.ReadPool, history.Input{Key: pool}, 10, 20, history.Answered, poolRead(5, 4))
	require.Contains(t, Check(b.h, opts).Pools.Violations[0], "taken 5 over capacity 4")
	b = twoInAPool(4, "strict")
	b.add(history.Signup, partyOn(act, 0, 3), 10, 20, history.Answered, seated("r0", 3))
	b.add(history.ReadPool, history.Input{Key: pool}, 30, 40, history.Answered, poolRead(2, 4))
	require.Contains(t, Check(b.h, opts).Pools.Violations[0], "taken 2 while its activities' registrations surely held at least 3 seats")

	// The same seats one after the other fit: a_1's party may be cancelled
	// (its cancellation was sent) before a_2's is seated.
	b = twoInAPool(4, "strict")
	b.add(history.Signup, partyOn(act, 0, 2), 10, 20, history.Answered, seated("r0", 2))
	b.add(history.Cancel, cancelOn(act, 0, "r0", 2), 25, 50, history.Unknown, history.Output{Error: "timeout"})
	b.add(history.Signup, partyOn(act2, 0, 3), 30, 40, history.Answered, seated("s0", 3))
	b.add(history.ReadPool, history.Input{Key: pool}, 41, 42, history.Answered, poolRead(3, 4))
	r = Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
	// And a party reduced (the reduction sent) before the other is seated.
	b = twoInAPool(4, "fill")
	b.add(history.Signup, partyOn(act, 0, 3), 10, 20, history.Answered, seated("r0", 3))
	b.add(history.ReduceSeats, history.Input{Key: act, User: 0, Registration: "r0", Seats: 1, Held: 3}, 25, 50, history.Answered,
		reduced("r0", pending, 1))
	b.add(history.Signup, partyOn(act2, 0, 3), 30, 40, history.Answered, seated("s0", 3))
	require.True(t, Check(b.h, opts).OK())
	// But not one reduced after.
	b.add(history.Signup, partyOn(act2, 1, 1), 60, 70, history.Answered, seated("s1", 1))
	r = Check(b.h, opts)
	require.False(t, r.Pools.OK(), "1 + 3 + 1 seats of 4")
	require.Contains(t, r.Pools.Violations[0], "surely held 5 seats: r0 ×1, s0 ×3, s1 ×1")
}

func TestPooledRefusalIsChecked(t *testing.T) {
	full := func(remaining, seats int) *builder {
		b := createdPool(&builder{}, pool, 4)
		createdIn(b, act, 5, false, "strict", pool)
		createdIn(b, act2, 5, false, "strict", pool)
		b.add(history.Signup, partyOn(act2, 0, 3), 10, 20, history.Answered, seated("s0", 3))
		b.add(history.Signup, partyOn(act, 0, seats), 30, 40, history.Answered, fullWith(remaining))
		return b
	}
	// a_1 has 5 seats of its own; the pool 1 left.
	require.True(t, Check(full(1, 2).h, opts).OK(), "a party of 2 does not fit the pool's 1")
	require.True(t, Check(full(0, 2).h, opts).OK(), "the pool's seat may be gone by then: another activity's signup")
	require.Equal(t, porcupine.Illegal, Check(full(2, 2).h, opts).Authority.Result, "a party of 2 fits 2 remaining")
	require.Equal(t, porcupine.Illegal, Check(full(6, 4).h, opts).Authority.Result, "more remaining than the activity's own free seats")
	// An activity outside pools answers its own free seats.
	b := createdIn(&builder{}, act, 5, false, "strict")
	b.add(history.Signup, partyOn(act, 0, 3), 10, 20, history.Answered, seated("r0", 3))
	b.add(history.Signup, partyOn(act, 1, 3), 30, 40, history.Answered, fullWith(1))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result, "2 remained")
	// A party that does not fit the activity's own seats is refused in
	// pools too.
	b = createdPool(&builder{}, pool, 10)
	createdIn(b, act, 2, false, "strict", pool)
	b.add(history.Signup, partyOn(act, 0, 3), 10, 20, history.Answered, seated("r0", 3))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result, "3 seats of the activity's 2")
}

func TestPoolLineLeftWaitingIsCaught(t *testing.T) {
	// a_2's party of 1 waits for the pool; a_1's cancellation frees a
	// pool seat, and a read of a_2 says one remains while it still waits.
	line := func(after history.Output) *builder {
		b := twoInAPool(3, "strict")
		b.add(history.Signup, partyOn(act, 0, 1), 10, 20, history.Answered, seated("r0", 1))
		b.add(history.Signup, partyOn(act2, 0, 2), 21, 30, history.Answered, seated("s0", 2))
		b.add(history.Signup, partyOn(act2, 1, 1), 31, 40, history.Answered, waiting("s1", 1, 1))
		b.add(history.Cancel, cancelOn(act, 0, "r0", 1), 50, 60, history.Answered, cancelledWith("r0", 1))
		b.add(history.ReadActivity, history.Input{Key: act2}, 70, 80, history.Answered, after)
		return b
	}
	require.True(t, Check(line(readWith(3, 0, 5, 0, true)).h, opts).OK(), "promoted across the pool")
	require.True(t, Check(line(readWith(2, 1, 5, 0, true)).h, opts).OK(), "another activity of the pool took the seat first")
	r := Check(line(readWith(2, 1, 5, 1, true)).h, opts)
	require.Equal(t, porcupine.Illegal, r.Authority.Result, "a seat remains for the party of 1 that waits")
	require.Contains(t, r.Authority.Witness(act2), "read → capacity 5 taken 2 waiting 1 remaining 1")
	// A read without its remaining says nothing of it.
	o := readWith(2, 1, 5, 0, true)
	o.Remaining = nil
	require.True(t, Check(line(o).h, opts).OK())
	// Outside pools, remaining is the activity's free seats.
	b := created(&builder{}, 2, true)
	b.add(history.Signup, signup(0), 10, 20, history.Answered, admitted("r0"))
	b.add(history.ReadActivity, history.Input{Key: act}, 30, 40, history.Answered, readWith(1, 0, 2, 1, true))
	require.True(t, Check(b.h, opts).OK())
	b.add(history.ReadActivity, history.Input{Key: act}, 50, 60, history.Answered, readWith(1, 0, 2, 0, true))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result)
}

func TestPoolPromotionOrderIsChecked(t *testing.T) {
	// Fill, a_1 alone in a pool of 4: the party of 4 holds the pool; a
	// party of 2 and then one of 3 wait (a_1 has seats of its own for the
	// first, not the pool). The cancellation frees 4: the party of 2 is
	// the oldest that fits, whatever the pool has left; the party of 3
	// cannot be seated before it.
	for _, c := range []struct {
		taken, waiting, remaining int
		ok                        bool
	}{
		{2, 1, 2, true},  // the party of 2, then 2 left: the 3 does not fit
		{0, 2, 0, true},  // another activity of the pool took its seats first
		{3, 1, 1, false}, // the 3 past the older 2
		{5, 0, 0, false}, // both: 5 seats of the pool's 4
		{2, 1, 3, false}, // 3 remaining, and the 3 left waiting
	} {
		b := createdPool(&builder{}, pool, 4)
		createdIn(b, act, 6, true, "fill", pool)
		b.add(history.Signup, partyOn(act, 0, 4), 10, 20, history.Answered, seated("r0", 4))
		b.add(history.Signup, partyOn(act, 1, 2), 21, 30, history.Answered, waiting("r1", 2, 1))
		b.add(history.Signup, partyOn(act, 2, 3), 31, 40, history.Answered, waiting("r2", 3, 2))
		b.add(history.Cancel, cancelOn(act, 0, "r0", 4), 50, 60, history.Answered, cancelledWith("r0", 4))
		b.add(history.ReadActivity, history.Input{Key: act}, 70, 80, history.Answered, readWith(c.taken, c.waiting, 6, c.remaining, true))
		r := Check(b.h, opts)
		if c.ok {
			require.True(t, r.OK(), "%+v: %s", c, r)
		} else {
			require.False(t, r.OK(), "%+v", c)
		}
	}
	// Strict: the head only, in pools too.
	b := createdPool(&builder{}, pool, 4)
	createdIn(b, act, 6, true, "strict", pool)
	b.add(history.Signup, partyOn(act, 0, 4), 10, 20, history.Answered, seated("r0", 4))
	b.add(history.Signup, partyOn(act, 1, 3), 21, 30, history.Answered, waiting("r1", 3, 1))
	b.add(history.Signup, partyOn(act, 2, 1), 31, 40, history.Answered, waiting("r2", 1, 2))
	b.add(history.ReduceSeats, history.Input{Key: act, User: 0, Registration: "r0", Seats: 2, Held: 4}, 50, 60, history.Answered,
		reduced("r0", pending, 2))
	b.add(history.ReadActivity, history.Input{Key: act}, 70, 80, history.Answered, readWith(3, 1, 6, 1, true))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result, "the party of 1 seated past the head")
}

func TestPooledReductionMayBePromoted(t *testing.T) {
	// A waiting party that shrinks may be seated by its own reduction, and
	// answered so, or wait on if the pool has no seats for it.
	for _, status := range []string{pending, waitlisted} {
		b := twoInAPool(4, "fill")
		b.add(history.Signup, partyOn(act, 0, 2), 10, 20, history.Answered, seated("r0", 2))
		b.add(history.Signup, partyOn(act, 1, 4), 21, 30, history.Answered, waiting("r1", 4, 1))
		b.add(history.ReduceSeats, history.Input{Key: act, User: 1, Registration: "r1", Seats: 2, Held: 4}, 40, 50, history.Answered,
			reduced("r1", status, 2))
		taken, waits := 4, 0
		if status == waitlisted {
			// The seats went to a_2 meanwhile.
			b.add(history.Signup, partyOn(act2, 0, 2), 35, 45, history.Answered, seated("s0", 2))
			taken, waits = 2, 1
		}
		b.add(history.ReadActivity, history.Input{Key: act}, 60, 70, history.Answered, readWith(taken, waits, 5, 0, true))
		r := Check(b.h, opts)
		require.True(t, r.OK(), "%s: %s", status, r)
	}
}

// TestPooledModelAllowsWhatAnActivityAloneDoes drives an activity's model
// and the same activity's model in pools through random steps of unknown
// outcome (each takes effect; blocks and signups with their code among
// them): a pool with seats to spare changes
// nothing, so every state the activity alone reaches must be one the
// pooled model allows.
func TestPooledModelAllowsWhatAnActivityAloneDoes(t *testing.T) {
	alone, pooled := stepActivity(false), stepStates(false)
	unknown := activityOutput{unknown: true}
	rng := rand.New(rand.NewPCG(3, 4))
	for run := range 200 {
		create := history.Op{Kind: history.CreateActivity, Input: history.Input{Capacity: 1 + rng.IntN(6), Waitlist: true, Users: 5,
			MaxSeats: 4, Policy: []string{"strict", "fill"}[run%2]}}
		_, st := alone(activityState{}, activityInput{op: create}, unknown)
		create.Input.Pools = []string{pool}
		_, sts := pooled(activityStates{{}}, activityInput{op: create}, unknown)
		for range 30 {
			u := rng.IntN(5)
			op := history.Op{Input: history.Input{User: u, Registration: unknownID}}
			switch p := rng.IntN(12); {
			case p < 5:
				op.Kind, op.Input.Seats = history.Signup, 1+rng.IntN(4)
				if rng.IntN(3) == 0 {
					op.Input.Code = "x"
				}
			case p < 7:
				op.Kind = history.Cancel
			case p < 9:
				op.Kind, op.Input.Seats = history.ReduceSeats, 1+rng.IntN(3)
			case p < 10:
				op.Kind, op.Input.Seats, op.Input.Code = history.CreateBlock, 1+rng.IntN(3), "x"
			default:
				op.Kind, op.Input.Capacity = history.SetCapacity, 1+rng.IntN(8)
			}
			_, st = alone(st, activityInput{op: op}, unknown)
			ok, next := pooled(sts, activityInput{op: op}, unknown)
			require.True(t, ok)
			sts = next
			want := st.(activityState)
			want.pooled = true
			require.True(t, slices.ContainsFunc(sts.(activityStates), func(s activityState) bool { return equalActivity(s, want) }),
				"%s after %s is not among %s", describeActivity(want), describeActivityOp(activityInput{op: op}, unknown), describeStates(sts))
		}
	}
}
