package registration_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

func TestDecideAdmitsInOrderUpToTheFreeSeats(t *testing.T) {
	t.Parallel()
	reqs := []registration.AdmissionRequest{
		{RegistrationID: "r1", UserID: "holder"},
		{RegistrationID: "r2", UserID: "a"},
		{RegistrationID: "r3", UserID: "a"},
		{RegistrationID: "r4", UserID: "b", IdempotencyKey: "k", RequestHash: []byte{1}},
		{RegistrationID: "r5", UserID: "b", IdempotencyKey: "k", RequestHash: []byte{1}},
		{RegistrationID: "r6", UserID: "b", IdempotencyKey: "k", RequestHash: []byte{2}},
		{RegistrationID: "r7", UserID: "c"},
		{RegistrationID: "r8", UserID: "d", IdempotencyKey: "old", RequestHash: []byte{9}},
	}
	st := registration.AdmissionState{
		Capacity: 4, Taken: 2,
		Holders: map[string]string{"holder": "r0"},
		Outcomes: map[registration.IdempotencyRef]registration.IdempotentOutcome{
			{UserID: "d", Key: "old"}: {Key: "old", RequestHash: []byte{9}, Outcome: capacityd.EActivityFull, Body: []byte("full")},
		},
	}
	ds := registration.Decide("a_x", st, reqs)

	code := func(i int) string { return capacityd.ErrorCode(ds[i].Result.Err) }
	require.Equal(t, capacityd.EAlreadyRegistered, code(0))
	require.True(t, ds[1].Admit)
	require.Equal(t, capacityd.EAlreadyRegistered, code(2), "second signup of a user in one batch")
	require.True(t, ds[3].Admit)
	require.True(t, ds[3].Record)
	require.Equal(t, 3, ds[4].SameAs, "same key, same body: replays the first use")
	require.Equal(t, capacityd.EIdempotencyConflict, code(5))
	require.False(t, ds[6].Admit)
	require.Equal(t, capacityd.EActivityFull, code(6), "two free seats went to a and b")
	require.True(t, ds[7].Result.Replayed)
	require.Equal(t, capacityd.EActivityFull, code(7))
}
