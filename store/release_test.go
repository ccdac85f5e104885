package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

// confirmActivities creates n activities of 3 seats whose confirm_by is
// an hour on, each with two signups of which the first confirms, and
// returns them with each one's unconfirmed registration.
func confirmActivities(t *testing.T, s *store.Store, n int) ([]string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	by := time.Now().Add(time.Hour).UTC()
	acts := make([]string, n)
	unconfirmed := map[string]string{}
	for i := range acts {
		a, err := s.CreateActivity(ctx, newID("a"), registration.NewActivity{Title: fmt.Sprint("confirm ", i), Capacity: 3, HoldSeconds: 900,
			Waitlist: true, Schedule: registration.Schedule{ConfirmBy: &by}})
		require.NoError(t, err)
		acts[i] = a.ID
		sure, unsure := signupOf(fmt.Sprint("sure", i)), signupOf(fmt.Sprint("unsure", i))
		confirm := registration.ConfirmCommand{Origin: registration.Origin{Actor: "admin:o"}, RegistrationID: sure.RegistrationID,
			Caller: registration.Caller{UserID: "o", Admin: true}}
		applied, err := s.Apply(ctx, []registration.CommandBatch{{ActivityID: a.ID, Commands: []registration.Command{sure, unsure, confirm}}}, time.Now())
		require.NoError(t, err)
		require.NoError(t, applied[0].Err)
		for _, o := range applied[0].Plan.Outcomes {
			require.NoError(t, o.Err)
		}
		unconfirmed[a.ID] = unsure.RegistrationID
	}
	return acts, unconfirmed
}

// TestClaimDueReleasesOnceAcrossStores: two stores (as two instances)
// claiming the due releases at once share them out, each activity to one
// of them with the registrations the rule releases; a claimed activity is
// not claimed again while its lease holds, is claimed again once it has
// lapsed unless its release was recorded done, and never after.
func TestClaimDueReleasesOnceAcrossStores(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabase(t)
	pool := testenv.Pool(t, url, 8)
	stores := []*store.Store{store.New(pool), store.New(testenv.Pool(t, url, 8))}
	acts, unconfirmed := confirmActivities(t, stores[0], 30)
	ctx := context.Background()
	later := time.Now().Add(2 * time.Hour)

	none, err := stores[0].ClaimDueReleases(ctx, time.Now(), 20)
	require.NoError(t, err)
	assert.Empty(t, none, "nothing is due before confirm_by")

	claims := make([][]registration.DueRelease, len(stores))
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() {
			var err error
			claims[i], err = s.ClaimDueReleases(ctx, later, 20)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	claimed := map[string]int{}
	for _, c := range claims {
		assert.LessOrEqual(t, len(c), 20)
		for _, d := range c {
			claimed[d.ActivityID]++
			assert.Equal(t, registration.CancelUnconfirmed, d.Reason)
			assert.Equal(t, []string{unconfirmed[d.ActivityID]}, d.RegistrationIDs, "the unconfirmed alone")
		}
	}
	// Whatever the two claims took between them, one more takes the rest.
	rest, err := stores[0].ClaimDueReleases(ctx, later, 20)
	require.NoError(t, err)
	for _, d := range rest {
		claimed[d.ActivityID]++
	}
	require.Len(t, claimed, len(acts))
	for id, n := range claimed {
		assert.Equal(t, 1, n, "activity %s claimed once", id)
	}
	again, err := stores[1].ClaimDueReleases(ctx, later, 20)
	require.NoError(t, err)
	assert.Empty(t, again, "the leases hold")

	// The first ten are done; the leases of all lapse.
	for _, id := range acts[:10] {
		require.NoError(t, stores[0].ReleaseDone(ctx, id, registration.CancelUnconfirmed))
	}
	_, err = pool.Exec(ctx, `UPDATE activity SET due_leased_until = now() - interval '1 second' WHERE due_leased_until IS NOT NULL`)
	require.NoError(t, err)
	retaken, err := stores[1].ClaimDueReleases(ctx, later, 30)
	require.NoError(t, err)
	var ids []string
	for _, d := range retaken {
		ids = append(ids, d.ActivityID)
	}
	assert.ElementsMatch(t, acts[10:], ids, "the claims not done are taken again once their leases lapse")
	for _, id := range acts[10:] {
		require.NoError(t, stores[1].ReleaseDone(ctx, id, registration.CancelUnconfirmed))
	}
	_, err = pool.Exec(ctx, `UPDATE activity SET due_leased_until = NULL`)
	require.NoError(t, err)
	after, err := stores[0].ClaimDueReleases(ctx, later, 30)
	require.NoError(t, err)
	assert.Empty(t, after, "a release done is never claimed again")
}
