package histcheck

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// Histories of blocks: seats of a_1 held for the signups with code "x".

func blockOf(seats int) history.Input {
	return history.Input{Key: act, Seats: seats, Code: "x"}
}

func blockMade(id string, seats int) history.Output {
	return history.Output{Status: 201, ID: id, Seats: seats}
}

func deleteBlock(id string) history.Input { return history.Input{Key: act, Block: id} }

var blockDeleted = history.Output{Status: 204}

func withCode(u, seats int, code string) history.Input {
	return history.Input{Key: act, User: u, Seats: seats, Code: code, IdempotencyKey: "k"}
}

// readReserved is an authoritative read with reserved seats.
func readReserved(taken, reserved, waiting, capacity, remaining int) history.Output {
	o := readWith(taken, waiting, capacity, remaining, true)
	o.Reserved = reserved
	return o
}

// reservedActivity is a_1 of 4 seats, strict, with a block of 2 seats for
// code x and the public's 2 seats taken: u0 holds them.
func reservedActivity() *builder {
	b := createdGroups(&builder{}, 4, true, "strict")
	b.add(history.CreateBlock, blockOf(2), 2, 3, history.Answered, blockMade("b1", 2))
	b.add(history.Signup, party(0, 2), 10, 20, history.Answered, seated("r0", 2))
	return b
}

func TestBlockHistoryIsLinearizable(t *testing.T) {
	b := reservedActivity()
	b.add(history.ReadActivity, history.Input{Key: act}, 21, 22, history.Answered, readReserved(2, 2, 0, 4, 0))
	// The public is full: u1 waits, though 2 seats are not taken.
	b.add(history.Signup, party(1, 1), 30, 40, history.Answered, waiting("r1", 1, 1))
	// The code's signup is seated from the block past the line.
	b.add(history.Signup, withCode(2, 1, "x"), 41, 50, history.Answered, seated("r2", 1))
	// An unknown code is refused; a party the block has no room for is
	// public, and waits.
	b.add(history.Signup, withCode(3, 1, "y"), 51, 52, history.Answered, history.Output{Status: 400, Code: "invalid_request"})
	b.add(history.Signup, withCode(3, 2, "x"), 53, 54, history.Answered, waiting("r3", 2, 2))
	b.add(history.ReadActivity, history.Input{Key: act}, 55, 56, history.Answered, readReserved(3, 1, 2, 4, 0))
	// A block of more seats than are free is refused.
	b.add(history.CreateBlock, history.Input{Key: act, Seats: 1, Code: "z"}, 57, 58, history.Answered, fullWith(0))
	// u2's cancellation gives its seat back to the block: nobody is
	// promoted.
	b.add(history.Cancel, history.Input{Key: act, User: 2, Registration: "r2", Held: 1}, 60, 70, history.Answered, cancelledWith("r2", 1))
	b.add(history.ReadActivity, history.Input{Key: act}, 71, 72, history.Answered, readReserved(2, 2, 2, 4, 0))
	// The deletion returns 2 seats to the public: the head (u1) and then
	// u3's 2? Only 2 free: u1 (1) is seated, u3 (2) does not fit.
	b.add(history.DeleteBlock, deleteBlock("b1"), 80, 90, history.Answered, blockDeleted)
	b.add(history.ReadActivity, history.Input{Key: act}, 91, 92, history.Answered, readReserved(3, 0, 1, 4, 1))
	b.add(history.DeleteBlock, deleteBlock("b1"), 93, 94, history.Answered, history.Output{Status: 404, Code: "not_found"})
	// The code names no live block any more.
	b.add(history.Signup, withCode(2, 1, "x"), 95, 96, history.Answered, history.Output{Status: 400, Code: "invalid_request"})
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
}

func TestBlockFillAndReductionAreChecked(t *testing.T) {
	// Fill: a block registration that keeps fewer seats gives them to its
	// block, not to the party of 1 that waits.
	b := createdGroups(&builder{}, 4, true, "fill")
	b.add(history.CreateBlock, blockOf(3), 2, 3, history.Answered, blockMade("b1", 3))
	b.add(history.Signup, party(0, 1), 10, 20, history.Answered, seated("r0", 1))
	b.add(history.Signup, party(1, 1), 21, 30, history.Answered, waiting("r1", 1, 1))
	b.add(history.Signup, withCode(2, 3, "x"), 31, 40, history.Answered, seated("r2", 3))
	b.add(history.ReduceSeats, history.Input{Key: act, User: 2, Registration: "r2", Seats: 1, Held: 3}, 41, 50, history.Answered,
		reduced("r2", pending, 1))
	ok := b.add(history.ReadActivity, history.Input{Key: act}, 51, 52, history.Answered, readReserved(2, 2, 1, 4, 0))
	require.True(t, Check(ok.h, opts).OK())
	// Had the reduction given them to the public, u1 would be seated.
	b = createdGroups(&builder{}, 4, true, "fill")
	b.add(history.CreateBlock, blockOf(3), 2, 3, history.Answered, blockMade("b1", 3))
	b.add(history.Signup, party(0, 1), 10, 20, history.Answered, seated("r0", 1))
	b.add(history.Signup, party(1, 1), 21, 30, history.Answered, waiting("r1", 1, 1))
	b.add(history.Signup, withCode(2, 3, "x"), 31, 40, history.Answered, seated("r2", 3))
	b.add(history.ReduceSeats, history.Input{Key: act, User: 2, Registration: "r2", Seats: 1, Held: 3}, 41, 50, history.Answered,
		reduced("r2", pending, 1))
	b.add(history.ReadActivity, history.Input{Key: act}, 51, 52, history.Answered, readReserved(3, 0, 0, 4, 0))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result)
}

func TestReservedSeatMisusesAreCaught(t *testing.T) {
	cases := map[string]func(b *builder){
		"a public signup admitted into a reserved seat": func(b *builder) {
			b.add(history.Signup, party(1, 1), 30, 40, history.Answered, seated("r1", 1))
		},
		"a signup with a code seated when the block and the public are full": func(b *builder) {
			b.add(history.Signup, withCode(1, 2, "x"), 30, 40, history.Answered, seated("r1", 2))
			b.add(history.Signup, withCode(2, 1, "x"), 41, 50, history.Answered, seated("r2", 1))
		},
		"a signup with a code refused though its block has room": func(b *builder) {
			b.add(history.Signup, withCode(1, 1, "x"), 30, 40, history.Answered, waiting("r1", 1, 1))
		},
		"a signup with a code the block has no room for refused as unknown": func(b *builder) {
			b.add(history.Signup, withCode(1, 3, "x"), 30, 40, history.Answered, history.Output{Status: 400, Code: "invalid_request"})
		},
		"a block made of seats taken": func(b *builder) {
			b.add(history.CreateBlock, history.Input{Key: act, Seats: 1, Code: "z"}, 30, 40, history.Answered, blockMade("b2", 1))
		},
		"a read that shows reserved seats free": func(b *builder) {
			b.add(history.ReadActivity, history.Input{Key: act}, 30, 40, history.Answered, readReserved(2, 2, 0, 4, 2))
		},
		"a block registration's cancellation that promoted the line": func(b *builder) {
			b.add(history.Signup, withCode(1, 1, "x"), 30, 40, history.Answered, seated("r1", 1))
			b.add(history.Signup, party(2, 1), 41, 50, history.Answered, waiting("r2", 1, 1))
			b.add(history.Cancel, history.Input{Key: act, User: 1, Registration: "r1", Held: 1}, 51, 60, history.Answered, cancelledWith("r1", 1))
			b.add(history.ReadActivity, history.Input{Key: act}, 61, 62, history.Answered, readReserved(3, 1, 0, 4, 0))
		},
		"a deletion that did not promote a fitting waiter": func(b *builder) {
			b.add(history.Signup, party(1, 1), 30, 40, history.Answered, waiting("r1", 1, 1))
			b.add(history.DeleteBlock, deleteBlock("b1"), 41, 50, history.Answered, blockDeleted)
			b.add(history.ReadActivity, history.Input{Key: act}, 51, 60, history.Answered, readReserved(2, 0, 1, 4, 2))
		},
		"a later public signup seated past the line a deletion left waiting": func(b *builder) {
			b.add(history.Signup, party(1, 1), 30, 40, history.Answered, waiting("r1", 1, 1))
			b.add(history.DeleteBlock, deleteBlock("b1"), 41, 50, history.Answered, blockDeleted)
			b.add(history.Signup, party(2, 2), 51, 60, history.Answered, seated("r2", 2))
		},
		"a deleted block serving its code": func(b *builder) {
			b.add(history.DeleteBlock, deleteBlock("b1"), 30, 40, history.Answered, blockDeleted)
			b.add(history.Signup, withCode(1, 1, "x"), 41, 50, history.Answered, seated("r1", 1))
			b.add(history.Signup, party(2, 2), 51, 60, history.Answered, seated("r2", 2))
		},
	}
	for name, add := range cases {
		b := reservedActivity()
		add(b)
		r := Check(b.h, opts)
		require.Equal(t, porcupine.Illegal, r.Authority.Result, "%s: %s", name, r)
	}
}

func TestBlockDeletionRetriedMayFindItGone(t *testing.T) {
	b := reservedActivity()
	// The first attempt got no answer and deleted the block; the retry
	// finds it gone.
	b.attempt(100, history.DeleteBlock, deleteBlock("b1"), 30, 40, history.Unknown, history.Output{Error: "timeout"})
	b.attempt(100, history.DeleteBlock, deleteBlock("b1"), 41, 50, history.Answered, history.Output{Status: 404, Code: "not_found"})
	b.add(history.ReadActivity, history.Input{Key: act}, 51, 60, history.Answered, readReserved(2, 0, 0, 4, 2))
	require.True(t, Check(b.h, opts).OK())
	// Without an earlier attempt, a live block is found.
	b = reservedActivity()
	b.add(history.DeleteBlock, deleteBlock("b1"), 41, 50, history.Answered, history.Output{Status: 404, Code: "not_found"})
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result)
}

func TestBlockCreationOfUnknownOutcome(t *testing.T) {
	// A creation without an answer may have held the seats: the public
	// may be full, or not.
	for _, out := range []history.Output{seated("r1", 2), fullWith(0)} {
		b := createdGroups(&builder{}, 4, false, "strict")
		b.add(history.Signup, party(0, 2), 10, 20, history.Answered, seated("r0", 2))
		b.add(history.CreateBlock, blockOf(2), 21, 30, history.Unknown, history.Output{Error: "timeout"})
		b.add(history.Signup, party(1, 2), 40, 50, history.Answered, out)
		require.True(t, Check(b.h, opts).OK(), "%+v", out)
	}
}

func TestPooledBlocksAreChecked(t *testing.T) {
	// a_1 in a pool of 4 with 5 seats of its own: a block of 2 fits the
	// activity and may find the pool full (a_2 took its seats), or not.
	for _, out := range []history.Output{blockMade("b1", 2), fullWith(1)} {
		b := twoInAPool(4, "strict")
		b.add(history.Signup, partyOn(act2, 0, 3), 10, 20, history.Answered, seated("s0", 3))
		b.add(history.CreateBlock, blockOf(2), 21, 30, history.Answered, out)
		r := Check(b.h, opts)
		require.Equal(t, porcupine.Ok, r.Authority.Result, "%+v: %s", out, r)
	}
	// A block bigger than the activity's own free seats is refused in
	// pools too.
	b := twoInAPool(4, "strict")
	b.add(history.CreateBlock, history.Input{Key: act, Seats: 6, Code: "x"}, 21, 30, history.Answered, blockMade("b1", 6))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result)
	// Its reserved seats are the pool's: a pool read counts them.
	for _, remaining := range []int{2, 4} {
		b := twoInAPool(4, "strict")
		b.add(history.CreateBlock, blockOf(2), 21, 30, history.Answered, blockMade("b1", 2))
		o := poolRead(0, 4)
		o.Reserved, o.Remaining = 2, new(remaining)
		b.add(history.ReadPool, history.Input{Key: pool}, 31, 32, history.Answered, o)
		r := Check(b.h, opts)
		if remaining == 2 {
			require.True(t, r.OK(), "%s", r)
			continue
		}
		require.Contains(t, r.Pools.Violations[0], "remaining 4 with capacity 4, taken 0 and reserved 2")
	}
}

func TestBlockCreationRetriedAfterNoAnswerMayHoldTwoBlocks(t *testing.T) {
	// The chaos workload sends a creation again, as an operation of its
	// own, when one got no answer: the activity may hold two blocks of the
	// code, 1 seat each, and its code may seat two signups; never a third
	// past its capacity.
	retried := func() *builder {
		b := createdGroups(&builder{}, 4, true, "strict")
		b.add(history.CreateBlock, blockOf(1), 2, 3, history.Unknown, history.Output{Error: "timeout"})
		b.add(history.CreateBlock, blockOf(1), 4, 5, history.Answered, blockMade("b1", 1))
		b.add(history.Signup, party(0, 2), 10, 20, history.Answered, seated("r0", 2))
		b.add(history.Signup, withCode(1, 1, "x"), 21, 30, history.Answered, seated("r1", 1))
		return b.add(history.Signup, withCode(2, 1, "x"), 31, 40, history.Answered, seated("r2", 1))
	}
	b := retried()
	b.add(history.ReadActivity, history.Input{Key: act}, 41, 42, history.Answered, readReserved(4, 0, 0, 4, 0))
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)

	b = retried()
	b.add(history.Signup, withCode(3, 1, "x"), 41, 50, history.Answered, seated("r3", 1))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result, "a third seat of a code past the capacity")
}

func TestCodeNoBlockHasIsRefused(t *testing.T) {
	for out, legal := range map[*history.Output]bool{
		{Status: 400, Code: "invalid_request"}: true,
		new(seated("r1", 1)):                   false,
		new(waiting("r1", 1, 1)):               false,
	} {
		b := reservedActivity()
		b.add(history.Signup, withCode(1, 1, "x-wrong"), 30, 40, history.Answered, *out)
		r := Check(b.h, opts)
		require.Equal(t, legal, r.OK(), "%+v: %s", *out, r)
	}
}

// Histories of role blocks: seats of a_1 held for the members of
// "resident", whose tokens' roles hold it.

func roleBlockOf(seats int, role string) history.Input {
	return history.Input{Key: act, Seats: seats, Role: role}
}

// withRoles is user u's signup for seats seats with code ("": none), with
// a token whose roles are roles.
func withRoles(u, seats int, code string, roles ...string) history.Input {
	return history.Input{Key: act, User: u, Seats: seats, Code: code, Roles: roles, IdempotencyKey: "k"}
}

// roleReservedActivity is a_1 of 4 seats, strict, with a block of 2
// seats for role resident and the public's 2 seats taken: u0 holds them.
func roleReservedActivity() *builder {
	b := createdGroups(&builder{}, 4, true, "strict")
	b.add(history.CreateBlock, roleBlockOf(2, "resident"), 2, 3, history.Answered, blockMade("b1", 2))
	b.add(history.Signup, party(0, 2), 10, 20, history.Answered, seated("r0", 2))
	return b
}

func TestRoleBlockHistoryIsLinearizable(t *testing.T) {
	b := roleReservedActivity()
	// The public is full: u1 waits, and so does a token without the role.
	b.add(history.Signup, party(1, 1), 30, 40, history.Answered, waiting("r1", 1, 1))
	b.add(history.Signup, withRoles(2, 1, "", "visitor"), 41, 42, history.Answered, waiting("r2", 1, 2))
	// A resident is seated from the block past the line, beyond the
	// public's free seats; a party the block has no room for is public.
	b.add(history.Signup, withRoles(3, 1, "", "staff", "resident"), 43, 50, history.Answered, seated("r3", 1))
	b.add(history.Signup, withRoles(4, 2, "", "resident"), 51, 52, history.Answered, waiting("r4", 2, 3))
	b.add(history.ReadActivity, history.Input{Key: act}, 53, 54, history.Answered, readReserved(3, 1, 3, 4, 0))
	// The resident's cancellation gives the seat back to the block:
	// nobody is promoted.
	b.add(history.Cancel, history.Input{Key: act, User: 3, Registration: "r3", Held: 1}, 60, 70, history.Answered, cancelledWith("r3", 1))
	b.add(history.ReadActivity, history.Input{Key: act}, 71, 72, history.Answered, readReserved(2, 2, 3, 4, 0))
	// The deletion returns 2 seats to the public: u1 and u2 are seated,
	// u4's party of 2 does not fit.
	b.add(history.DeleteBlock, deleteBlock("b1"), 80, 90, history.Answered, blockDeleted)
	b.add(history.ReadActivity, history.Input{Key: act}, 91, 92, history.Answered, readReserved(4, 0, 1, 4, 0))
	// The role seats no one any more; roles no block has are no
	// refusal.
	b.add(history.Signup, withRoles(3, 1, "", "resident"), 95, 96, history.Answered, waiting("r5", 1, 2))
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
}

func TestRoleBlockMisusesAreCaught(t *testing.T) {
	cases := map[string]func(b *builder){
		"a signup without roles seated in the role's seats": func(b *builder) {
			b.add(history.Signup, withRoles(1, 1, ""), 30, 40, history.Answered, seated("r1", 1))
		},
		"a token of another role seated in the role's seats": func(b *builder) {
			b.add(history.Signup, withRoles(1, 1, "", "visitor", "residents"), 30, 40, history.Answered, seated("r1", 1))
		},
		"a resident waitlisted though the block has room": func(b *builder) {
			b.add(history.Signup, withRoles(1, 1, "", "resident"), 30, 40, history.Answered, waiting("r1", 1, 1))
		},
		"a resident seated when the block and the public are full": func(b *builder) {
			b.add(history.Signup, withRoles(1, 2, "", "resident"), 30, 40, history.Answered, seated("r1", 2))
			b.add(history.Signup, withRoles(2, 1, "", "resident"), 41, 50, history.Answered, seated("r2", 1))
		},
		"a resident refused for a role no code names": func(b *builder) {
			b.add(history.Signup, withRoles(1, 1, "", "resident"), 30, 40, history.Answered, history.Output{Status: 400, Code: "invalid_request"})
		},
		"a resident's code no block has accepted": func(b *builder) {
			b.add(history.Signup, withRoles(1, 1, "x", "resident"), 30, 40, history.Answered, seated("r1", 1))
		},
		"the role's seats given to the public by a read": func(b *builder) {
			b.add(history.ReadActivity, history.Input{Key: act}, 30, 40, history.Answered, readReserved(2, 0, 0, 4, 2))
		},
		"the role's seats given to the public by a cancellation": func(b *builder) {
			b.add(history.Signup, withRoles(1, 1, "", "resident"), 30, 40, history.Answered, seated("r1", 1))
			b.add(history.Signup, party(2, 1), 41, 50, history.Answered, waiting("r2", 1, 1))
			b.add(history.Cancel, history.Input{Key: act, User: 1, Registration: "r1", Held: 1}, 51, 60, history.Answered, cancelledWith("r1", 1))
			b.add(history.ReadActivity, history.Input{Key: act}, 61, 62, history.Answered, readReserved(3, 1, 0, 4, 0))
		},
		"the role's seats given to the public by a seat reduction": func(b *builder) {
			b.add(history.Signup, withRoles(1, 2, "", "resident"), 30, 40, history.Answered, seated("r1", 2))
			b.add(history.Signup, party(2, 1), 41, 50, history.Answered, waiting("r2", 1, 1))
			b.add(history.ReduceSeats, reduce(1, "r1", 1, 2), 51, 60, history.Answered, reduced("r1", pending, 1))
			b.add(history.ReadActivity, history.Input{Key: act}, 61, 62, history.Answered, readReserved(4, 0, 0, 4, 0))
		},
		"a deleted role block serving its role": func(b *builder) {
			b.add(history.DeleteBlock, deleteBlock("b1"), 30, 40, history.Answered, blockDeleted)
			b.add(history.Signup, withRoles(1, 1, "", "resident"), 41, 50, history.Answered, seated("r1", 1))
			b.add(history.Signup, party(2, 2), 51, 60, history.Answered, seated("r2", 2))
		},
	}
	for name, add := range cases {
		b := roleReservedActivity()
		add(b)
		r := Check(b.h, opts)
		require.Equal(t, porcupine.Illegal, r.Authority.Result, "%s: %s", name, r)
	}
}

// codeAndRoleActivity is a_1 of 5 seats, strict, with a block of
// roleSeats seats for role resident (b1), then one of codeSeats for code x
// (b2), and the rest taken by u0.
func codeAndRoleActivity(roleSeats, codeSeats int) *builder {
	b := createdGroups(&builder{}, 5, true, "strict")
	b.add(history.CreateBlock, roleBlockOf(roleSeats, "resident"), 2, 3, history.Answered, blockMade("b1", roleSeats))
	b.add(history.CreateBlock, blockOf(codeSeats), 4, 5, history.Answered, blockMade("b2", codeSeats))
	return b.add(history.Signup, party(0, 5-roleSeats-codeSeats), 10, 20, history.Answered, seated("r0", 5-roleSeats-codeSeats))
}

func TestSignupWithCodeAndRolesTakesTheOldestBlockWithRoom(t *testing.T) {
	// A resident with the code takes the role block's seat, the older:
	// deleting it returns nothing, and the code's seat stays reserved.
	for reserved, legal := range map[int]bool{1: true, 0: false} {
		b := codeAndRoleActivity(1, 1)
		b.add(history.Signup, withRoles(1, 1, "x", "resident"), 30, 40, history.Answered, seated("r1", 1))
		b.add(history.DeleteBlock, deleteBlock("b1"), 41, 50, history.Answered, blockDeleted)
		b.add(history.ReadActivity, history.Input{Key: act}, 51, 52, history.Answered, readReserved(4, reserved, 0, 5, 1-reserved))
		r := Check(b.h, opts)
		require.Equal(t, legal, r.OK(), "reserved %d: %s", reserved, r)
	}
	// A party the role block has no room for takes the code's block.
	for reserved, legal := range map[int]bool{1: true, 0: false} {
		b := codeAndRoleActivity(1, 2)
		b.add(history.Signup, withRoles(1, 2, "x", "resident"), 30, 40, history.Answered, seated("r1", 2))
		b.add(history.DeleteBlock, deleteBlock("b2"), 41, 50, history.Answered, blockDeleted)
		b.add(history.ReadActivity, history.Input{Key: act}, 51, 52, history.Answered, readReserved(4, reserved, 0, 5, 1-reserved))
		r := Check(b.h, opts)
		require.Equal(t, legal, r.OK(), "reserved %d: %s", reserved, r)
	}
	// A wrong code is refused though the role block has room.
	for out, legal := range map[*history.Output]bool{
		{Status: 400, Code: "invalid_request"}: true,
		new(seated("r1", 1)):                   false,
	} {
		b := codeAndRoleActivity(1, 1)
		b.add(history.Signup, withRoles(1, 1, "y", "resident"), 30, 40, history.Answered, *out)
		r := Check(b.h, opts)
		require.Equal(t, legal, r.OK(), "%+v: %s", *out, r)
	}
}

func TestPooledRoleBlocksAreChecked(t *testing.T) {
	// a_1 in a pool of 4 with 5 seats of its own, 2 held for residents:
	// a_2 takes the pool's other 2, and a resident is still seated on
	// a_1.
	pooled := func() *builder {
		b := twoInAPool(4, "strict")
		b.add(history.CreateBlock, roleBlockOf(2, "resident"), 4, 5, history.Answered, blockMade("b1", 2))
		return b.add(history.Signup, partyOn(act2, 0, 2), 10, 20, history.Answered, seated("s0", 2))
	}
	b := pooled()
	b.add(history.Signup, withRoles(1, 2, "", "resident"), 21, 30, history.Answered, seated("r1", 2))
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
	// Another role's party of 3 would need the held seats of the least
	// pool's 4.
	b = pooled()
	b.add(history.Signup, withRoles(1, 3, "", "visitor"), 21, 30, history.Answered, seated("r1", 3))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result, "the public seated in reserved seats")
}

func TestSignupAnswerNamesTheBlockItTookSeatsFrom(t *testing.T) {
	// With a role block (b1) and then a code block (b2), a resident with
	// the code is answered from b1; public seats name no block.
	from := func(o history.Output, block string) history.Output {
		o.Block = block
		return o
	}
	for _, c := range []struct {
		in    history.Input
		out   history.Output
		legal bool
	}{
		{withRoles(1, 1, "x", "resident"), from(seated("r1", 1), "b1"), true},
		{withRoles(1, 1, "x", "resident"), seated("r1", 1), true}, // not recorded
		{withRoles(1, 1, "x", "resident"), from(seated("r1", 1), "b2"), false},
		{withRoles(1, 1, "x"), from(seated("r1", 1), "b2"), true},
		{withRoles(1, 1, "x"), from(seated("r1", 1), "b1"), false},
		{party(1, 1), from(seated("r1", 1), "b1"), false},
	} {
		b := codeAndRoleActivity(1, 1)
		b.add(history.Cancel, history.Input{Key: act, User: 0, Registration: "r0", Held: 3}, 21, 22, history.Answered, cancelledWith("r0", 3))
		b.add(history.Signup, c.in, 30, 40, history.Answered, c.out)
		r := Check(b.h, opts)
		require.Equal(t, c.legal, r.OK(), "%+v → %+v: %s", c.in, c.out, r)
	}
}
