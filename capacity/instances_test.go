package capacity_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
)

// TestReadsOfTwoInstancesConvergeAfterFlushesAndLostAnnouncements runs a
// burst of signups and cancellations over two instances, in an activity
// of its own and in two activities of one pool, while Redis is flushed
// and the instances' subscriptions to the announcements are killed (their
// announcements of that moment are lost), with reads on both instances
// all along (which fill their seat memory). Once the burst is answered and
// the subscriptions are back, no read on either instance shows more seats
// than the authority, and within SEAT_CACHE_TTL every read equals it.
func TestReadsOfTwoInstancesConvergeAfterFlushesAndLostAnnouncements(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	rs := testenv.PrivateRedis(t)
	opts := app.Options{Seats: capacity.Config{TTL: ttl}}
	a := apptest.Start(t, apptest.Options{RedisURL: rs.URL(), App: opts})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL, RedisURL: rs.URL(), App: opts})
	insts := []*apptest.Instance{a, b}
	admin := testenv.RedisClient(t, rs.URL())
	ctx := context.Background()

	api := a.API(t, "admin", true)
	pool, err := api.CreatePool(ctx, client.NewPool{Title: "hall", Capacity: 14})
	require.NoError(t, err)
	var acts []string
	for i, in := range [][]string{nil, {pool.ID}, {pool.ID}} {
		act, err := api.CreateActivity(ctx, client.NewActivity{Title: fmt.Sprint("burst ", i), Capacity: 10, Waitlist: i != 2, Pools: in})
		require.NoError(t, err)
		acts = append(acts, act.ID)
	}
	read := func(inst *apptest.Instance, id string) registration.Seats {
		var s registration.Seats
		r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/seats", "", nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r.JSON(t, &s)
		return s
	}
	for _, inst := range insts {
		require.Eventually(t, inst.App.Changes.Healthy, 10*time.Second, 10*time.Millisecond)
		for _, id := range acts {
			read(inst, id)
		}
	}

	burst, done := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	const workers, perWorker = 6, 14
	for w := range workers {
		wg.Go(func() {
			var mine []client.Registration
			for i := range perWorker {
				inst, id := insts[(w+i)%2], acts[(w+i)%len(acts)]
				user := fmt.Sprintf("u%d-%d", w, i)
				if i%3 == 2 && len(mine) > 0 {
					r := mine[0]
					mine = mine[1:]
					_, err := insts[(w+i+1)%2].API(t, r.UserID, false).CancelRegistration(ctx, r.ID)
					require.NoError(t, err, "cancel %s", r.ID)
					continue
				}
				res, err := inst.Signup(t, id, user)
				if err == nil {
					mine = append(mine, res.Registration)
				}
			}
		})
	}
	go func() {
		defer close(burst)
		wg.Wait()
	}()
	var readers sync.WaitGroup
	var reads atomic.Int64
	for _, inst := range insts {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				for _, id := range acts {
					read(inst, id)
				}
				reads.Add(1)
			}
		})
	}
	// Each fault strikes after the readers went round every activity a few
	// times since the last one: faults among reads, not all at once.
	readsOn := func() {
		from := reads.Load()
		require.Eventually(t, func() bool { return reads.Load() >= from+3*int64(len(insts)) }, 10*time.Second, time.Millisecond)
	}
	for range 3 {
		readsOn()
		require.NoError(t, admin.FlushAll(ctx).Err())
		readsOn()
		require.NoError(t, admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Err())
	}
	<-burst
	close(done)
	readers.Wait()
	answered := time.Now()

	want := make(map[string]registration.SeatState)
	for _, id := range acts {
		st, err := a.App.Store.SeatState(ctx, id)
		require.NoError(t, err)
		want[id] = st
	}
	for _, inst := range insts {
		require.Eventually(t, inst.App.Changes.Healthy, 10*time.Second, 10*time.Millisecond, "the subscription comes back")
	}
	// The last announcements are delivered: a read equal to the authority
	// before one arrives may be moved by it, and the loop below requires
	// equal reads to stay equal. Each instance announces a marker after
	// them, until every other instance has received it: Redis delivers a
	// channel's messages in the order it took them.
	for i, from := range insts {
		marker := fmt.Sprintf("delivered-%s-%d", t.Name(), i)
		for j, to := range insts {
			if i == j {
				continue
			}
			got, stop := to.App.Changes.Watch(marker)
			require.Eventually(t, func() bool {
				from.App.Changes.Announce(ctx, marker)
				select {
				case <-got:
					return true
				default:
					return false
				}
			}, 10*time.Second, 20*time.Millisecond, "instance %d's announcements reach instance %d", i, j)
			stop()
		}
	}
	var converged time.Duration
	for {
		equal := true
		for _, inst := range insts {
			for _, id := range acts {
				s, st := read(inst, id), want[id]
				require.LessOrEqual(t, s.Remaining, st.Remaining(), "%s: never more seats than the authority", id)
				if s.Taken != st.Taken || s.Remaining != st.Remaining() || s.Waiting != st.Waiting {
					equal = false
					require.Zero(t, converged, "%s: equal reads stay equal (%+v, authority %+v)", id, s, st)
				}
			}
		}
		since := time.Since(answered)
		if equal && converged == 0 {
			converged = since
		}
		if since > ttl+2*time.Second {
			break
		}
		require.True(t, converged > 0 || since < ttl+time.Second,
			"every read equals the authority within SEAT_CACHE_TTL (and a second for a loaded machine)")
		// The loop samples the reads over SEAT_CACHE_TTL: the sleep is its
		// sampling period, not a wait for a condition.
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("reads equal to the authority %v after the burst was answered", converged.Round(time.Millisecond))
}

// commandCounter is a go-redis hook that counts the commands sent.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestAWarmActivitysSeatsAreReadWithoutRedis: once an instance read an
// activity's seats, it answers them from memory, and a signup through
// another instance reaches that memory by its announcement.
func TestAWarmActivitysSeatsAreReadWithoutRedis(t *testing.T) {
	t.Parallel()
	rs := testenv.PrivateRedis(t)
	rdb := testenv.RedisClient(t, rs.URL())
	counted := &commandCounter{}
	rdb.AddHook(counted)
	a := apptest.Start(t, apptest.Options{Redis: rdb})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL, RedisURL: rs.URL()})
	id := a.CreateActivity(t, "warm", 5)
	require.Eventually(t, a.App.Changes.Healthy, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, b.App.Changes.Healthy, 10*time.Second, 10*time.Millisecond)
	seats := func() registration.Seats {
		var s registration.Seats
		a.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/seats", "", nil).JSON(t, &s)
		return s
	}
	seats()
	before := counted.n.Load()
	for range 20 {
		require.Equal(t, 5, seats().Remaining)
	}
	require.Equal(t, before, counted.n.Load(), "no Redis command for a warm activity's reads")

	b.MustSignup(t, id, "elsewhere")
	require.Eventually(t, func() bool { return seats().Remaining == 4 }, 10*time.Second, 5*time.Millisecond,
		"the other instance's signup reaches the memory")
}
