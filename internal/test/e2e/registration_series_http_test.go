package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// createSeriesOf creates a series of limit maxPerUser and n activities of
// seats each in it.
func createSeriesOf(t *testing.T, inst *apptest.Instance, maxPerUser, n, seats int, waitlist bool) (string, []string) {
	t.Helper()
	admin := inst.API(t, "admin", true)
	s, err := admin.CreateSeries(t.Context(), client.NewSeries{Title: "workshops", MaxPerUser: maxPerUser})
	require.NoError(t, err)
	var acts []string
	for i := range n {
		a, err := admin.CreateActivity(t.Context(), client.NewActivity{Title: fmt.Sprint("workshop ", i), Capacity: seats,
			Waitlist: waitlist, SeriesID: s.ID})
		require.NoError(t, err)
		require.Equal(t, s.ID, *a.SeriesID)
		acts = append(acts, a.ID)
	}
	return s.ID, acts
}

// activeRegistrations returns the ids of the user's occupying and
// waitlisted registrations, sorted.
func activeRegistrations(t *testing.T, inst *apptest.Instance, user string) []string {
	t.Helper()
	page, err := inst.API(t, user, false).MyRegistrations(t.Context(), client.ListOptions{Limit: 500})
	require.NoError(t, err)
	var ids []string
	for _, r := range page.Items {
		if r.Status != client.Cancelled && r.Status != client.Expired {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestSeriesLimitHoldsUnderConcurrentSignupsAcrossInstances: one user, a
// series of at most 2, 5 activities, 20 signups at once over two
// instances: exactly 2 are admitted, every other one is refused with
// limit_reached (naming the 2) or already_registered; cancelling one
// frees the place at once, on the other instance too.
func TestSeriesLimitHoldsUnderConcurrentSignupsAcrossInstances(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	seriesLimitHolds(t, []*apptest.Instance{a, b})
}

// TestSeriesLimitHoldsThroughPgBouncer runs the same check with both
// instances behind a PgBouncer in transaction mode (the URL a user writes,
// the pool settings the service chooses for a pooler): the (series, user)
// locks are transaction-level, so they hold through it.
func TestSeriesLimitHoldsThroughPgBouncer(t *testing.T) {
	t.Parallel()
	env := throughPgBouncer(t)
	for _, inst := range env.insts {
		conn, err := inst.App.Pool.Acquire(t.Context())
		require.NoError(t, err)
		require.Equal(t, pgx.QueryExecModeCacheDescribe, conn.Conn().Config().DefaultQueryExecMode,
			"the instance runs with the pool settings the service uses behind a transaction pooler")
		conn.Release()
	}
	seriesLimitHolds(t, env.insts)
}

// seriesLimitHolds: one user, a series of at most 2, 5 activities, 20
// signups at once over the two instances insts: exactly 2 are admitted,
// every other one is refused with limit_reached (naming the 2) or
// already_registered; cancelling one frees the place at once, on the
// other instance too.
func seriesLimitHolds(t *testing.T, insts []*apptest.Instance) {
	t.Helper()
	a, b := insts[0], insts[1]
	_, acts := createSeriesOf(t, a, 2, 5, 10, false)

	var mu sync.Mutex
	var admitted []client.Registration
	limited := 0
	already := 0
	var refusedNaming [][]string
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			res, err := insts[i%2].Signup(t, acts[i%5], "alice")
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				require.False(t, res.Waitlisted)
				admitted = append(admitted, res.Registration)
				return
			}
			e := apptest.Refusal(t, err)
			require.Equal(t, http.StatusConflict, e.Status, "%v", err)
			switch e.Code {
			case client.CodeLimitReached:
				limited++
				refusedNaming = append(refusedNaming, e.RegistrationIDs)
			case client.CodeAlreadyRegistered:
				already++
				require.NotEmpty(t, e.RegistrationID)
			default:
				t.Errorf("signup refused with %v", err)
			}
		})
	}
	wg.Wait()
	t.Logf("admitted %d, limit_reached %d, already_registered %d", len(admitted), limited, already)
	require.Len(t, admitted, 2)
	require.Equal(t, 18, limited+already)
	require.NotEqual(t, admitted[0].ActivityID, admitted[1].ActivityID, "one registration per activity")
	held := []string{admitted[0].ID, admitted[1].ID}
	slices.Sort(held)
	for _, ids := range refusedNaming {
		require.Equal(t, held, ids, "limit_reached names the registrations held in the series")
	}
	require.Equal(t, held, activeRegistrations(t, a, "alice"), "the authority holds exactly those")
	total := 0
	for _, act := range acts {
		total += a.AuthorityTaken(t, act)
	}
	require.Equal(t, 2, total)

	// Cancelling one frees the place at once, whichever instance serves
	// the next signup; the one after is refused again.
	var free []string
	for _, act := range acts {
		if act != admitted[0].ActivityID && act != admitted[1].ActivityID {
			free = append(free, act)
		}
	}
	_, err := a.API(t, "alice", false).CancelRegistration(t.Context(), admitted[0].ID)
	require.NoError(t, err)
	next := b.MustSignup(t, free[0], "alice")
	_, err = a.Signup(t, free[1], "alice")
	e := apptest.Refusal(t, err)
	require.Equal(t, client.CodeLimitReached, e.Code)
	want := []string{admitted[1].ID, next.ID}
	slices.Sort(want)
	require.Equal(t, want, e.RegistrationIDs)

	// Other users are not limited by alice's registrations.
	a.MustSignup(t, free[1], "bob")
	b.MustSignup(t, admitted[1].ActivityID, "bob")
}

// TestSeriesCountsWaitlistedAndExpiryFreesThePlace checks that a place in
// a waiting list counts in the series as a seat does, that cancelling it
// or an expiry frees the place, that a re-admission over the limit is
// refused with limit_reached, and that lowering the limit removes nobody.
func TestSeriesCountsWaitlistedAndExpiryFreesThePlace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := &fakeClock{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	inst := apptest.Start(t, apptest.Options{App: app.Options{Now: clock.Now, ExpiryInterval: time.Hour}})
	admin := inst.API(t, "admin", true)
	series, acts := createSeriesOf(t, inst, 1, 3, 1, true)
	inst.MustSignup(t, acts[0], "someone")

	// alice waits for acts[0]: that is her one place in the series.
	res, err := inst.Signup(t, acts[0], "alice")
	require.NoError(t, err)
	require.True(t, res.Waitlisted)
	_, err = inst.Signup(t, acts[1], "alice")
	e := apptest.Refusal(t, err)
	require.Equal(t, client.CodeLimitReached, e.Code)
	require.Equal(t, []string{res.Registration.ID}, e.RegistrationIDs)

	_, err = admin.CancelRegistration(ctx, res.Registration.ID)
	require.NoError(t, err)
	held := inst.MustSignup(t, acts[1], "alice")

	// Her hold expires: the place is free; paying late while she holds
	// another place in the series is refused with limit_reached.
	_, err = admin.SetRegistrationStatus(ctx, held.ID, client.AwaitingPayment)
	require.NoError(t, err)
	clock.Advance(time.Hour)
	n, err := inst.App.Registrations.ExpireDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	other := inst.MustSignup(t, acts[2], "alice")
	_, err = admin.SetRegistrationStatus(ctx, held.ID, client.Approved)
	e = apptest.Refusal(t, err)
	require.Equal(t, http.StatusConflict, e.Status)
	require.Equal(t, client.CodeLimitReached, e.Code)
	require.Equal(t, []string{other.ID}, e.RegistrationIDs)
	got, err := admin.GetRegistration(ctx, held.ID)
	require.NoError(t, err)
	require.Equal(t, client.Expired, got.Status, "the refused re-admission changed nothing")

	// Raised to 2, the late payment is taken; lowered to 1, nobody is
	// removed, and the next signup is refused until she holds fewer than 1.
	_, err = admin.UpdateSeries(ctx, series, client.SeriesPatch{MaxPerUser: new(2)})
	require.NoError(t, err)
	_, err = admin.SetRegistrationStatus(ctx, held.ID, client.Approved)
	require.NoError(t, err)
	_, err = admin.UpdateSeries(ctx, series, client.SeriesPatch{MaxPerUser: new(1)})
	require.NoError(t, err)
	want := []string{held.ID, other.ID}
	slices.Sort(want)
	require.Equal(t, want, activeRegistrations(t, inst, "alice"), "a lower limit removes nobody")
	_, err = admin.CancelRegistration(ctx, other.ID)
	require.NoError(t, err)
	_, err = inst.Signup(t, acts[2], "alice")
	e = apptest.Refusal(t, err)
	require.Equal(t, client.CodeLimitReached, e.Code)
	require.Equal(t, []string{held.ID}, e.RegistrationIDs)
	_, err = admin.CancelRegistration(ctx, held.ID)
	require.NoError(t, err)
	inst.MustSignup(t, acts[2], "alice")
}
