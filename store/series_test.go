package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

// TestSeriesLimitIsExactFromTwoStores: each of 12 users signs up for the
// five activities of a series of at most 2, twenty times at once over two
// stores (two instances): exactly 2 registrations each, every other
// answer limit_reached (naming the two) or already_registered; a
// cancellation frees the slot at once.
func TestSeriesLimitIsExactFromTwoStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.NewDatabase(t)
	stores := []*store.Store{store.New(testenv.Pool(t, url, 8)), store.New(testenv.Pool(t, url, 8))}
	series, err := stores[0].CreateSeries(ctx, newID("s"), registration.NewSeries{Title: "spring", MaxPerUser: 2})
	require.NoError(t, err)
	var acts []string
	for i := range 5 {
		a, err := stores[0].CreateActivity(ctx, newID("a"), registration.NewActivity{Title: fmt.Sprint("workshop ", i),
			Capacity: 100, HoldSeconds: 900, Waitlist: i%2 == 0, SeriesID: series.ID})
		require.NoError(t, err)
		require.Equal(t, series.ID, *a.SeriesID)
		acts = append(acts, a.ID)
	}
	var mu sync.Mutex
	var admitted []string
	byUser := map[string]int{}
	codes := map[string]int{}
	var wg sync.WaitGroup
	for i := range 240 {
		user := fmt.Sprint("user", i/20)
		if i/20 == 0 {
			user = "alice"
		}
		wg.Go(func() {
			applied, err := stores[i%2].Apply(ctx, []registration.CommandBatch{
				{ActivityID: acts[i%5], Commands: []registration.Command{signupOf(user)}}}, time.Now())
			if !assertNoErr(t, err) {
				return
			}
			o := applied[0].Plan.Outcomes[0]
			mu.Lock()
			defer mu.Unlock()
			if o.Err == nil {
				byUser[user]++
				if user == "alice" {
					admitted = append(admitted, o.Registration.ID)
				}
				return
			}
			codes[capacityd.ErrorCode(o.Err)]++
			if capacityd.ErrorCode(o.Err) == capacityd.ELimitReached {
				var e *capacityd.Error
				require.ErrorAs(t, o.Err, &e)
				require.Len(t, e.RegistrationIDs, 2)
			}
		})
	}
	wg.Wait()
	require.Len(t, admitted, 2, "answers %v", codes)
	for u, n := range byUser {
		require.Equal(t, 2, n, "%s's registrations", u)
	}
	require.Len(t, byUser, 12)
	require.Equal(t, 240-24, codes[capacityd.ELimitReached]+codes[capacityd.EAlreadyRegistered], "answers %v", codes)

	held, err := stores[0].GetRegistrations(ctx, admitted)
	require.NoError(t, err)
	applyOne(t, stores[1], held[0].ActivityID, cancelOf(held[0].ID))
	var other string
	for _, a := range acts {
		if a != held[0].ActivityID && a != held[1].ActivityID {
			other = a
			break
		}
	}
	o, _ := applyOne(t, stores[0], other, signupOf("alice"))
	require.NoError(t, o.Err, "the cancelled registration's slot is free at once")
	o, _ = applyOne(t, stores[1], acts[0], signupOf("alice"))
	require.Contains(t, []string{capacityd.ELimitReached, capacityd.EAlreadyRegistered}, capacityd.ErrorCode(o.Err))
}

// TestAnActivityJoiningASeriesIsSeenUnderTheLocks: one store last read an
// activity in no series, so its next transaction would skip the (series,
// user) locks; another store puts the activity in a series of at most 1
// where the user already holds a registration. The first store's signup
// reads the series under the activity's lock, runs again with the
// series' locks, and is refused.
func TestAnActivityJoiningASeriesIsSeenUnderTheLocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.NewDatabase(t)
	s1, s2 := store.New(testenv.Pool(t, url, 4)), store.New(testenv.Pool(t, url, 4))
	series, err := s1.CreateSeries(ctx, newID("s"), registration.NewSeries{Title: "one", MaxPerUser: 1})
	require.NoError(t, err)
	in, err := s1.CreateActivity(ctx, newID("a"), registration.NewActivity{Title: "in", Capacity: 5, HoldSeconds: 900,
		SeriesID: series.ID})
	require.NoError(t, err)
	out := createActivities(t, s1, 1, 5)[0]
	o, _ := applyOne(t, s1, in.ID, signupOf("alice"))
	require.NoError(t, o.Err)
	o, _ = applyOne(t, s1, out, signupOf("bob"))
	require.NoError(t, o.Err, "s1 has read the activity in no series")

	o, _ = applyOne(t, s2, out, registration.ActivityCommand{Patch: registration.ActivityPatch{SeriesID: &series.ID}})
	require.NoError(t, o.Err)
	o, _ = applyOne(t, s1, out, signupOf("alice"))
	require.Equal(t, capacityd.ELimitReached, capacityd.ErrorCode(o.Err))
}
