package registration_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

var (
	at  = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	now = at.Add(time.Hour)
)

// state builds an ActivityState of activity "a_x" from its registrations:
// Taken, Waiting and the queue follow from their statuses.
func state(capacity int, waitlist bool, regs ...registration.Registration) registration.ActivityState {
	st := registration.ActivityState{
		Activity:      registration.Activity{ID: "a_x", Capacity: capacity, Waitlist: waitlist, HoldSeconds: 600},
		LastSeq:       40,
		At:            at,
		Registrations: map[string]registration.Registration{},
		Holders:       map[string]string{},
		Outcomes:      map[registration.IdempotencyRef]registration.IdempotentOutcome{},
	}
	for _, r := range regs {
		r.ActivityID = "a_x"
		st.Registrations[r.ID] = r
		switch {
		case r.Status.Occupying():
			st.Activity.Taken++
		case r.Status == registration.Waitlisted:
			st.Activity.Waiting++
			st.Line = append(st.Line, r)
		}
		if r.Status.Active() {
			st.Holders[r.UserID] = r.ID
		}
	}
	return st
}

func reg(id, user string, s registration.Status) registration.Registration {
	r := registration.Registration{ID: id, UserID: user, Status: s, Seats: 1}
	if s == registration.AwaitingPayment {
		due := at.Add(10 * time.Minute)
		r.ExpiresAt = &due
	}
	return r
}

func waiting(id, user string, seq int64) registration.Registration {
	r := reg(id, user, registration.Waitlisted)
	r.WaitlistSeq = seq
	return r
}

func signupCmd(id, user string) registration.SignupCommand {
	return registration.SignupCommand{Origin: registration.Origin{Actor: "user:" + user, RequestID: "req-" + id},
		RegistrationID: id, UserID: user, Metadata: []byte(`{}`)}
}

func cancelCmd(id, user string) registration.CancelCommand {
	c := registration.Caller{UserID: user, RequestID: "req-cancel-" + id}
	return registration.CancelCommand{Origin: registration.Origin{Actor: c.Actor(), RequestID: c.RequestID}, RegistrationID: id, Caller: c}
}

func statusCmd(id string, to registration.Status) registration.StatusCommand {
	return registration.StatusCommand{Origin: registration.Origin{Actor: "admin:root"}, RegistrationID: id, To: to}
}

func decide(t *testing.T, st registration.ActivityState, cmds ...registration.Command) registration.Plan {
	t.Helper()
	p, err := registration.Decide(st, cmds, now)
	require.NoError(t, err)
	require.Len(t, p.Outcomes, len(cmds))
	for i, e := range p.Events {
		require.Equal(t, st.LastSeq+int64(i)+1, e.Seq, "seqs follow the last one with no gap")
		require.Equal(t, registration.EventID("a_x", e.Seq), e.ID)
		require.Equal(t, at, e.At)
	}
	require.Equal(t, st.LastSeq+int64(len(p.Events)), p.LastSeq)
	return p
}

func code(o registration.Outcome) string { return capacityd.ErrorCode(o.Err) }

type eventSummary struct {
	Type  registration.EventType
	Reg   string
	To    registration.Status
	Actor string
}

func summary(evs []registration.Event) []eventSummary {
	out := make([]eventSummary, len(evs))
	for i, e := range evs {
		out[i] = eventSummary{e.Type, e.RegistrationID, e.To, e.Actor}
	}
	return out
}

func TestDecideAdmitsInOrderUpToTheFreeSeats(t *testing.T) {
	t.Parallel()
	st := state(4, false, reg("r0", "holder", registration.Pending), reg("r9", "old", registration.Approved))
	st.Outcomes[registration.IdempotencyRef{UserID: "d", Key: "old"}] = registration.IdempotentOutcome{
		Key: "old", RequestHash: []byte{9}, Outcome: capacityd.EActivityFull, Body: []byte("full")}
	keyed := func(c registration.SignupCommand, key string, hash byte) registration.SignupCommand {
		c.IdempotencyKey, c.RequestHash = key, []byte{hash}
		return c
	}
	p := decide(t, st,
		signupCmd("r1", "holder"),
		signupCmd("r2", "a"),
		signupCmd("r3", "a"),
		keyed(signupCmd("r4", "b"), "k", 1),
		keyed(signupCmd("r5", "b"), "k", 1),
		keyed(signupCmd("r6", "b"), "k", 2),
		signupCmd("r7", "c"),
		keyed(signupCmd("r8", "d"), "old", 9),
	)
	o := p.Outcomes
	require.Equal(t, capacityd.EAlreadyRegistered, code(o[0]))
	require.Equal(t, "r0", o[0].Err.(*capacityd.Error).RegistrationID)
	require.Equal(t, registration.Pending, o[1].Registration.Status)
	require.Equal(t, capacityd.EAlreadyRegistered, code(o[2]), "second signup of a user in one batch")
	require.Equal(t, "r2", o[2].Err.(*capacityd.Error).RegistrationID)
	require.Equal(t, "r4", o[3].Registration.ID)
	require.True(t, o[4].Replayed, "same key, same body: the first use's outcome")
	require.Equal(t, "r4", o[4].Registration.ID)
	require.Equal(t, capacityd.EIdempotencyConflict, code(o[5]))
	require.Equal(t, capacityd.EActivityFull, code(o[6]), "two free seats went to a and b")
	require.True(t, o[7].Replayed)
	require.Equal(t, capacityd.EActivityFull, code(o[7]))

	require.Len(t, p.Inserts, 2)
	require.Empty(t, p.Updates)
	require.Equal(t, 4, p.Activity.Taken)
	require.Len(t, p.Records, 1, "only the first use of a new key is recorded")
	require.Equal(t, registration.OutcomeCreated, p.Records[0].Outcome)
	require.Equal(t, []eventSummary{
		{registration.EventCreated, "r2", registration.Pending, "user:a"},
		{registration.EventCreated, "r4", registration.Pending, "user:b"},
	}, summary(p.Events))
	require.Nil(t, p.Events[0].From, "created has no from")
}

func TestDecideWaitlistsWhenFullAndPromotesOnRelease(t *testing.T) {
	t.Parallel()
	st := state(2, true, reg("r1", "u1", registration.Pending), reg("r2", "u2", registration.Approved),
		waiting("w1", "v1", 10), waiting("w2", "v2", 12))
	p := decide(t, st, signupCmd("n1", "new1"), cancelCmd("r1", "u1"), signupCmd("n2", "new2"))

	o := p.Outcomes
	require.Equal(t, registration.Waitlisted, o[0].Registration.Status)
	require.Equal(t, 3, *o[0].Registration.WaitlistPosition, "behind the two already waiting")
	require.Equal(t, registration.Cancelled, o[1].Registration.Status)
	require.Equal(t, registration.Waitlisted, o[2].Registration.Status, "the freed seat went to the first in line, not to a newcomer")
	require.Equal(t, 3, *o[2].Registration.WaitlistPosition)
	require.Equal(t, []eventSummary{
		{registration.EventWaitlisted, "n1", registration.Waitlisted, "user:new1"},
		{registration.EventCancelled, "r1", registration.Cancelled, "user:u1"},
		{registration.EventPromoted, "w1", registration.Pending, registration.ActorSystem},
		{registration.EventWaitlisted, "n2", registration.Waitlisted, "user:new2"},
	}, summary(p.Events))
	require.Equal(t, "req-cancel-r1", p.Events[2].RequestID, "a promotion carries the request that freed the seat")
	require.Equal(t, registration.Pending, p.Events[2].Registration.Status, "each event carries the registration as it left it")
	require.Equal(t, registration.Waitlisted, p.Events[0].Registration.Status)
	require.Equal(t, registration.Waitlisted, *p.Events[2].From)
	require.Equal(t, 2, p.Activity.Taken)
	require.Equal(t, 3, p.Activity.Waiting, "w2, n1, n2")
	require.Equal(t, int64(41), p.Inserts[0].WaitlistSeq, "the join order is the waitlisted event's seq")
	require.Equal(t, int64(44), p.Inserts[1].WaitlistSeq)
	require.ElementsMatch(t, []string{"r1", "w1"}, []string{p.Updates[0].ID, p.Updates[1].ID})
}

func TestDecideCancelTakesAPlaceOffTheList(t *testing.T) {
	t.Parallel()
	st := state(1, true, reg("r1", "u1", registration.Pending), waiting("w1", "v1", 5), waiting("w2", "v2", 6))
	p := decide(t, st, cancelCmd("w1", "v1"))
	require.Equal(t, registration.Cancelled, p.Outcomes[0].Registration.Status)
	require.Equal(t, 1, p.Activity.Taken)
	require.Equal(t, 1, p.Activity.Waiting)
	require.Len(t, p.Events, 1, "no promotion: no seat was freed")

	// Then a release promotes w2, not the cancelled w1.
	st = state(1, true, reg("r1", "u1", registration.Pending), waiting("w1", "v1", 5), waiting("w2", "v2", 6))
	p = decide(t, st, cancelCmd("w1", "v1"), cancelCmd("r1", "u1"))
	require.Equal(t, eventSummary{registration.EventPromoted, "w2", registration.Pending, registration.ActorSystem}, summary(p.Events)[2])
}

func TestDecideCancelTwiceAndOthersCancels(t *testing.T) {
	t.Parallel()
	st := state(3, false, reg("r1", "u1", registration.Pending), reg("r2", "u2", registration.Expired))
	admin := registration.CancelCommand{RegistrationID: "r1", Caller: registration.Caller{UserID: "root", Admin: true}}
	p := decide(t, st, cancelCmd("r1", "mallory"), admin, cancelCmd("r1", "u1"), cancelCmd("r2", "u2"), cancelCmd("nope", "u1"))
	o := p.Outcomes
	require.Equal(t, capacityd.ENotFound, code(o[0]), "another user's registration reads as not found")
	require.Equal(t, registration.Cancelled, o[1].Registration.Status)
	require.True(t, o[1].Changed)
	require.Equal(t, registration.Cancelled, o[2].Registration.Status, "a second cancel returns it unchanged")
	require.False(t, o[2].Changed)
	require.Equal(t, registration.Expired, o[3].Registration.Status, "an expired registration stays expired")
	require.Equal(t, capacityd.ENotFound, code(o[4]))
	require.Len(t, p.Events, 1, "one change, one event")
	require.Equal(t, 0, p.Activity.Taken)
}

func TestDecideStatusChanges(t *testing.T) {
	t.Parallel()
	st := state(2, false, reg("p", "u1", registration.Pending), reg("w", "u2", registration.AwaitingPayment),
		reg("x", "u3", registration.Expired))
	p := decide(t, st,
		statusCmd("p", registration.AwaitingPayment),
		statusCmd("p", registration.AwaitingPayment),
		statusCmd("w", registration.Approved),
		statusCmd("x", registration.Approved),
		statusCmd("p", registration.Pending),
	)
	o := p.Outcomes
	require.Equal(t, registration.AwaitingPayment, o[0].Registration.Status)
	require.Equal(t, now.Add(600*time.Second).Truncate(time.Microsecond), *o[0].Registration.ExpiresAt, "the hold runs from the service clock")
	require.Equal(t, capacityd.EInvalidTransition, code(o[1]))
	require.Equal(t, registration.Approved, o[2].Registration.Status)
	require.Nil(t, o[2].Registration.ExpiresAt)
	require.Equal(t, capacityd.EActivityFull, code(o[3]), "no seat for the late payment")
	require.Equal(t, capacityd.EInvalidTransition, code(o[4]))
	require.Equal(t, []registration.EventType{registration.EventStatusChanged, registration.EventStatusChanged},
		[]registration.EventType{p.Events[0].Type, p.Events[1].Type})
}

func TestDecideReadmitsOnlyToAFreeSeatNobodyWaitsFor(t *testing.T) {
	t.Parallel()
	p := decide(t, state(2, false, reg("x", "u1", registration.Expired)), statusCmd("x", registration.Approved))
	require.Equal(t, registration.Approved, p.Outcomes[0].Registration.Status)
	require.Equal(t, registration.EventReadmitted, p.Events[0].Type)
	require.Equal(t, 1, p.Activity.Taken)

	p = decide(t, state(2, false, reg("x", "u1", registration.Expired), reg("y", "u1", registration.Pending)),
		statusCmd("x", registration.Approved))
	require.Equal(t, capacityd.EAlreadyRegistered, code(p.Outcomes[0]), "the user signed up again meanwhile")

	p = decide(t, state(1, true, reg("x", "u1", registration.Expired), reg("y", "u2", registration.Pending), waiting("w", "u3", 3)),
		statusCmd("x", registration.Approved))
	require.Equal(t, capacityd.EActivityFull, code(p.Outcomes[0]))

	p = decide(t, state(1, true, reg("w", "u1", registration.Waitlisted)), statusCmd("w", registration.Approved))
	require.Equal(t, capacityd.EInvalidTransition, code(p.Outcomes[0]), "an admin cannot skip the line")
}

func TestDecideExpiresDueHoldsAndPromotes(t *testing.T) {
	t.Parallel()
	due := reg("h", "u1", registration.AwaitingPayment) // due at+10m, before now
	later := reg("l", "u2", registration.AwaitingPayment)
	t2 := now.Add(time.Minute)
	later.ExpiresAt = &t2
	st := state(2, true, due, later, waiting("w", "u3", 7))
	exp := func(id string) registration.ExpireCommand {
		return registration.ExpireCommand{Origin: registration.Origin{Actor: registration.ActorSystem}, RegistrationID: id}
	}
	p := decide(t, st, exp("h"), exp("l"), exp("h"))
	require.True(t, p.Outcomes[0].Changed)
	require.False(t, p.Outcomes[1].Changed, "not due yet")
	require.False(t, p.Outcomes[2].Changed, "expired already")
	require.Equal(t, []eventSummary{
		{registration.EventExpired, "h", registration.Expired, registration.ActorSystem},
		{registration.EventPromoted, "w", registration.Pending, registration.ActorSystem},
	}, summary(p.Events))
	require.Nil(t, p.Updates[0].ExpiresAt, "an expired registration has no deadline")
}

func TestDecideCapacityChanges(t *testing.T) {
	t.Parallel()
	c := func(n int) registration.ActivityCommand {
		return registration.ActivityCommand{Patch: registration.ActivityPatch{Capacity: &n}}
	}
	st := state(2, true, reg("a", "u1", registration.Pending), reg("b", "u2", registration.Pending),
		waiting("w1", "v1", 1), waiting("w2", "v2", 2), waiting("w3", "v3", 3))
	p := decide(t, st, c(1), c(4))
	require.Equal(t, 1, p.Outcomes[0].Activity.Capacity)
	require.Equal(t, 2, p.Outcomes[0].Activity.Taken, "lowering evicts nobody")
	require.Equal(t, 0, p.Outcomes[0].Activity.Remaining)
	require.Equal(t, 4, p.Outcomes[1].Activity.Taken, "raising admits the first in line at once")
	require.Equal(t, 1, p.Outcomes[1].Activity.Waiting)
	require.True(t, p.ActivityChanged)
	require.Equal(t, []string{"w1", "w2"}, []string{p.Events[0].RegistrationID, p.Events[1].RegistrationID})

	off := false
	p = decide(t, st, registration.ActivityCommand{Patch: registration.ActivityPatch{Waitlist: &off}},
		signupCmd("n", "new"), cancelCmd("a", "u1"))
	require.Equal(t, capacityd.EActivityFull, code(p.Outcomes[1]), "a list turned off takes no one new")
	require.Equal(t, "w1", p.Events[1].RegistrationID, "but those waiting are still promoted")
}

// TestDecideMovesUpdatedAtForwardOnEveryChange: a change of the settings
// sets updated_at to the transaction's time to the microsecond, and past
// the last one when that clock reads no later (each change gets its own,
// later updated_at, which the display tier orders changes by).
func TestDecideMovesUpdatedAtForwardOnEveryChange(t *testing.T) {
	t.Parallel()
	five := 5
	change := registration.ActivityCommand{Patch: registration.ActivityPatch{Capacity: &five}}
	st := state(2, false)
	st.At = at.Add(1500 * time.Nanosecond)
	st.Activity.UpdatedAt = at.Add(-time.Minute)
	p := decide(t, st, change)
	require.Equal(t, at.Add(time.Microsecond), p.Activity.UpdatedAt, "the transaction's time, to the microsecond")

	st.Activity.UpdatedAt = at.Add(time.Minute) // a change by a transaction whose clock ran ahead
	p = decide(t, st, change, change)
	require.Equal(t, at.Add(time.Minute+2*time.Microsecond), p.Activity.UpdatedAt)
	require.Equal(t, at.Add(time.Minute+time.Microsecond), p.Outcomes[0].Activity.UpdatedAt)

	st.At = at
	p = decide(t, st, signupCmd("n", "new"))
	require.Equal(t, at.Add(time.Minute), p.Activity.UpdatedAt, "a signup changes no setting")
}

func TestDecidePromotesFromItsOwnBatchWhenTheListWasEmpty(t *testing.T) {
	t.Parallel()
	st := state(1, true, reg("a", "u1", registration.Pending))
	p := decide(t, st, signupCmd("n", "new"), cancelCmd("a", "u1"))
	require.Equal(t, registration.Waitlisted, p.Outcomes[0].Registration.Status, "the outcome is the signup's own")
	require.Len(t, p.Inserts, 1)
	require.Equal(t, registration.Pending, p.Inserts[0].Status, "the row is written as it ends")
	require.Equal(t, registration.Waitlisted, *p.Events[2].From)
	require.Equal(t, 1, p.Activity.Taken)
	require.Equal(t, 0, p.Activity.Waiting)
}

func TestDecideRefusesToPromotePastAShortQueue(t *testing.T) {
	t.Parallel()
	st := state(1, true, reg("a", "u1", registration.Pending), waiting("w1", "v1", 1))
	st.Activity.Waiting = 5 // the store read only the head of a longer list
	n := registration.LineNeeded(st, []registration.Command{cancelCmd("a", "u1")})
	require.Equal(t, 1, n.Head(), "the seat the cancellation of an occupying registration frees")
	st.Line = nil
	_, err := registration.Decide(st, []registration.Command{cancelCmd("a", "u1")}, now)
	require.Error(t, err, "a head shorter than LineNeeded is a bug, not a guess")
}
