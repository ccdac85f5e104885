package e2e

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// watchAuthority samples the authority COUNT until stop is closed and
// returns the largest value seen.
func watchAuthority(t *testing.T, inst *apptest.Instance, id string, stop <-chan struct{}) <-chan int {
	out := make(chan int, 1)
	go func() {
		highest := 0
		for {
			select {
			case <-stop:
				out <- highest
				return
			case <-time.After(2 * time.Millisecond):
			}
			if st, err := inst.App.Store.SeatState(context.Background(), id); err == nil {
				highest = max(highest, st.Taken)
			}
		}
	}()
	return out
}

// keepFlushing flushes Redis every 10 to 20 ms until stop is closed, and
// then sends the number of flushes.
func keepFlushing(stop <-chan struct{}, flush func(context.Context) error) <-chan int {
	out := make(chan int, 1)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				out <- n
				return
			case <-time.After(time.Duration(10+n%11) * time.Millisecond):
			}
			if flush(context.Background()) == nil {
				n++
			}
		}
	}()
	return out
}

func TestFlushingRedisDuringBurstNeverOversells(t *testing.T) {
	t.Parallel()
	redis := testenv.PrivateRedis(t)
	inst := apptest.Start(t, apptest.Options{RedisURL: redis.URL()})
	id := inst.CreateActivity(t, "flushed", 100)
	client := testenv.RedisClient(t, redis.URL())

	stop := make(chan struct{})
	highest := watchAuthority(t, inst, id, stop)
	flushes := keepFlushing(stop, func(ctx context.Context) error { return client.FlushAll(ctx).Err() })

	counts := signupBurst(t, []*apptest.Instance{inst}, id, "w1-", 2000)
	close(stop)

	require.Positive(t, <-flushes)
	require.LessOrEqual(t, <-highest, 100, "the authority must never exceed capacity")
	require.Equal(t, inst.AuthorityTaken(t, id), counts[http.StatusCreated], "every 201 is a row, every row a 201")
	require.Equal(t, 0, counts[-1]+counts[http.StatusInternalServerError]+counts[http.StatusServiceUnavailable])

	// A second wave fills exactly to capacity, whatever the first left.
	counts2 := signupBurst(t, []*apptest.Instance{inst}, id, "w2-", 500)
	require.Equal(t, 100, inst.AuthorityTaken(t, id))
	require.Equal(t, 100, counts[http.StatusCreated]+counts2[http.StatusCreated])
	require.Equal(t, 100, displayTaken(t, inst, id))
}

func TestRedisKilledAndRestartedMidBurstStaysExact(t *testing.T) {
	t.Parallel()
	redis := testenv.PrivateRedis(t)
	inst := apptest.Start(t, apptest.Options{RedisURL: redis.URL()})
	id := inst.CreateActivity(t, "redis dies", 120)

	stop := make(chan struct{})
	highest := watchAuthority(t, inst, id, stop)
	// Redis dies once the burst has begun to commit, and comes back once
	// signups have committed without it (or the activity is full).
	var chaos sync.WaitGroup
	chaos.Go(func() {
		inst.WaitCommitted(id, 1)
		redis.Kill()
		if st, err := inst.App.Store.SeatState(context.Background(), id); err == nil {
			inst.WaitCommitted(id, min(st.Taken+1, 120))
		}
		redis.Start(t)
	})
	counts := signupBurst(t, []*apptest.Instance{inst}, id, "u", 2000)
	chaos.Wait()
	close(stop)

	require.LessOrEqual(t, <-highest, 120)
	require.Equal(t, 0, counts[-1]+counts[http.StatusInternalServerError]+counts[http.StatusServiceUnavailable], "%v", counts)
	require.Equal(t, inst.AuthorityTaken(t, id), counts[http.StatusCreated])

	// After the restart the display is rebuilt from the authority.
	counts2 := signupBurst(t, []*apptest.Instance{inst}, id, "late", 200)
	require.Equal(t, 120, inst.AuthorityTaken(t, id))
	require.Equal(t, 120, counts[http.StatusCreated]+counts2[http.StatusCreated])
	require.Equal(t, 120, displayTaken(t, inst, id))
	ready, err := inst.Public().Ready(t.Context())
	require.NoError(t, err)
	require.Equal(t, "ok", ready.Redis)
}

func TestReadyzSaysDegradedWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	redis := testenv.PrivateRedis(t)
	inst := apptest.Start(t, apptest.Options{RedisURL: redis.URL()})
	id := inst.CreateActivity(t, "degraded", 10)
	redis.Kill()

	ready, err := inst.Public().Ready(t.Context())
	require.NoError(t, err)
	require.Equal(t, client.Readiness{Postgres: "ok", Redis: "degraded"}, ready)

	inst.MustSignup(t, id, "bob")
	seats, err := inst.Public().Seats(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, 1, seats.Taken)
	require.Equal(t, "database", seats.Source)
}

func TestCrashBetweenReserveAndInsertConvergesWithinTTL(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: appWithTTL(time.Second)})
	id := inst.CreateActivity(t, "crash", 10)
	inst.MustSignup(t, id, "ann")

	// The process "dies" after reserving a seat and before inserting.
	_, err := inst.App.Seats.Reserve(context.Background(), id, 1)
	require.NoError(t, err)
	require.Equal(t, 2, displayTaken(t, inst, id), "display too high: conservative")
	require.Equal(t, 1, inst.AuthorityTaken(t, id))

	require.Eventually(t, func() bool {
		s, err := inst.Public().Seats(t.Context(), id)
		require.NoError(t, err)
		return s.Taken == 1
	}, 5*time.Second, 50*time.Millisecond, "the display converges to the authority after the TTL")
}

func TestEndedRequestsDoNotSuspendTheDisplayTier(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "gone", 5)
	signupBurst(t, []*apptest.Instance{inst}, id, "u", 1)
	_, err := inst.App.Seats.Seats(context.Background(), id)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Answered from the instance's seat memory, or refused for the
	// context: either way no Redis failure.
	if _, err = inst.App.Seats.Seats(ctx, id); err != nil {
		require.ErrorIs(t, err, context.Canceled)
	}

	s, err := inst.App.Seats.Seats(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, "cache", s.Source, "a client that went away is not a Redis failure")
	require.NotContains(t, string(inst.MustDo(t, http.MethodGet, "/metrics", "", nil).Body), "capacityd_redis_errors_total{")
}
