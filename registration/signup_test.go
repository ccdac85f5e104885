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
	_, taken, err := inst.App.Store.SeatCount(context.Background(), activityID)
	require.NoError(t, err)
	return taken
}

func displayTaken(t *testing.T, inst *apptest.Instance, activityID string) int {
	t.Helper()
	v, err := inst.App.Redis.HGet(context.Background(), capacity.Key(activityID), "taken").Int()
	require.NoError(t, err)
	return v
}

// signupBurst signs up users u0..u(n-1) concurrently (spread over the
// instances) and counts the statuses.
func signupBurst(t *testing.T, insts []*apptest.Instance, activityID, prefix string, n int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for i := range n {
		inst := insts[i%len(insts)]
		tok := inst.Token(t, fmt.Sprintf("%s%d", prefix, i), false)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, err := apptest.Do(http.MethodPost, inst.URL+"/v1/activities/"+activityID+"/registrations", tok, "{}")
			status := -1
			if err == nil {
				status = r.Status
				if r.Status == http.StatusConflict {
					require.Equal(t, "activity_full", r.ErrorCode(), string(r.Body))
				}
			}
			mu.Lock()
			counts[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return counts
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
