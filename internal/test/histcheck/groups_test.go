package histcheck

import (
	"math/rand/v2"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// Histories of groups: registrations of 1 to 4 seats on activities whose
// waiting list is strict or fill.

func createdGroups(b *builder, capacity int, waitlist bool, policy string) *builder {
	return b.add(history.CreateActivity, history.Input{Key: act, Capacity: capacity, Waitlist: waitlist, Users: 5,
		MaxSeats: 4, Policy: policy}, 0, 1, history.Answered, history.Output{Status: 201, Capacity: capacity, Waitlist: waitlist})
}

func party(u, seats int) history.Input {
	return history.Input{Key: act, User: u, Seats: seats, IdempotencyKey: "k"}
}

func seated(id string, seats int) history.Output {
	return history.Output{Status: 201, Registration: id, RegStatus: pending, Seats: seats}
}

func waiting(id string, seats, position int) history.Output {
	return history.Output{Status: 202, Registration: id, RegStatus: waitlisted, Seats: seats, Position: position}
}

func fullWith(remaining int) history.Output {
	return history.Output{Status: 409, Code: "activity_full", Remaining: new(remaining)}
}

func reduce(u int, id string, seats, held int) history.Input {
	return history.Input{Key: act, User: u, Registration: id, Seats: seats, Held: held}
}

func reduced(id, status string, seats int) history.Output {
	return history.Output{Status: 200, Registration: id, RegStatus: status, Seats: seats}
}

func TestStrictGroupsHistoryIsLinearizable(t *testing.T) {
	b := createdGroups(&builder{}, 5, true, "strict")
	b.add(history.Signup, party(0, 3), 10, 20, history.Answered, seated("r0", 3))
	// 2 seats free: the party of 3 waits, and the party of 1 behind it
	// too, since the line is served first.
	b.add(history.Signup, party(1, 3), 30, 40, history.Answered, waiting("r1", 3, 1))
	b.add(history.Signup, party(2, 1), 50, 60, history.Answered, waiting("r2", 1, 2))
	b.add(history.ReadActivity, history.Input{Key: act}, 61, 62, history.Answered, read(3, 2, 5, true))
	// Seats are given back, never added; the same number changes nothing.
	b.add(history.ReduceSeats, reduce(0, "r0", 4, 3), 63, 64, history.Answered, history.Output{Status: 409, Code: "invalid_transition"})
	b.add(history.ReduceSeats, reduce(0, "r0", 3, 3), 65, 66, history.Answered, reduced("r0", pending, 3))
	// u0 keeps 1: 4 seats free, the head (3) and then u2 (1) are seated.
	b.add(history.ReduceSeats, reduce(0, "r0", 1, 3), 70, 80, history.Answered, reduced("r0", pending, 1))
	b.add(history.ReadActivity, history.Input{Key: act}, 90, 100, history.Answered, read(5, 0, 5, true))
	b.add(history.SetStatus, history.Input{Key: act, User: 1, Registration: "r1", To: approved}, 101, 102, history.Answered,
		history.Output{Status: 200, Registration: "r1", RegStatus: approved, Seats: 3})
	b.add(history.Cancel, history.Input{Key: act, User: 2, Registration: "r2", Held: 1}, 103, 104, history.Answered,
		history.Output{Status: 200, Registration: "r2", RegStatus: cancelled, Seats: 1})
	b.add(history.ReduceSeats, reduce(2, "r2", 1, 1), 105, 106, history.Answered, history.Output{Status: 409, Code: "invalid_transition"})
	b.add(history.Signup, party(3, 2), 110, 120, history.Answered, waiting("r3", 2, 1))
	// A capacity raise seats the head once it fits.
	b.add(history.SetCapacity, history.Input{Key: act, Capacity: 5}, 121, 122, history.Answered, read(4, 1, 5, true))
	b.add(history.SetCapacity, history.Input{Key: act, Capacity: 6}, 123, 124, history.Answered, read(6, 0, 6, true))
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
}

func TestFillGroupsHistoryIsLinearizable(t *testing.T) {
	b := createdGroups(&builder{}, 5, true, "fill")
	b.add(history.Signup, party(0, 3), 10, 20, history.Answered, seated("r0", 3))
	b.add(history.Signup, party(1, 3), 30, 40, history.Answered, waiting("r1", 3, 1))
	// Fill: a party that fits is seated though another waits.
	b.add(history.Signup, party(2, 2), 50, 60, history.Answered, seated("r2", 2))
	b.add(history.Signup, party(3, 1), 61, 62, history.Answered, waiting("r3", 1, 2))
	// u2's 2 seats: u1 (3) does not fit and keeps its place, u3 (1) does.
	b.add(history.Cancel, history.Input{Key: act, User: 2, Registration: "r2", Held: 2}, 70, 80, history.Answered,
		history.Output{Status: 200, Registration: "r2", RegStatus: cancelled, Seats: 2})
	b.add(history.ReadActivity, history.Input{Key: act}, 81, 82, history.Answered, read(4, 1, 5, true))
	// A waiting party shrinks and fits: it is answered as the reduction
	// left it, and seated in the same step.
	b.add(history.ReduceSeats, reduce(1, "r1", 1, 3), 90, 100, history.Answered, reduced("r1", waitlisted, 1))
	b.add(history.ReadActivity, history.Input{Key: act}, 101, 102, history.Answered, read(5, 0, 5, true))
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
}

func TestOversoldPartyIsCaught(t *testing.T) {
	for _, policy := range []string{"strict", "fill"} {
		b := createdGroups(&builder{}, 4, false, policy)
		// Two concurrent parties, 3 and 2 seats, both seated on 4.
		b.add(history.Signup, party(0, 3), 10, 30, history.Answered, seated("r0", 3))
		b.add(history.Signup, party(1, 2), 15, 35, history.Answered, seated("r1", 2))
		r := Check(b.h, opts)
		require.Equal(t, porcupine.Illegal, r.Authority.Result, "%s: %s", policy, r)
		require.Contains(t, r.Authority.Witness(act), "signup(u")
	}
	// A party answered 201 takes all its seats: a later read of one seat
	// taken is caught.
	b := createdGroups(&builder{}, 4, false, "strict")
	b.add(history.Signup, party(0, 3), 10, 20, history.Answered, seated("r0", 3))
	b.add(history.ReadActivity, history.Input{Key: act}, 30, 40, history.Answered, read(1, 0, 4, false))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result)
	// And it is answered with them.
	b = createdGroups(&builder{}, 4, false, "strict")
	b.add(history.Signup, party(0, 3), 10, 20, history.Answered, seated("r0", 1))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result)
}

func TestPartyRefusedWhileItFittedIsCaught(t *testing.T) {
	refusal := func(seats int, out history.Output) history.History {
		b := createdGroups(&builder{}, 5, false, "strict")
		b.add(history.Signup, party(0, 3), 10, 20, history.Answered, seated("r0", 3))
		b.add(history.Signup, party(1, seats), 30, 40, history.Answered, out)
		return b.h
	}
	r := Check(refusal(3, fullWith(2)), opts)
	require.True(t, r.OK(), "a party of 3 does not fit in 2 seats: %s", r)
	require.Equal(t, porcupine.Illegal, Check(refusal(2, fullWith(2)), opts).Authority.Result, "a party of 2 fits in 2 seats")
	require.Equal(t, porcupine.Illegal, Check(refusal(3, fullWith(0)), opts).Authority.Result, "2 seats remained, not 0")

	// A refusal is wrong only if the party fitted for the whole request:
	// one overlapping a release may be ordered before it.
	b := createdGroups(&builder{}, 5, false, "fill")
	b.add(history.Signup, party(0, 3), 10, 20, history.Answered, seated("r0", 3))
	b.add(history.ReduceSeats, reduce(0, "r0", 1, 3), 30, 50, history.Answered, reduced("r0", pending, 1))
	b.add(history.Signup, party(1, 3), 40, 60, history.Answered, fullWith(2))
	require.True(t, Check(b.h, opts).OK())
	b.add(history.Signup, party(2, 3), 70, 80, history.Answered, fullWith(4))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result, "4 seats free after the reduction")
}

func TestStrictHeadSkippedIsCaught(t *testing.T) {
	line := func() *builder {
		b := createdGroups(&builder{}, 4, true, "strict")
		b.add(history.Signup, party(0, 3), 10, 20, history.Answered, seated("r0", 3))
		b.add(history.Signup, party(1, 2), 30, 40, history.Answered, waiting("r1", 2, 1))
		return b
	}
	// One seat free, the head asks for 2: the party of 1 behind it waits.
	b := line()
	b.add(history.Signup, party(2, 1), 50, 60, history.Answered, waiting("r2", 1, 2))
	b.add(history.ReadActivity, history.Input{Key: act}, 70, 80, history.Answered, read(3, 2, 4, true))
	require.True(t, Check(b.h, opts).OK())
	b = line()
	b.add(history.Signup, party(2, 1), 50, 60, history.Answered, seated("r2", 1))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result, "seated past the head")

	// A release that does not seat the head seats nobody behind it: u0
	// gives a seat back, 2 are free, the head asks for 3.
	for _, answer := range []history.Output{
		{Status: 409, Code: "invalid_transition"},
		{Status: 200, Registration: "r2", RegStatus: approved, Seats: 1},
	} {
		b = createdGroups(&builder{}, 4, true, "strict")
		b.add(history.Signup, party(0, 3), 10, 20, history.Answered, seated("r0", 3))
		b.add(history.Signup, party(1, 3), 30, 40, history.Answered, waiting("r1", 3, 1))
		b.add(history.Signup, party(2, 1), 50, 60, history.Answered, waiting("r2", 1, 2))
		b.add(history.ReduceSeats, reduce(0, "r0", 2, 3), 61, 62, history.Answered, reduced("r0", pending, 2))
		b.add(history.SetStatus, history.Input{Key: act, User: 2, Registration: "r2", To: approved}, 70, 80, history.Answered, answer)
		r := Check(b.h, opts)
		if answer.Status == 409 {
			require.True(t, r.OK(), "u2 still waits: %s", r)
		} else {
			require.Equal(t, porcupine.Illegal, r.Authority.Result, "u2 promoted past the head")
		}
	}
}

func TestFillPartyLeftWaitingIsCaught(t *testing.T) {
	// u0 gives one seat back: 2 free; the head (3) does not fit, u2 (2)
	// does. Fill seats u2; strict holds the line.
	for _, c := range []struct {
		policy         string
		taken, waiting int
		ok             bool
	}{
		{"fill", 5, 1, true},
		{"fill", 3, 2, false},
		{"strict", 3, 2, true},
		{"strict", 5, 1, false},
	} {
		b := createdGroups(&builder{}, 5, true, c.policy)
		b.add(history.Signup, party(0, 4), 10, 20, history.Answered, seated("r0", 4))
		b.add(history.Signup, party(1, 3), 30, 40, history.Answered, waiting("r1", 3, 1))
		b.add(history.Signup, party(2, 2), 50, 60, history.Answered, waiting("r2", 2, 2))
		b.add(history.ReduceSeats, reduce(0, "r0", 3, 4), 70, 80, history.Answered, reduced("r0", pending, 3))
		b.add(history.ReadActivity, history.Input{Key: act}, 90, 100, history.Answered, read(c.taken, c.waiting, 5, true))
		r := Check(b.h, opts)
		if c.ok {
			require.True(t, r.OK(), "%+v: %s", c, r)
		} else {
			require.Equal(t, porcupine.Illegal, r.Authority.Result, "%+v", c)
		}
	}
	// A fill party that fits at its signup is seated, not waitlisted.
	b := createdGroups(&builder{}, 5, true, "fill")
	b.add(history.Signup, party(0, 3), 10, 20, history.Answered, seated("r0", 3))
	b.add(history.Signup, party(1, 3), 30, 40, history.Answered, waiting("r1", 3, 1))
	b.add(history.Signup, party(2, 1), 50, 60, history.Answered, waiting("r2", 1, 2))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result)
}

func TestDisplayMayLagAPartysReleaseByItsSeats(t *testing.T) {
	seats := func(taken int) history.Output {
		return history.Output{Status: 200, Taken: taken, Capacity: 5, Source: "cache"}
	}
	b := createdGroups(&builder{}, 5, false, "fill")
	b.add(history.Signup, party(0, 3), 10, 20, history.Answered, seated("r0", 3))
	// The party's 3 seats are free at the authority (its read says so
	// while the cancellation is in flight), shown taken until the
	// cancellation's commit reaches the display.
	b.add(history.Cancel, history.Input{Key: act, User: 0, Registration: "r0", Held: 3}, 30, 60, history.Answered,
		history.Output{Status: 200, Registration: "r0", RegStatus: cancelled, Seats: 3})
	b.add(history.ReadActivity, history.Input{Key: act}, 40, 50, history.Answered, read(0, 0, 5, false))
	b.add(history.ReadSeats, history.Input{Key: act}, 55, 58, history.Answered, seats(3))
	require.True(t, Check(b.h, opts).OK())
	b.add(history.ReadSeats, history.Input{Key: act}, 56, 59, history.Answered, seats(4))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Display.Result, "one more than the party's seats")

	// A signup in flight holds its party's seats in the display.
	b = createdGroups(&builder{}, 5, false, "strict")
	b.add(history.Signup, party(0, 3), 10, 40, history.Answered, seated("r0", 3))
	b.add(history.ReadSeats, history.Input{Key: act}, 20, 30, history.Answered, seats(3))
	require.True(t, Check(b.h, opts).OK())
	// A reduction in flight lags by the seats it gives back.
	b.add(history.ReduceSeats, reduce(0, "r0", 1, 3), 50, 80, history.Answered, reduced("r0", pending, 1))
	b.add(history.ReadActivity, history.Input{Key: act}, 60, 70, history.Answered, read(1, 0, 5, false))
	b.add(history.ReadSeats, history.Input{Key: act}, 75, 78, history.Answered, seats(3))
	require.True(t, Check(b.h, opts).OK())
	b.add(history.ReadSeats, history.Input{Key: act}, 76, 79, history.Answered, seats(4))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Display.Result, "more than the seats given back")
	b.h.Ops = b.h.Ops[:len(b.h.Ops)-1]
	b.add(history.ReadSeats, history.Input{Key: act}, 85, 88, history.Answered, seats(2))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Display.Result, "after its commit")
}

// TestEveryStepLeavesTheLineQuiet drives the model through random steps
// of unknown outcome (each takes effect) and requires the quiet
// invariants after each: under strict, anyone waiting means fewer seats
// are free than the head asks for; under fill, every waiting party asks
// for more seats than are free.
func TestEveryStepLeavesTheLineQuiet(t *testing.T) {
	step := stepActivity(false)
	unknown := activityOutput{unknown: true}
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 200 {
		policy := []string{"strict", "fill"}[run%2]
		_, st := step(activityState{}, activityInput{op: history.Op{Kind: history.CreateActivity,
			Input: history.Input{Capacity: 1 + rng.IntN(6), Waitlist: true, Users: 5, MaxSeats: 4, Policy: policy}}}, unknown)
		for range 40 {
			u := rng.IntN(5)
			op := history.Op{Input: history.Input{User: u, Registration: unknownID}}
			switch p := rng.IntN(10); {
			case p < 5:
				op.Kind, op.Input.Seats = history.Signup, 1+rng.IntN(4)
			case p < 7:
				op.Kind = history.Cancel
			case p < 9:
				op.Kind, op.Input.Seats = history.ReduceSeats, 1+rng.IntN(3)
			default:
				op.Kind, op.Input.Capacity = history.SetCapacity, 1+rng.IntN(8)
			}
			ok, next := step(st, activityInput{op: op}, unknown)
			require.True(t, ok)
			st = next
			s := st.(activityState)
			require.True(t, s.quiet(), "%s after %s", describeActivity(s), describeActivityOp(activityInput{op: op}, unknown))
		}
	}
}
