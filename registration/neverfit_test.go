package registration_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// TestAdmitRefusesAPartyNoCapacityCanHold: a signup for more seats than
// the activity or one of its pools can ever hold is refused as full,
// waiting list or not, under either policy; a capacity of 0 holds no seats
// yet and puts everyone on the list.
func TestAdmitRefusesAPartyNoCapacityCanHold(t *testing.T) {
	t.Parallel()
	seat, line, full := registration.AdmitSeat, registration.AdmitWaitlist, registration.AdmitFull
	pool := func(c registration.Counts, capacity, taken int) registration.Counts {
		return c.Within(registration.Room{Pool: "p_1", Capacity: capacity, Taken: taken})
	}
	for _, c := range []struct {
		name string
		in   registration.Counts
		want registration.Admission
	}{
		{"larger than the capacity, list kept", registration.Counts{Capacity: 3, Waitlist: true, Seats: 10}, full},
		{"larger than the capacity, fill", registration.Counts{Capacity: 3, Waitlist: true, Fill: true, Seats: 4}, full},
		{"all the capacity, list kept", registration.Counts{Capacity: 3, Taken: 1, Waitlist: true, Seats: 3}, line},
		{"all the capacity, free", registration.Counts{Capacity: 3, Waitlist: true, Seats: 3}, seat},
		{"capacity 0 holds no seats yet", registration.Counts{Waitlist: true, Seats: 4}, line},
		{"larger than a pool", pool(registration.Counts{Capacity: 10, Waitlist: true, Seats: 5}, 4, 0), full},
		{"the pool's size, pool busy", pool(registration.Counts{Capacity: 10, Waitlist: true, Seats: 4}, 4, 1), line},
		{"a pool of 0 holds no seats yet", pool(registration.Counts{Capacity: 10, Waitlist: true, Seats: 4}, 0, 0), line},
	} {
		require.Equal(t, c.want, registration.Admit(c.in), c.name)
	}
}

// TestDecideRefusesAPartyThatCouldHoldTheStrictLine: capacity 3 and
// max_seats_per_registration 10: a party of 10 is refused as full with
// the seats left, not waitlisted, and a signup of 1 after it takes a seat.
func TestDecideRefusesAPartyThatCouldHoldTheStrictLine(t *testing.T) {
	t.Parallel()
	st := state(3, true)
	st.Activity.MaxSeats = 10
	big := signupCmd("big", "u1")
	big.Seats = 10
	p := decide(t, st, big, signupCmd("one", "u2"))
	require.Equal(t, capacityd.EActivityFull, code(p.Outcomes[0]))
	var e *capacityd.Error
	require.ErrorAs(t, p.Outcomes[0].Err, &e)
	require.Equal(t, 3, *e.Remaining)
	require.Equal(t, "activity a_x holds no more than 3 seats: 10 can never fit", e.Message)
	require.Equal(t, registration.Pending, p.Outcomes[1].Registration.Status)
	require.Equal(t, 0, p.Activity.Waiting)
}

// TestDecideKeepsAWaitingPartyALoweredCapacityCannotHold: lowering a
// capacity below the party at the head of a strict line cancels nobody:
// the party keeps its place and holds the line, and is served once a
// capacity raise holds it.
func TestDecideKeepsAWaitingPartyALoweredCapacityCannotHold(t *testing.T) {
	t.Parallel()
	big := waiting("w_big", "v1", 1)
	big.Seats = 4
	st := state(4, true, reg("a", "u1", registration.Pending), reg("b", "u2", registration.Pending),
		reg("c", "u3", registration.Pending), reg("d", "u4", registration.Pending), big, waiting("w2", "v2", 2))
	st.Activity.Taken = 4
	two := 2
	lower := registration.ActivityCommand{Patch: registration.ActivityPatch{Capacity: &two}}
	p := decide(t, st, lower, cancelCmd("a", "u1"), cancelCmd("b", "u2"), cancelCmd("c", "u3"))
	require.Len(t, p.Events, 3, "three cancellations; the party of 4 holds the line")
	require.Equal(t, 2, p.Activity.Waiting, "nobody is cancelled")

	st = state(2, true, reg("d", "u4", registration.Pending), big)
	four := 4
	p = decide(t, st, registration.ActivityCommand{Patch: registration.ActivityPatch{Capacity: &four}}, cancelCmd("d", "u4"))
	require.Equal(t, registration.EventPromoted, p.Events[len(p.Events)-1].Type)
	require.Equal(t, "w_big", p.Events[len(p.Events)-1].RegistrationID, "served once the capacity holds it")
}

// TestDecideAllRefusesAJoinThatOverfillsAPool: an activity whose taken
// seats do not fit in a pool's seats left cannot join it (activity_full,
// naming the pool); one that fits joins.
func TestDecideAllRefusesAJoinThatOverfillsAPool(t *testing.T) {
	t.Parallel()
	pools := []registration.PoolState{{Pool: registration.Pool{ID: "p_1", Capacity: 10, Taken: 8}}}
	st := state(10, true)
	st.Activity.Taken = 6
	join := registration.ActivityCommand{Patch: registration.ActivityPatch{Pools: &[]string{"p_1"}}}
	plans, _, err := registration.DecideAll(registration.Change{Activities: []registration.ActivityState{st},
		Commands: [][]registration.Command{{join}}, Pools: pools, At: at}, now)
	require.NoError(t, err)
	var e *capacityd.Error
	require.ErrorAs(t, plans[0].Outcomes[0].Err, &e)
	require.Equal(t, capacityd.EActivityFull, e.Code)
	require.Equal(t, 2, *e.Remaining)
	require.Equal(t, "pool p_1 has 2 seats left: activity a_x, with 6 seats taken or reserved, cannot join it", e.Message)

	st.Activity.Taken = 2
	plans, poolPlans, err := registration.DecideAll(registration.Change{Activities: []registration.ActivityState{st},
		Commands: [][]registration.Command{{join}}, Pools: pools, At: at}, now)
	require.NoError(t, err)
	require.NoError(t, plans[0].Outcomes[0].Err)
	require.Equal(t, 10, poolPlans[0].Pool.Taken)
}

// TestActivityFullSaysWhatIsFull: the refusal names the pool when a pool
// has fewer seats left than the activity, and counts seats in good
// grammar.
func TestActivityFullSaysWhatIsFull(t *testing.T) {
	t.Parallel()
	msg := func(c registration.Counts) string {
		var e *capacityd.Error
		require.ErrorAs(t, registration.ActivityFull("a_x", c), &e)
		return e.Message
	}
	own := registration.Counts{Capacity: 5, Taken: 3, Seats: 3}
	require.Equal(t, "activity a_x has only 2 of the 3 seats asked left", msg(own))
	require.Equal(t, "activity a_x has no seats left", msg(registration.Counts{Capacity: 5, Taken: 5, Seats: 1}))
	pooled := own.Within(registration.Room{Pool: "p_hall", Capacity: 8, Taken: 7})
	require.Equal(t, "pool p_hall of activity a_x has only 1 of the 3 seats asked left", msg(pooled))
	require.Equal(t, "pool p_hall of activity a_x has no seats left",
		msg(own.Within(registration.Room{Pool: "p_hall", Capacity: 8, Taken: 8})))
	require.Equal(t, "pool p_small of activity a_x holds no more than 1 seat: 3 can never fit",
		msg(own.Within(registration.Room{Pool: "p_small", Capacity: 1})))
	require.Equal(t, "registration r_1 holds 1 seat: seats can only be given back, not added (asked for 2)",
		registration.SeatsNotReducible(registration.Registration{ID: "r_1", Seats: 1, Status: registration.Pending}, 2).(*capacityd.Error).Message)
}
