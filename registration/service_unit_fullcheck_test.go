package registration

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
)

func TestUnitTheGatesFullIsConfirmedByTheAuthority(t *testing.T) {
	t.Parallel()
	e := newUnitEnv(t, unitOptions{gate: true})
	e.gate.answerAll(ErrGateFull)
	act := e.activity(t, 2, false)

	// The gate's holds may all have leaked: the authority finds the seats
	// free and the signups go on to the queue.
	var ann Registration
	for _, u := range []string{"ann", "bob"} {
		reg, _, err := e.svc.Signup(t.Context(), unitSignup(act, u))
		require.NoError(t, err)
		require.Equal(t, Pending, reg.Status)
		if u == "ann" {
			ann = reg
		}
	}
	require.Equal(t, 2, e.store.Calls(MemCheckFull))
	require.Len(t, e.store.ApplyCalls(), 2)

	// Now Admit refuses on the authority's counts: no change transaction.
	_, _, err := e.svc.Signup(t.Context(), unitSignup(act, "cid"))
	require.True(t, capacityd.IsCode(err, capacityd.EActivityFull), "%v", err)
	// A holder is told which registration it holds, not that it is full.
	_, _, err = e.svc.Signup(t.Context(), unitSignup(act, "ann"))
	require.True(t, capacityd.IsCode(err, capacityd.EAlreadyRegistered), "%v", err)
	var ce *capacityd.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, ann.ID, ce.RegistrationID)
	require.Equal(t, 4, e.store.Calls(MemCheckFull))
	require.Len(t, e.store.ApplyCalls(), 2)

	// With a waiting list, Admit puts the signup in line: it goes on.
	wl := e.activity(t, 0, true)
	reg, _, err := e.svc.Signup(t.Context(), unitSignup(wl, "dan"))
	require.NoError(t, err)
	require.Equal(t, Waitlisted, reg.Status)
	require.Equal(t, 1, *reg.WaitlistPosition)
	require.Equal(t, 5, e.store.Calls(MemCheckFull))
	require.Len(t, e.store.ApplyCalls(), 3)

	// A first use of an idempotency key is refused in the change
	// transaction, where its outcome is recorded, never by the full check.
	in := unitSignup(act, "eve")
	in.IdempotencyKey = "k-eve"
	_, _, err = e.svc.Signup(t.Context(), in)
	require.True(t, capacityd.IsCode(err, capacityd.EActivityFull), "%v", err)
	require.Equal(t, 5, e.store.Calls(MemCheckFull))
	require.Len(t, e.store.ApplyCalls(), 4)
	o, ok, err := e.store.FindOutcome(t.Context(), act, "eve", "k-eve")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, capacityd.EActivityFull, o.Outcome)
}

func TestUnitConcurrentFullChecksOfOneActivityShareOneSnapshot(t *testing.T) {
	t.Parallel()
	e := newUnitEnv(t, unitOptions{gate: true})
	e.gate.answerAll(ErrGateFull)
	act := e.activity(t, 1, false)
	holder, _, err := e.svc.Signup(t.Context(), unitSignup(act, "holder"))
	require.NoError(t, err)

	block := e.store.BlockNext(MemCheckFull)
	first := e.goSignup(t.Context(), act, "u0")
	unitAwait(t, block.Entered(), "the first full check")
	answers := []<-chan unitAnswer{first}
	users := []string{"u1", "u2", "u3", "holder", "u4"}
	for _, u := range users {
		answers = append(answers, e.queueSignup(t, t.Context(), act, u))
	}
	block.Release()
	for _, ch := range answers {
		a := unitAwaitAnswer(t, ch)
		if a.user == "holder" {
			require.True(t, capacityd.IsCode(a.err, capacityd.EAlreadyRegistered), "%v", a.err)
			continue
		}
		require.True(t, capacityd.IsCode(a.err, capacityd.EActivityFull), "%s: %v", a.user, a.err)
	}
	checks := e.store.CheckFullCalls()
	require.Len(t, checks, 3, "the holder's own, the first refusal's, one for the five that queued meanwhile")
	require.Equal(t, []FullCheck{{ActivityID: act, UserIDs: users}}, checks[2])
	require.Len(t, e.store.ApplyCalls(), 1, "refusals never reach a change transaction")

	// The checks of several activities share one snapshot too.
	other := e.activity(t, 3, false)
	verdicts, errs := e.svc.CheckFullBatches(t.Context(), []FullCheck{
		{ActivityID: act, UserIDs: []string{"holder", "x"}},
		{ActivityID: other, UserIDs: []string{"y"}},
	})
	require.Len(t, e.store.CheckFullCalls(), 4)
	for _, es := range errs {
		for _, err := range es {
			require.NoError(t, err)
		}
	}
	require.Equal(t, [][]FullVerdict{
		{{Counts: Counts{Capacity: 1, Taken: 1}, Holder: holder.ID}, {Counts: Counts{Capacity: 1, Taken: 1}}},
		{{Counts: Counts{Capacity: 3}}},
	}, verdicts)
}
