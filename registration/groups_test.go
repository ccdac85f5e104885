package registration_test

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// world is one activity whose whole state Decide is given, command after
// command, as the store would read it.
type world struct {
	t    *testing.T
	act  registration.Activity
	regs map[string]registration.Registration
	seq  int64
}

func newWorld(t *testing.T, capacity int, policy registration.WaitlistPolicy) *world {
	return &world{t: t, regs: map[string]registration.Registration{}, act: registration.Activity{
		ID: "a_x", Capacity: capacity, Waitlist: true, HoldSeconds: 600, MaxSeats: 10, Policy: policy,
	}}
}

// state is the whole state of the activity: every registration named, the
// whole waiting list read.
func (w *world) state() registration.ActivityState {
	st := registration.ActivityState{
		Activity: w.act, LastSeq: w.seq, At: at,
		Registrations: map[string]registration.Registration{},
		Holders:       map[string]string{},
		Outcomes:      map[registration.IdempotencyRef]registration.IdempotentOutcome{},
	}
	st.Activity.Taken, st.Activity.Waiting = 0, 0
	for id, r := range w.regs {
		st.Registrations[id] = r
		switch {
		case r.Status.Occupying():
			st.Activity.Taken += r.Seats
		case r.Status == registration.Waitlisted:
			st.Activity.Waiting++
			st.Line = append(st.Line, r)
		}
		if r.Status.Active() {
			st.Holders[r.UserID] = id
		}
	}
	slices.SortFunc(st.Line, func(a, b registration.Registration) int { return cmp.Compare(a.WaitlistSeq, b.WaitlistSeq) })
	return st
}

// do decides the commands on the whole state and keeps the plan's rows.
func (w *world) do(cmds ...registration.Command) registration.Plan {
	w.t.Helper()
	p := decide(w.t, w.state(), cmds...)
	for _, r := range append(p.Inserts, p.Updates...) {
		w.regs[r.ID] = r
	}
	w.act, w.seq = p.Activity, p.LastSeq
	w.check()
	return p
}

// check asserts the policy's invariant of a quiet activity: under strict,
// anyone waiting means the head does not fit; under fill, nobody waiting
// fits.
func (w *world) check() {
	w.t.Helper()
	st := w.state()
	free := st.Activity.Capacity - st.Activity.Taken
	require.Equal(w.t, free, w.act.Capacity-w.act.Taken, "the plan's taken is the rows' seats")
	for k, r := range st.Line {
		if w.act.Policy == registration.PolicyStrict && k > 0 {
			break
		}
		require.Greater(w.t, r.Seats, free, "%s waits for %d seats with %d free (%s)", r.ID, r.Seats, free, w.act.Policy)
	}
}

func (w *world) status(id string) (registration.Status, int) {
	r := w.regs[id]
	return r.Status, r.Seats
}

// position is a waiting registration's place in line.
func (w *world) position(id string) int {
	for k, r := range w.state().Line {
		if r.ID == id {
			return k + 1
		}
	}
	return 0
}

func groupSignup(id, user string, seats int) registration.SignupCommand {
	c := signupCmd(id, user)
	c.Seats = seats
	return c
}

func seatsCmd(id, user string, seats int) registration.SeatsCommand {
	c := registration.Caller{UserID: user}
	return registration.SeatsCommand{Origin: registration.Origin{Actor: c.Actor()}, RegistrationID: id, Caller: c, Seats: seats}
}

// groupsScenario: capacity 5 held by A(3) and B(2), C(3) then D(1)
// waiting.
func groupsScenario(t *testing.T, policy registration.WaitlistPolicy) *world {
	w := newWorld(t, 5, policy)
	p := w.do(groupSignup("A", "a", 3), groupSignup("B", "b", 2), groupSignup("C", "c", 3), groupSignup("D", "d", 1))
	for i, want := range []registration.Status{registration.Pending, registration.Pending, registration.Waitlisted, registration.Waitlisted} {
		require.NoError(t, p.Outcomes[i].Err)
		require.Equal(t, want, p.Outcomes[i].Registration.Status, "signup %d", i)
	}
	require.Equal(t, 5, w.act.Taken)
	return w
}

func TestDecideGroupsStrictHeadHoldsTheLine(t *testing.T) {
	t.Parallel()
	w := groupsScenario(t, registration.PolicyStrict)

	p := w.do(seatsCmd("B", "b", 1))
	require.Equal(t, []eventSummary{{registration.EventSeatsChanged, "B", registration.Pending, "user:b"}}, summary(p.Events),
		"one seat back, and nobody promoted: the head (3) does not fit in 1")
	require.Equal(t, 2, *p.Events[0].SeatsFrom)
	require.Equal(t, 1, p.Events[0].Seats)
	require.Equal(t, 4, w.act.Taken)

	p = w.do(groupSignup("E", "e", 1))
	require.Equal(t, registration.Waitlisted, p.Outcomes[0].Registration.Status, "a newcomer of 1 waits behind the line")
	require.Equal(t, 3, *p.Outcomes[0].Registration.WaitlistPosition)

	p = w.do(cancelCmd("A", "a"))
	require.Equal(t, []eventSummary{
		{registration.EventCancelled, "A", registration.Cancelled, "user:a"},
		{registration.EventPromoted, "C", registration.Pending, registration.ActorSystem},
		{registration.EventPromoted, "D", registration.Pending, registration.ActorSystem},
	}, summary(p.Events), "C then D are promoted")
	require.Equal(t, 5, w.act.Taken)
	require.Equal(t, 1, w.position("E"))
}

func TestDecideGroupsFillPromotesWhoeverFits(t *testing.T) {
	t.Parallel()
	w := groupsScenario(t, registration.PolicyFill)

	p := w.do(seatsCmd("B", "b", 1))
	require.Equal(t, []eventSummary{
		{registration.EventSeatsChanged, "B", registration.Pending, "user:b"},
		{registration.EventPromoted, "D", registration.Pending, registration.ActorSystem},
	}, summary(p.Events), "D (1) takes the freed seat at once")
	require.Equal(t, 1, w.position("C"), "C keeps its place")

	p = w.do(groupSignup("E", "e", 1))
	require.Equal(t, registration.Waitlisted, p.Outcomes[0].Registration.Status, "no seat is free")
	require.Equal(t, 2, *p.Outcomes[0].Registration.WaitlistPosition)

	p = w.do(cancelCmd("A", "a"))
	require.Equal(t, []eventSummary{
		{registration.EventCancelled, "A", registration.Cancelled, "user:a"},
		{registration.EventPromoted, "C", registration.Pending, registration.ActorSystem},
	}, summary(p.Events), "C (3) fits in the 3 seats A freed; E (1) has none left")
	require.Equal(t, 5, w.act.Taken)
}

func TestDecideGroupsFillNewcomerTakesWhatTheLineCannotUse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy registration.WaitlistPolicy
		want   registration.Status
	}{{registration.PolicyFill, registration.Pending}, {registration.PolicyStrict, registration.Waitlisted}} {
		w := newWorld(t, 4, tc.policy)
		w.do(groupSignup("A", "a", 3), groupSignup("C", "c", 3))
		p := w.do(groupSignup("N", "n", 1))
		require.Equal(t, tc.want, p.Outcomes[0].Registration.Status, "%s: a party of 1 and a free seat a waiting 3 cannot use", tc.policy)
	}
}

func TestDecideGroupsWaitingPartyShrinksAndThenFits(t *testing.T) {
	t.Parallel()
	for _, policy := range []registration.WaitlistPolicy{registration.PolicyStrict, registration.PolicyFill} {
		w := newWorld(t, 5, policy)
		w.do(groupSignup("A", "a", 4), groupSignup("C", "c", 3))
		require.Equal(t, 1, w.position("C"))
		p := w.do(seatsCmd("C", "c", 2))
		require.Equal(t, []eventSummary{{registration.EventSeatsChanged, "C", registration.Waitlisted, "user:c"}}, summary(p.Events),
			"%s: 2 still do not fit in 1", policy)
		require.Equal(t, 1, w.position("C"), "a waiting party keeps its place when it shrinks")
		p = w.do(seatsCmd("C", "c", 1))
		require.Equal(t, []eventSummary{
			{registration.EventSeatsChanged, "C", registration.Waitlisted, "user:c"},
			{registration.EventPromoted, "C", registration.Pending, registration.ActorSystem},
		}, summary(p.Events), "%s: 1 fits", policy)
		require.Equal(t, registration.Pending, p.Outcomes[0].Registration.Status, "the answer is the registration as the change left it")
		st, seats := w.status("C")
		require.Equal(t, registration.Pending, st)
		require.Equal(t, 1, seats)
		require.Equal(t, 5, w.act.Taken)
	}
}

func TestDecideGroupsAllOrNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 5, registration.PolicyStrict)
	w.act.Waitlist = false
	w.do(groupSignup("A", "a", 3))
	p := w.do(groupSignup("B", "b", 3), groupSignup("C", "c", 11), groupSignup("D", "d", 2))
	require.Equal(t, capacityd.EActivityFull, code(p.Outcomes[0]), "3 do not fit in 2: none are given")
	e := p.Outcomes[0].Err.(*capacityd.Error)
	require.NotNil(t, e.Remaining)
	require.Equal(t, 2, *e.Remaining)
	require.Equal(t, capacityd.EInvalid, code(p.Outcomes[1]), "more than max_seats_per_registration")
	require.Equal(t, registration.Pending, p.Outcomes[2].Registration.Status, "2 fit")
	require.Equal(t, 2, p.Outcomes[2].Registration.Seats)
	require.Equal(t, 5, w.act.Taken)
	require.Len(t, p.Inserts, 1, "never a partial row")
}

func TestDecideGroupsSeatChangesAreOnlyReductions(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 5, registration.PolicyStrict)
	w.do(groupSignup("A", "a", 3))
	p := w.do(seatsCmd("A", "a", 3), seatsCmd("A", "a", 4), seatsCmd("A", "other", 1), seatsCmd("A", "a", 0))
	require.NoError(t, p.Outcomes[0].Err)
	require.False(t, p.Outcomes[0].Changed, "the same number is a no-op")
	require.Equal(t, capacityd.EInvalidTransition, code(p.Outcomes[1]), "more seats are never given")
	require.Equal(t, capacityd.ENotFound, code(p.Outcomes[2]), "only the owner or an admin")
	require.Equal(t, capacityd.EInvalidTransition, code(p.Outcomes[3]))
	require.Empty(t, p.Events)

	w.do(cancelCmd("A", "a"))
	p = w.do(seatsCmd("A", "a", 1))
	require.Equal(t, capacityd.EInvalidTransition, code(p.Outcomes[0]), "a cancelled registration's seats cannot change")
}

func TestDecideGroupsReleasesFreeAllSeats(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 6, registration.PolicyStrict)
	w.do(groupSignup("A", "a", 4), groupSignup("B", "b", 2), groupSignup("C", "c", 4))
	w.do(statusCmd("A", registration.AwaitingPayment))
	st := w.state()
	p := decide(t, st, registration.ExpireCommand{RegistrationID: "A"})
	require.Empty(t, p.Events, "not due yet")
	p, err := registration.Decide(st, []registration.Command{registration.ExpireCommand{RegistrationID: "A"}}, now.Add(11*time.Minute))
	require.NoError(t, err)
	require.Equal(t, []eventSummary{
		{registration.EventExpired, "A", registration.Expired, ""},
		{registration.EventPromoted, "C", registration.Pending, registration.ActorSystem},
	}, summary(p.Events), "an expiry frees all 4 seats")
	require.Equal(t, 6, p.Activity.Taken)
}

// TestDecideGroupsNeedsOnlyWhatTheStoreReads: Decide on the part of the
// waiting list the store reads (LineNeeded: the head under strict, the
// first parties of each size under fill) makes the same plan as on the
// whole list, over random histories of both policies.
func TestDecideGroupsNeedsOnlyWhatTheStoreReads(t *testing.T) {
	t.Parallel()
	for run := range 1000 {
		rng := rand.New(rand.NewPCG(uint64(run), 7))
		policy := registration.PolicyStrict
		if run%2 == 1 {
			policy = registration.PolicyFill
		}
		w := newWorld(t, 4+rng.IntN(12), policy)
		users := 0
		for step := range 12 {
			var cmds []registration.Command
			for range 1 + rng.IntN(5) {
				ids := slices.Sorted(maps.Keys(w.regs))
				switch k := rng.IntN(10); {
				case k < 5 || len(ids) == 0:
					users++
					cmds = append(cmds, groupSignup(fmt.Sprintf("r%03d", users), fmt.Sprintf("u%03d", users), 1+rng.IntN(4)))
				case k < 7:
					id := ids[rng.IntN(len(ids))]
					cmds = append(cmds, cancelCmd(id, w.regs[id].UserID))
				case k < 9:
					id := ids[rng.IntN(len(ids))]
					cmds = append(cmds, seatsCmd(id, w.regs[id].UserID, 1+rng.IntN(max(w.regs[id].Seats, 1))))
				default:
					c := w.act.Capacity + rng.IntN(7) - 3
					p := registration.ActivityPatch{Capacity: &c}
					if rng.IntN(3) == 0 {
						other := registration.PolicyFill
						if w.act.Policy == registration.PolicyFill {
							other = registration.PolicyStrict
						}
						p.Policy = &other
					}
					cmds = append(cmds, registration.ActivityCommand{Patch: p})
				}
			}
			full := w.state()
			partial := full
			need := registration.LineNeeded(full, cmds)
			partial.Line = readAsTheStore(full.Line, need)
			want, err := registration.Decide(full, cmds, now)
			require.NoError(t, err)
			got, err := registration.Decide(partial, cmds, now)
			require.NoError(t, err, "run %d step %d: %+v", run, step, need)
			require.Equal(t, summary(want.Events), summary(got.Events), "run %d step %d (%s, need %+v)", run, step, policy, need)
			require.Equal(t, want.Activity, got.Activity)
			w.do(cmds...)
		}
	}
}

// readAsTheStore is the part of a waiting list (in join order) the store
// reads for need.
func readAsTheStore(line []registration.Registration, need registration.LineNeed) []registration.Registration {
	var out []registration.Registration
	if need.None() {
		return nil
	}
	taken := map[int]int{}
	for k, r := range line {
		switch {
		case need.Strict && k < need.Head():
			taken[r.Seats]++
			out = append(out, r)
		case need.Fill && taken[r.Seats] < need.BySize(r.Seats):
			taken[r.Seats]++
			out = append(out, r)
		}
	}
	return out
}
