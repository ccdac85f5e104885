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
	"github.com/physiciansnet/capacityd/store"
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

	first, second := signupOf("d1"), signupOf("d2")
	l := doorOf(t, s, first, second)
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

// TestTicketSyncLooksUpEachRecordWithGenericPlans: the ticket sync's
// statements look each registration's record up by its key, with their
// generic plans, even when the check-in tables were empty at their last
// ANALYZE, as they are when a door opens: a plan that reads the list's
// records and joins them by a filter reads all of them for every
// registration of a page. Both pages of a sync run, so that their
// statements are recorded with the settings they run under.
func TestTicketSyncLooksUpEachRecordWithGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, rec := largeStore(t)
	first := signupOf("s1")
	l := doorOf(t, s, first)
	page, err := s.SyncTickets(ctx, l.ID, nil, 10)
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	out, err := s.RedeemBatch(ctx, l.ID, []checkin.Redemption{{ListID: l.ID, RegistrationID: first.RegistrationID,
		Scan: checkin.Scan{Type: checkin.TypeEntry, Device: "d"}, Origin: registration.Origin{Actor: "door"}}}, time.Now())
	require.NoError(t, err)
	require.NoError(t, out[0].Err)
	cursor, err := checkin.DecodeSyncCursor(page.NextCursor)
	require.NoError(t, err)
	page, err = s.SyncTickets(ctx, l.ID, &cursor, 10)
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	assert.True(t, page.Items[0].Inside, "the entry, in the changes")

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, q := range store.SyncSQL {
		require.True(t, rec.sql[q], "the sync ran with its generic plans: %s", q)
	}
	plans := requireIndexedGenericPlans(t, pool, rec.sql)
	for _, q := range store.SyncSQL {
		found := 0
		for _, sc := range scans(plans[q]) {
			if sc.RelationName == "checkin_record" {
				found++
				assert.Contains(t, sc.IndexCond, "registration_id = r.id", "each registration's record by its key:\n%s", q)
			}
		}
		require.Equal(t, 1, found, "the statement reads the records once:\n%s", q)
	}
}

// doorOf returns a once-only list of a new activity of 10 seats that the
// signups hold seats of.
func doorOf(t *testing.T, s *store.Store, signups ...registration.SignupCommand) checkin.List {
	t.Helper()
	ctx := context.Background()
	a, err := s.CreateActivity(ctx, newID("a"), registration.NewActivity{Title: "door", Capacity: 10, HoldSeconds: 900})
	require.NoError(t, err)
	cmds := make([]registration.Command, len(signups))
	for i, c := range signups {
		cmds[i] = c
	}
	_, err = s.Apply(ctx, []registration.CommandBatch{{ActivityID: a.ID, Commands: cmds}}, time.Now())
	require.NoError(t, err)
	l, err := s.CreateCheckinList(ctx, newID("cl"), checkin.NewList{Name: "door", ActivityIDs: []string{a.ID}, Entry: checkin.EntryOnce, DoorRoles: []string{}},
		time.Now())
	require.NoError(t, err)
	return l
}
