package registration_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/apptest"
	"github.com/physiciansnet/capacityd/internal/testenv"
)

// authorityTaken counts the occupying registrations of an activity straight
// from the database.
func authorityTaken(t *testing.T, inst *apptest.Instance, activityID string) int {
	t.Helper()
	st, err := inst.App.Store.SeatState(context.Background(), activityID)
	require.NoError(t, err)
	return st.Taken
}

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
	require.Equal(t, 100, authorityTaken(t, inst, id))
	require.Equal(t, 100, displayTaken(t, inst, id))
}

func TestTwoInstancesOnOneDatabaseAdmitExactly(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	id := a.CreateActivity(t, "two instances", 150)

	counts := signupBurst(t, []*apptest.Instance{a, b}, id, "u", 1500)

	require.Equal(t, map[int]int{201: 150, 409: 1350}, counts)
	require.Equal(t, 150, authorityTaken(t, a, id))
	require.Equal(t, 150, displayTaken(t, a, id))
}

func TestSignupsWithoutRedisAreExact(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{NoRedis: true})
	id := inst.CreateActivity(t, "no redis", 50)

	counts := signupBurst(t, []*apptest.Instance{inst}, id, "u", 500)

	require.Equal(t, map[int]int{201: 50, 409: 450}, counts)
	require.Equal(t, 50, authorityTaken(t, inst, id))
	var seats capacity.Seats
	inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/seats", "", nil).JSON(t, &seats)
	require.Equal(t, capacity.SourceDatabase, seats.Source)
	require.Equal(t, 0, seats.Remaining)
}

var _ = atomic.Int64{}
var _ = testenv.FreePort

func TestWarmSeatReadsRunNoDatabaseQuery(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{ExpiryInterval: time.Hour, ReconcileInterval: time.Hour}})
	id := inst.CreateActivity(t, "reads", 30)
	signupBurst(t, []*apptest.Instance{inst}, id, "u", 10)

	var first capacity.Seats
	inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/seats", "", nil).JSON(t, &first)
	before := inst.Queries.Count()
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			var s capacity.Seats
			inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/seats", "", nil).JSON(t, &s)
			require.Equal(t, capacity.SourceCache, s.Source)
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
		r    apptest.Response
	}
	answers := make(chan answer, 200)
	var wg sync.WaitGroup
	for u := range 50 {
		user := fmt.Sprint("dup", u)
		for k := range 4 {
			inst := []*apptest.Instance{a, b}[k%2]
			wg.Go(func() { answers <- answer{user, signup(t, inst, id, user)} })
		}
	}
	wg.Wait()
	close(answers)
	created := map[string]string{}
	conflicts := map[string][]string{}
	for ans := range answers {
		switch ans.r.Status {
		case http.StatusCreated:
			require.Empty(t, created[ans.user], "%s admitted twice", ans.user)
			created[ans.user] = regOf(t, ans.r).ID
		case http.StatusConflict:
			require.Equal(t, "already_registered", ans.r.ErrorCode(), "%s", ans.r.Body)
			var body struct {
				Error struct {
					RegistrationID string `json:"registration_id"`
				} `json:"error"`
			}
			ans.r.JSON(t, &body)
			conflicts[ans.user] = append(conflicts[ans.user], body.Error.RegistrationID)
		default:
			t.Fatalf("unexpected %d %s", ans.r.Status, ans.r.Body)
		}
	}
	require.Len(t, created, 50)
	for user, ids := range conflicts {
		require.Len(t, ids, 3, user)
		for _, got := range ids {
			require.Equal(t, created[user], got, "%s's conflicts name its registration", user)
		}
	}
	require.Equal(t, 50, authorityTaken(t, a, id))
	require.Equal(t, 50, displayTaken(t, a, id))
}

// TestHolderOfAFullActivityIsAlreadyRegistered: the gate calls the
// activity full, but the user holds a seat: already_registered with its id.
func TestHolderOfAFullActivityIsAlreadyRegistered(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "full", 2)
	first := regOf(t, signup(t, inst, id, "holder"))
	require.Equal(t, http.StatusCreated, signup(t, inst, id, "other").Status)
	require.Equal(t, "activity_full", signup(t, inst, id, "late").ErrorCode())

	r := signup(t, inst, id, "holder")
	require.Equal(t, http.StatusConflict, r.Status)
	require.Equal(t, "already_registered", r.ErrorCode(), "%s", r.Body)
	var body struct {
		Error struct {
			RegistrationID string `json:"registration_id"`
		} `json:"error"`
	}
	r.JSON(t, &body)
	require.Equal(t, first.ID, body.Error.RegistrationID)
}

// TestLeakedHoldsNeverRefuseAFreeSeat: seats held in the display by an
// instance that died are not admissions in flight; the gate calls the
// activity full, the authority finds the free seat.
func TestLeakedHoldsNeverRefuseAFreeSeat(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{ReconcileInterval: time.Hour}})
	id := inst.CreateActivity(t, "leaked", 3)
	require.Equal(t, http.StatusCreated, signup(t, inst, id, "u1").Status)
	require.NoError(t, inst.App.Redis.HSet(context.Background(), capacity.Key(id), "held", 2).Err())
	require.Equal(t, 3, displayTaken(t, inst, id), "the display shows the activity full")

	require.Equal(t, http.StatusCreated, signup(t, inst, id, "u2").Status, "a free seat is never refused")
	require.Equal(t, http.StatusCreated, signup(t, inst, id, "u3").Status)
	require.Equal(t, "activity_full", signup(t, inst, id, "u4").ErrorCode())
	require.Equal(t, 3, authorityTaken(t, inst, id))
}
