package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/registration"
)

// TestRedeemBatchReadsLargeTablesByIndexWithGenericPlans: a batch of
// scans runs its statements with their generic plans (store.GenericPlans),
// and each of them, a replay's reads included, reads the large tables
// through their indexes, with thousands of activities and a hundred
// thousand registrations; the batch answers as before (an entry, a
// duplicate, a replay of the entry's key).
func TestRedeemBatchReadsLargeTablesByIndexWithGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, rec := largeStore(t)

	a, err := s.CreateActivity(ctx, newID("a"), registration.NewActivity{Title: "door", Capacity: 10, HoldSeconds: 900})
	require.NoError(t, err)
	first, second := signupOf("d1"), signupOf("d2")
	_, err = s.Apply(ctx, []registration.CommandBatch{{ActivityID: a.ID, Commands: []registration.Command{first, second}}}, time.Now())
	require.NoError(t, err)
	l, err := s.CreateCheckinList(ctx, newID("cl"), checkin.NewList{Name: "door", ActivityIDs: []string{a.ID}, Entry: checkin.EntryOnce, DoorRoles: []string{}},
		time.Now())
	require.NoError(t, err)
	door := registration.Origin{Actor: "door"}
	scan := func(reg, key string) checkin.Redemption {
		return checkin.Redemption{ListID: l.ID, RegistrationID: reg, Scan: checkin.Scan{Type: checkin.TypeEntry, Device: "d"},
			Origin: door, IdempotencyKey: key, RequestHash: []byte(reg)}
	}
	out, err := s.RedeemBatch(ctx, l.ID, []checkin.Redemption{scan(first.RegistrationID, "k1"), scan(second.RegistrationID, "k2")}, time.Now())
	require.NoError(t, err)
	for _, o := range out {
		require.NoError(t, o.Err)
		assert.Equal(t, checkin.ResultEntered, o.Result)
	}
	out, err = s.RedeemBatch(ctx, l.ID, []checkin.Redemption{scan(first.RegistrationID, "k1"), scan(second.RegistrationID, "k3")}, time.Now())
	require.NoError(t, err)
	require.NoError(t, out[0].Err)
	assert.True(t, out[0].Replayed, "the same key answers the same check-in")
	assert.Equal(t, first.RegistrationID, out[0].Registration.ID)
	assert.Equal(t, capacityd.EAlreadyCheckedIn, capacityd.ErrorCode(out[1].Err))

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.GreaterOrEqual(t, len(rec.sql), 8, "the batch's reads and writes, and a replay's: %v", rec.sql)
	requireIndexedGenericPlans(t, pool, rec.sql)
}
