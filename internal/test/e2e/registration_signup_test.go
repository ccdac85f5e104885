package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/onsale"
	"github.com/physiciansnet/capacityd/registration"
)

func displayTaken(t *testing.T, inst *apptest.Instance, activityID string) int {
	t.Helper()
	return inst.DisplayTaken(t, activityID)
}

// signupBurst signs up users prefix0..prefix(n-1) at once over the
// instances and counts the statuses.
func signupBurst(t *testing.T, insts []*apptest.Instance, activityID, prefix string, n int) map[int]int {
	t.Helper()
	return apptest.SignupBurst(t, insts, activityID, prefix, n)
}

func TestConcurrentSignupsNeverOversell(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "flash", 100)

	counts := signupBurst(t, []*apptest.Instance{inst}, id, "u", 2000)

	require.Equal(t, map[int]int{201: 100, 409: 1900}, counts)
	require.Equal(t, 100, inst.AuthorityTaken(t, id))
	require.Equal(t, 100, displayTaken(t, inst, id))
}

func TestTwoInstancesOnOneDatabaseAdmitExactly(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	id := a.CreateActivity(t, "two instances", 150)

	counts := signupBurst(t, []*apptest.Instance{a, b}, id, "u", 1500)

	require.Equal(t, map[int]int{201: 150, 409: 1350}, counts)
	require.Equal(t, 150, a.AuthorityTaken(t, id))
	require.Equal(t, 150, displayTaken(t, a, id))
}

func TestSignupsWithoutRedisAreExact(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{NoRedis: true})
	id := inst.CreateActivity(t, "no redis", 50)

	counts := signupBurst(t, []*apptest.Instance{inst}, id, "u", 500)

	require.Equal(t, map[int]int{201: 50, 409: 450}, counts)
	require.Equal(t, 50, inst.AuthorityTaken(t, id))
	seats, err := inst.Public().Seats(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, registration.SourceDatabase, seats.Source)
	require.Equal(t, 0, seats.Remaining)
}

var _ = atomic.Int64{}
var _ = testenv.FreePort

func TestWarmSeatReadsRunNoDatabaseQuery(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{ExpiryInterval: time.Hour, ReconcileInterval: time.Hour, OnSale: onsale.Options{Tick: time.Hour}}})
	id := inst.CreateActivity(t, "reads", 30)
	signupBurst(t, []*apptest.Instance{inst}, id, "u", 10)

	public := inst.Public()
	_, err := public.Seats(t.Context(), id)
	require.NoError(t, err)
	before := inst.Queries.Count()
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			s, err := public.Seats(t.Context(), id)
			require.NoError(t, err)
			require.Equal(t, registration.SourceCache, s.Source)
			require.Equal(t, 10, s.Taken)
			require.Equal(t, 20, s.Remaining)
		})
	}
	wg.Wait()
	require.Equal(t, before, inst.Queries.Count(), "warm seat reads must not touch PostgreSQL")
}

// TestDuplicateSignupsAreAlreadyRegisteredNeverFull: 50 users each send 4
// concurrent signups for a 100-seat activity over two instances: each gets
// one seat and three already_registered naming it, and nobody is refused
// as full while seats are free.
func TestDuplicateSignupsAreAlreadyRegisteredNeverFull(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	id := a.CreateActivity(t, "duplicates", 100)

	type answer struct {
		user string
		res  client.SignupResult
		err  error
	}
	answers := make(chan answer, 200)
	var wg sync.WaitGroup
	for u := range 50 {
		user := fmt.Sprint("dup", u)
		for k := range 4 {
			api := []*apptest.Instance{a, b}[k%2].API(t, user, false)
			wg.Go(func() {
				res, err := api.Signup(t.Context(), id, client.SignupOptions{})
				answers <- answer{user, res, err}
			})
		}
	}
	wg.Wait()
	close(answers)
	created := map[string]string{}
	conflicts := map[string][]string{}
	for ans := range answers {
		var e *client.Error
		switch {
		case ans.err == nil && !ans.res.Waitlisted:
			require.Empty(t, created[ans.user], "%s admitted twice", ans.user)
			created[ans.user] = ans.res.Registration.ID
		case errors.As(ans.err, &e) && e.Status == http.StatusConflict:
			require.Equal(t, client.CodeAlreadyRegistered, e.Code, "%v", e)
			conflicts[ans.user] = append(conflicts[ans.user], e.RegistrationID)
		default:
			t.Fatalf("unexpected %+v %v", ans.res, ans.err)
		}
	}
	require.Len(t, created, 50)
	for user, ids := range conflicts {
		require.Len(t, ids, 3, user)
		for _, got := range ids {
			require.Equal(t, created[user], got, "%s's conflicts name its registration", user)
		}
	}
	require.Equal(t, 50, a.AuthorityTaken(t, id))
	require.Equal(t, 50, displayTaken(t, a, id))
}

// TestHolderOfAFullActivityIsAlreadyRegistered: the gate calls the
// activity full, but the user holds a seat: already_registered with its id.
func TestHolderOfAFullActivityIsAlreadyRegistered(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "full", 2)
	first := inst.MustSignup(t, id, "holder")
	inst.MustSignup(t, id, "other")
	_, err := inst.Signup(t, id, "late")
	require.Equal(t, client.CodeActivityFull, apptest.Refusal(t, err).Code)

	_, err = inst.Signup(t, id, "holder")
	refusal := apptest.Refusal(t, err)
	require.Equal(t, http.StatusConflict, refusal.Status)
	require.Equal(t, client.CodeAlreadyRegistered, refusal.Code, "%v", refusal)
	require.Equal(t, first.ID, refusal.RegistrationID)
}

// TestLeakedHoldsNeverRefuseAFreeSeat: seats held in the display by an
// instance that died are not admissions in flight; the gate calls the
// activity full, the authority finds the free seat.
func TestLeakedHoldsNeverRefuseAFreeSeat(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{ReconcileInterval: time.Hour}})
	id := inst.CreateActivity(t, "leaked", 3)
	inst.MustSignup(t, id, "u1")
	require.NoError(t, inst.App.Redis.HSet(context.Background(), capacity.Key(id), "held", 2).Err())
	require.Equal(t, 3, displayTaken(t, inst, id), "the display shows the activity full")

	require.Equal(t, http.StatusCreated, apptest.SignupStatus(inst.Signup(t, id, "u2")), "a free seat is never refused")
	inst.MustSignup(t, id, "u3")
	_, err := inst.Signup(t, id, "u4")
	require.Equal(t, client.CodeActivityFull, apptest.Refusal(t, err).Code)
	require.Equal(t, 3, inst.AuthorityTaken(t, id))
}
