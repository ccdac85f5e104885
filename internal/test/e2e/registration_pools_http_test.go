package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// createPooled creates a pool of poolSeats and n activities of seats each
// in it.
func createPooled(t *testing.T, inst *apptest.Instance, poolSeats, n, seats int, waitlist bool) (string, []string) {
	t.Helper()
	admin := inst.API(t, "admin", true)
	p, err := admin.CreatePool(t.Context(), client.NewPool{Title: "hall", Capacity: poolSeats})
	require.NoError(t, err)
	var acts []string
	for i := range n {
		a, err := admin.CreateActivity(t.Context(), client.NewActivity{Title: fmt.Sprint("in the hall ", i), Capacity: seats,
			Waitlist: waitlist, Pools: []string{p.ID}})
		require.NoError(t, err)
		require.Equal(t, []string{p.ID}, a.Pools)
		acts = append(acts, a.ID)
	}
	return p.ID, acts
}

// TestPoolBurstWithRedisFlushedIsExact: 240 signups over 3 activities of
// 20 seats in a pool of 30, on two instances whose Redis is flushed every
// 10–20 ms: exactly 30 admitted, no activity over 20, and every activity's
// remaining is 0 on both instances' displays and at the authority.
func TestPoolBurstWithRedisFlushedIsExact(t *testing.T) {
	t.Parallel()
	rs := testenv.PrivateRedis(t)
	a := apptest.Start(t, apptest.Options{RedisURL: rs.URL()})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL, RedisURL: rs.URL()})
	redis := testenv.RedisClient(t, rs.URL())
	pool, acts := createPooled(t, a, 30, 3, 20, false)

	stop := make(chan struct{})
	flushes := keepFlushing(stop, func(ctx context.Context) error { return redis.FlushAll(ctx).Err() })
	insts := []*apptest.Instance{a, b}
	var mu sync.Mutex
	admitted := make(map[string]int)
	var wg sync.WaitGroup
	for i := range 240 {
		act := acts[i%3]
		wg.Go(func() {
			_, err := insts[(i/3)%2].Signup(t, act, fmt.Sprint("u", i))
			if err != nil {
				require.Equal(t, "activity_full", apptest.Refusal(t, err).Code, "%v", err)
				return
			}
			mu.Lock()
			admitted[act]++
			mu.Unlock()
		})
	}
	wg.Wait()
	close(stop)
	t.Logf("admitted %v; Redis flushed %d times", admitted, <-flushes)

	total := 0
	for _, act := range acts {
		taken := a.AuthorityTaken(t, act)
		require.Equal(t, admitted[act], taken)
		require.LessOrEqual(t, taken, 20)
		total += taken
	}
	require.Equal(t, 30, total)
	p, err := a.API(t, "admin", true).GetPool(t.Context(), pool)
	require.NoError(t, err)
	require.Equal(t, [2]int{30, 0}, [2]int{p.Taken, p.Remaining})
	for _, inst := range insts {
		for _, act := range acts {
			got, err := inst.API(t, "admin", true).GetActivity(t.Context(), act)
			require.NoError(t, err)
			require.Equal(t, 0, got.Remaining, "authoritative remaining of %s", act)
			seats, err := inst.Public().Seats(t.Context(), act)
			require.NoError(t, err)
			require.Equal(t, 0, seats.Remaining, "displayed remaining of %s", act)
		}
	}
}

// TestPoolPromotesTheOldestWaitingAcrossItsActivities: a pool of 2; A
// holds both; B1 (on B) waits, then A1 (on A), then B2 (on B). One A
// holder cancels: B1 is promoted at once; the other: A1; the pool raised
// to 3: B2. Each promotion is an event of its own activity's feed.
func TestPoolPromotesTheOldestWaitingAcrossItsActivities(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.API(t, "admin", true)
	pool, acts := createPooled(t, inst, 2, 2, 10, true)
	actA, actB := acts[0], acts[1]
	h0, h1 := inst.MustSignup(t, actA, "h0"), inst.MustSignup(t, actA, "h1")
	wait := func(act, user string) client.Registration {
		res, err := inst.Signup(t, act, user)
		require.NoError(t, err)
		require.True(t, res.Waitlisted, user)
		return res.Registration
	}
	b1, a1, b2 := wait(actB, "b1"), wait(actA, "a1"), wait(actB, "b2")
	status := func(r client.Registration) string { return string(getReg(t, inst, r.ID).Status) }

	_, err := admin.CancelRegistration(t.Context(), h0.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"pending", "waitlisted", "waitlisted"}, []string{status(b1), status(a1), status(b2)})
	_, err = admin.CancelRegistration(t.Context(), h1.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"pending", "pending", "waitlisted"}, []string{status(b1), status(a1), status(b2)})
	three := 3
	p, err := admin.UpdatePool(t.Context(), pool, client.PoolPatch{Capacity: &three})
	require.NoError(t, err)
	require.Equal(t, [3]int{3, 3, 0}, [3]int{p.Capacity, p.Taken, p.Remaining})
	require.Equal(t, "pending", status(b2))

	events, err := admin.ActivityEvents(t.Context(), actB, client.EventFeedOptions{})
	require.NoError(t, err)
	var promoted []string
	for _, e := range events.Items {
		require.Equal(t, actB, e.ActivityID)
		if e.Type == "registration.promoted" {
			promoted = append(promoted, e.RegistrationID)
		}
	}
	require.Equal(t, []string{b1.ID, b2.ID}, promoted)
}

// TestAChangeInAPoolReachesEveryActivitysStream: two instances stream
// activity B's seats; signups on A (same pool) through the other
// instance move B's remaining on both streams within a second of their
// commit (the answer of the last signup).
func TestAChangeInAPoolReachesEveryActivitysStream(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	_, acts := createPooled(t, a, 5, 2, 10, false)
	var streams []*client.SeatStream
	for _, inst := range []*apptest.Instance{a, b} {
		s, err := inst.Public().StreamSeats(t.Context(), acts[1])
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		first, err := s.Next()
		require.NoError(t, err)
		require.Equal(t, 5, first.Remaining, "the pool's 5 seats bound B's 10")
		streams = append(streams, s)
	}
	b.MustSignup(t, acts[0], "on-a")
	b.MustSignup(t, acts[0], "on-a-too")
	start := time.Now()
	for i, s := range streams {
		for {
			seats, err := s.Next()
			require.NoError(t, err)
			if seats.Remaining == 3 {
				break
			}
		}
		require.Less(t, time.Since(start), time.Second, "stream %d", i)
	}
	seats, err := a.Public().Seats(t.Context(), acts[1])
	require.NoError(t, err)
	require.Equal(t, [2]int{0, 3}, [2]int{seats.Taken, seats.Remaining})
}
