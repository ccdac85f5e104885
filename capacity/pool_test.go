package capacity_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
)

// newID returns a fresh id of the prefix (a, p), unique across tests that
// share Redis.
func newID(prefix string) string {
	return fmt.Sprintf("%s_%026d", prefix, time.Now().UnixNano()+seq.Add(1))
}

// pool creates a pool at the authority with the activities in it.
func (b bundle) pool(t *testing.T, capacity int, activities ...string) string {
	t.Helper()
	ctx := context.Background()
	p, err := b.store.CreatePool(ctx, newID("p"), registration.NewPool{Title: "pool", Capacity: capacity})
	require.NoError(t, err)
	for _, a := range activities {
		_, err := b.db.Exec(ctx, `INSERT INTO activity_pool (activity_id, pool_id)
			SELECT a.id, p.id FROM activity a, pool p WHERE a.public_id = $1 AND p.public_id = $2`, a, p.ID)
		require.NoError(t, err)
	}
	return p.ID
}

// epoch is a settings version of the tests' commits; later ones add to it.
var epoch = time.Unix(1_700_000_000, 0).UTC()

func poolState(id string, capacity, taken int, seq int64, version time.Time, activities ...string) registration.PoolSeatState {
	return registration.PoolSeatState{PoolID: id, Capacity: capacity, Taken: taken, LastSeq: seq, UpdatedAt: version,
		Activities: activities}
}

// commit is a commit of an activity (capacity, taken as of seq, settings
// as of epoch) in the pools, with their states after it.
func commit(id string, capacity, taken int, seq int64, pools []registration.PoolSeatState, holds ...registration.Hold) registration.Commit {
	return registration.Commit{ActivityID: id, Events: []registration.Event{{Seq: seq}}, Holds: holds, Pools: pools,
		State: registration.SeatState{Capacity: capacity, Taken: taken, LastSeq: seq, UpdatedAt: epoch, Pools: pools}}
}

func poolFields(t *testing.T, rdb redis.UniversalClient, id string) map[string]string {
	t.Helper()
	m, err := rdb.HGetAll(context.Background(), capacity.PoolKey(id)).Result()
	require.NoError(t, err)
	return m
}

func activityFields(t *testing.T, rdb redis.UniversalClient, id string) map[string]string {
	t.Helper()
	m, err := rdb.HGetAll(context.Background(), capacity.Key(id)).Result()
	require.NoError(t, err)
	return m
}

func redisOnly(t *testing.T) (*capacity.Counter, *redis.Client) {
	rdb := testenv.Redis(t)
	return capacity.New(capacity.Config{Redis: rdb, TTL: time.Minute}), rdb
}

func TestPoolCountersSettleAndNeverStepBack(t *testing.T) {
	t.Parallel()
	c, rdb := redisOnly(t)
	ctx := context.Background()
	a1, a2, p, q := newID("a"), newID("a"), newID("p"), newID("p")

	c.Committed(ctx, []registration.Commit{commit(a1, 20, 2, 1, []registration.PoolSeatState{
		poolState(p, 10, 3, 5, epoch, a1, a2), poolState(q, 7, 2, 2, epoch, a1)})})
	f := poolFields(t, rdb, p)
	require.Equal(t, map[string]string{"taken": "3", "held": "0", "capacity": "10", "seq": "5",
		"version": strconv.FormatInt(epoch.UnixMicro(), 10), "gen": f["gen"], "activities": a1 + "," + a2, "reserved": "0"}, f,
		"built by the commit: the authority as of its seq")
	require.NotEmpty(t, f["gen"])
	ttl, err := rdb.PTTL(ctx, capacity.PoolKey(p)).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, 50*time.Second, "the TTL is set at the build")
	require.Equal(t, p+","+q, activityFields(t, rdb, a1)["pools"], "the activity's counter knows its pools")

	// Older seq and older version: nothing moves.
	c.Committed(ctx, []registration.Commit{commit(a2, 20, 0, 1, []registration.PoolSeatState{
		poolState(p, 12, 2, 4, epoch.Add(-time.Second), a1, a2)})})
	f = poolFields(t, rdb, p)
	require.Equal(t, [3]string{"3", "10", "5"}, [3]string{f["taken"], f["capacity"], f["seq"]}, "an older state never steps back")

	// A newer version with an older seq moves the capacity alone.
	c.Committed(ctx, []registration.Commit{{Pools: []registration.PoolSeatState{poolState(p, 8, 1, 4, epoch.Add(time.Second), a1, a2)}}})
	f = poolFields(t, rdb, p)
	require.Equal(t, [3]string{"3", "8", "5"}, [3]string{f["taken"], f["capacity"], f["seq"]})

	// A newer seq with an older version moves taken alone.
	c.Committed(ctx, []registration.Commit{commit(a2, 20, 3, 2, []registration.PoolSeatState{poolState(p, 30, 6, 7, epoch, a1, a2)})})
	f = poolFields(t, rdb, p)
	require.Equal(t, [3]string{"6", "8", "7"}, [3]string{f["taken"], f["capacity"], f["seq"]})

	// Two commits of one batch carry the pool: the newest state is taken.
	c.Committed(ctx, []registration.Commit{
		commit(a1, 20, 3, 3, []registration.PoolSeatState{poolState(p, 8, 7, 9, epoch, a1, a2)}),
		commit(a2, 20, 4, 3, []registration.PoolSeatState{poolState(p, 8, 9, 8, epoch, a1, a2)}),
	})
	require.Equal(t, "7", poolFields(t, rdb, p)["taken"], "the newest seq of the batch")

	// The activity leaves its pools: its counter's pools follow the newer
	// commit, and never an older one.
	c.Committed(ctx, []registration.Commit{commit(a1, 20, 3, 4, nil)})
	require.Equal(t, "", activityFields(t, rdb, a1)["pools"])
	c.Committed(ctx, []registration.Commit{commit(a1, 20, 3, 2, []registration.PoolSeatState{poolState(q, 7, 2, 2, epoch, a1)})})
	require.Equal(t, "", activityFields(t, rdb, a1)["pools"], "an older commit does not bring the pools back")
}

func TestTheGateHoldsInTheActivityAndItsPoolsAndGivesBackOnRefusal(t *testing.T) {
	t.Parallel()
	c, rdb := redisOnly(t)
	ctx := context.Background()
	a, p1, p2 := newID("a"), newID("p"), newID("p")
	pools := func(seq int64, taken1, taken2 int) []registration.PoolSeatState {
		return []registration.PoolSeatState{poolState(p1, 3, taken1, seq, epoch, a), poolState(p2, 5, taken2, seq, epoch, a)}
	}
	helds := func() [3]string {
		return [3]string{activityFields(t, rdb, a)["held"], poolFields(t, rdb, p1)["held"], poolFields(t, rdb, p2)["held"]}
	}
	c.Committed(ctx, []registration.Commit{commit(a, 10, 0, 1, pools(1, 1, 0))})

	h, err := c.Reserve(ctx, a, 2)
	require.NoError(t, err)
	require.Equal(t, 2, h.Seats)
	require.Len(t, h.Pools, 2)
	require.Equal(t, [2]string{p1, p2}, [2]string{h.Pools[0].PoolID, h.Pools[1].PoolID})
	require.Equal(t, h.Gen, h.Pools[0].Gen, "one hold, one id in every counter")
	require.Equal(t, 2, h.Pools[1].Seats)
	require.Equal(t, [3]string{"2", "2", "2"}, helds(), "held in the activity and in every pool")

	_, err = c.Reserve(ctx, a, 1)
	require.ErrorIs(t, err, registration.ErrGateFull, "p1: 3 - 1 taken - 2 held")
	require.Equal(t, [3]string{"2", "2", "2"}, helds(), "the refusal gave back what it held")

	on := registration.Commit{ActivityID: a, ActivityChanged: true, Pools: pools(1, 1, 0), State: registration.SeatState{
		Capacity: 10, Waitlist: true, LastSeq: 1, UpdatedAt: epoch.Add(time.Second), Pools: pools(1, 1, 0)}}
	c.Committed(ctx, []registration.Commit{on})
	_, err = c.Reserve(ctx, a, 1)
	require.ErrorIs(t, err, registration.ErrGateWaitlist, "no room in a pool, and the activity keeps a waiting list")
	require.Equal(t, [3]string{"2", "2", "2"}, helds())

	c.Committed(ctx, []registration.Commit{{ActivityID: a, Failed: true, Holds: []registration.Hold{h}}})
	require.Equal(t, [3]string{"0", "0", "0"}, helds(), "a failed transaction gives every hold back")

	// A missing pool counter: the authority decides, nothing stays held.
	require.NoError(t, rdb.Del(ctx, capacity.PoolKey(p2)).Err())
	_, err = c.Reserve(ctx, a, 1)
	require.ErrorIs(t, err, capacity.ErrNoCounter)
	require.Equal(t, "0", activityFields(t, rdb, a)["held"])
	require.Equal(t, "0", poolFields(t, rdb, p1)["held"])
	c.Committed(ctx, []registration.Commit{commit(a, 10, 0, 2, pools(2, 1, 0))})
	require.Equal(t, "5", poolFields(t, rdb, p2)["capacity"], "the commit built the pool's counter")

	// A commit gives its holds back and sets the pools' taken.
	h2, err := c.Reserve(ctx, a, 1)
	require.NoError(t, err)
	c.Committed(ctx, []registration.Commit{commit(a, 10, 1, 3, pools(3, 2, 1), h2)})
	require.Equal(t, [3]string{"0", "0", "0"}, helds())
	require.Equal(t, [2]string{"2", "1"}, [2]string{poolFields(t, rdb, p1)["taken"], poolFields(t, rdb, p2)["taken"]})

	// A pool hold of an older generation is not given back to a rebuilt
	// pool counter.
	h3, err := c.Reserve(ctx, a, 1)
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, capacity.PoolKey(p2)).Err())
	c.Committed(ctx, []registration.Commit{commit(a, 10, 1, 4, pools(4, 2, 1))})
	_, err = c.Reserve(ctx, a, 1)
	require.ErrorIs(t, err, registration.ErrGateWaitlist, "p1 has no room: 3 - 2 taken - 1 held")
	require.Equal(t, [3]string{"1", "1", "0"}, helds())
	c.Committed(ctx, []registration.Commit{{ActivityID: a, Failed: true, Holds: []registration.Hold{h3}}})
	require.Equal(t, [3]string{"0", "0", "0"}, helds())
}

// TestManySignupsInActivitiesOfOnePoolNeverHoldMoreThanItsFreeSeats:
// goroutines reserve at once in three activities of one pool; the pool
// holds exactly its free seats (single seats) or never more (parties),
// the activities' holds are those of the signups that got them, and
// giving them all back at once leaves nothing held.
func TestManySignupsInActivitiesOfOnePoolNeverHoldMoreThanItsFreeSeats(t *testing.T) {
	t.Parallel()
	c, rdb := redisOnly(t)
	ctx := context.Background()
	p := newID("p")
	acts := []string{newID("a"), newID("a"), newID("a")}
	state := poolState(p, 10, 2, 1, epoch, acts...)
	for _, a := range acts {
		c.Committed(ctx, []registration.Commit{commit(a, 100, 0, 1, []registration.PoolSeatState{state})})
	}
	type held struct {
		activity string
		hold     registration.Hold
	}
	for _, parties := range []bool{false, true} {
		var mu sync.Mutex
		var holds []held
		perActivity := make(map[string]int)
		var refused atomic.Int64
		var wg sync.WaitGroup
		for g := range 90 {
			wg.Go(func() {
				a := acts[g%3]
				seats := 1
				if parties {
					seats = 1 + rand.IntN(3)
				}
				h, err := c.Reserve(ctx, a, seats)
				if err != nil {
					if !errors.Is(err, registration.ErrGateFull) {
						t.Errorf("reserve %d seats in %s: %v", seats, a, err)
					}
					refused.Add(1)
					return
				}
				mu.Lock()
				holds = append(holds, held{a, h})
				perActivity[a] += h.Seats
				mu.Unlock()
			})
		}
		wg.Wait()
		total := 0
		for _, h := range holds {
			total += h.hold.Seats
			require.Len(t, h.hold.Pools, 1)
		}
		if parties {
			require.LessOrEqual(t, total, 8, "never more than the pool's free seats")
			require.Greater(t, total, 5, "a refusal only when fewer than a party's seats were left")
		} else {
			require.Equal(t, 8, total, "exactly the pool's free seats")
		}
		require.Equal(t, strconv.Itoa(total), poolFields(t, rdb, p)["held"])
		for _, a := range acts {
			require.Equal(t, strconv.Itoa(perActivity[a]), activityFields(t, rdb, a)["held"], "refused signups gave back their holds")
		}
		t.Logf("parties %t: %d seats held by %d signups, %d refused", parties, total, len(holds), refused.Load())

		for _, h := range holds {
			wg.Go(func() {
				c.Committed(ctx, []registration.Commit{{ActivityID: h.activity, Failed: true, Holds: []registration.Hold{h.hold}}})
			})
		}
		wg.Wait()
		require.Equal(t, "0", poolFields(t, rdb, p)["held"])
		for _, a := range acts {
			require.Equal(t, "0", activityFields(t, rdb, a)["held"])
		}
	}
}

// TestSeatsShowTheFewestLeftOfTheActivityAndItsPools: a seat read's
// remaining is the least of the activity's and its pools' seats left
// (holds counted as taken), from the counters while they are warm, from
// the authority when one is missing (which rebuilds it); a cached read
// with a pool counter missing says so.
func TestSeatsShowTheFewestLeftOfTheActivityAndItsPools(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a1, a2 := b.activity(t, 10, false), b.activity(t, 10, false)
	p := b.pool(t, 4, a1, a2)
	b.admit(t, a1, "u1")
	b.admit(t, a2, "u2", "u3")

	s := b.seats(t, a1)
	require.Equal(t, registration.SourceDatabase, s.Source, "no counter: rebuilt")
	require.Equal(t, [4]int{10, 1, 1, 0}, [4]int{s.Capacity, s.Taken, s.Remaining, s.Waiting}, "the pool leaves 1 of 4")
	s = b.seats(t, a1)
	require.Equal(t, registration.SourceCache, s.Source)
	require.Equal(t, [3]int{10, 1, 1}, [3]int{s.Capacity, s.Taken, s.Remaining})
	require.Equal(t, p, b.fields(t, a1)["pools"])
	require.Equal(t, "3", poolFields(t, b.rdb, p)["taken"], "the pool's counter was built with the activity's")

	_, err := b.counter.Reserve(ctx, a2, 1) // a2's counter is missing: the authority decides
	require.ErrorIs(t, err, capacity.ErrNoCounter)
	b.seats(t, a2)
	_, err = b.counter.Reserve(ctx, a2, 1)
	require.NoError(t, err)
	s = b.seats(t, a1)
	require.Equal(t, [2]int{1, 0}, [2]int{s.Taken, s.Remaining}, "a hold in another activity of the pool shows here")
	s, ok := b.counter.CachedSeats(ctx, a1)
	require.True(t, ok)
	require.Equal(t, [3]int{1, 0, 10}, [3]int{s.Taken, s.Remaining, s.Capacity})

	require.NoError(t, b.rdb.Del(ctx, capacity.PoolKey(p)).Err())
	_, ok = b.counter.CachedSeats(ctx, a1)
	require.False(t, ok, "a pool counter missing: not warm")
	s = b.seats(t, a1)
	require.Equal(t, registration.SourceDatabase, s.Source)
	require.Equal(t, 1, s.Remaining, "the authority's: the hold went with the counter")
	require.Equal(t, "3", poolFields(t, b.rdb, p)["taken"], "rebuilt")
	s, ok = b.counter.CachedSeats(ctx, a1)
	require.True(t, ok)
	require.Equal(t, 1, s.Remaining)

	nocache := capacity.New(capacity.Config{Authority: b.store})
	s, err = nocache.Seats(ctx, a1)
	require.NoError(t, err)
	require.Equal(t, [3]int{10, 1, 1}, [3]int{s.Capacity, s.Taken, s.Remaining}, "the authority takes the pool's min too")
}

// TestACommitOfAPoolAloneSettlesThePool: a pool's own change (a commit
// without an activity) settles the pool's counter alone, and the seats of
// its activities show it.
func TestACommitOfAPoolAloneSettlesThePool(t *testing.T) {
	t.Parallel()
	c, rdb := redisOnly(t)
	ctx := context.Background()
	a, p := newID("a"), newID("p")
	c.Committed(ctx, []registration.Commit{commit(a, 10, 0, 1, []registration.PoolSeatState{poolState(p, 4, 1, 3, epoch, a)})})
	s, err := c.Seats(ctx, a)
	require.NoError(t, err)
	require.Equal(t, 3, s.Remaining)
	before := activityFields(t, rdb, a)

	c.Committed(ctx, []registration.Commit{{Pools: []registration.PoolSeatState{poolState(p, 6, 1, 4, epoch.Add(time.Second), a)}}})
	require.Equal(t, "6", poolFields(t, rdb, p)["capacity"])
	s, err = c.Seats(ctx, a)
	require.NoError(t, err)
	require.Equal(t, 5, s.Remaining, "the raise shows in the activity")
	require.Equal(t, before, activityFields(t, rdb, a), "the activity's counter is not touched")
	n, err := rdb.Exists(ctx, capacity.Key("")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "no counter of an activity \"\"")

	c.Committed(ctx, []registration.Commit{{Pools: []registration.PoolSeatState{poolState(p, 1, 1, 5, epoch.Add(2*time.Second), a)}}})
	s, err = c.Seats(ctx, a)
	require.NoError(t, err)
	require.Equal(t, [2]int{0, 10}, [2]int{s.Remaining, s.Capacity}, "a pool lowered to its taken leaves none")
}

func TestPoolSeatsReadTheCounterOrTheAuthority(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a := b.activity(t, 10, false)
	p := b.pool(t, 5, a)
	b.admit(t, a, "u1")

	st, source, err := b.counter.PoolSeats(ctx, p)
	require.NoError(t, err)
	require.Equal(t, registration.SourceDatabase, source, "no counter: rebuilt")
	require.Equal(t, [2]int{5, 1}, [2]int{st.Capacity, st.Taken})
	require.Equal(t, []string{a}, st.Activities)
	cached, source, err := b.counter.PoolSeats(ctx, p)
	require.NoError(t, err)
	require.Equal(t, registration.SourceCache, source)
	require.Equal(t, st, cached, "the counter holds what the authority said")

	b.seats(t, a)
	_, err = b.counter.Reserve(ctx, a, 2)
	require.NoError(t, err)
	st, _, err = b.counter.PoolSeats(ctx, p)
	require.NoError(t, err)
	require.Equal(t, [2]int{3, 2}, [2]int{st.Taken, st.Remaining()}, "holds count as taken")

	_, _, err = b.counter.PoolSeats(ctx, "p_00000000000000000000000000")
	require.Equal(t, capacityd.ENotFound, capacityd.ErrorCode(err))
	st, source, err = capacity.New(capacity.Config{Authority: b.store}).PoolSeats(ctx, p)
	require.NoError(t, err)
	require.Equal(t, registration.SourceDatabase, source)
	require.Equal(t, 1, st.Taken)
}

// TestTheReconcilerCorrectsAPoolCounter: seats held in a pool by a signup
// that never finished are dropped once the drift persists over a quiet
// interval, as an activity's.
func TestTheReconcilerCorrectsAPoolCounter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a := b.activity(t, 10, false)
	p := b.pool(t, 5, a)
	b.seats(t, a)
	_, err := b.counter.Reserve(ctx, a, 2) // never committed
	require.NoError(t, err)
	r := capacity.NewReconciler(b.counter)
	r.Pass(ctx)
	require.Equal(t, "2", poolFields(t, b.rdb, p)["held"], "one pass: maybe a signup in flight")
	r.Pass(ctx)
	require.Equal(t, "0", poolFields(t, b.rdb, p)["held"], "the drift persisted: corrected")
	require.Equal(t, "0", b.fields(t, a)["held"])
}

// TestTheGateOnARedisClusterAcrossSlots: an activity's counter and its
// pool's live on different masters of a Redis Cluster; the gate holds in
// both, refuses and gives back, commits settle both, reads take the min.
// TestTheGateFollowsAnActivityIntoOtherPools: the gate of an activity
// whose pools this process remembers holds the seats in the pools its
// counter names now, after the activity left one pool and joined another.
func TestTheGateFollowsAnActivityIntoOtherPools(t *testing.T) {
	t.Parallel()
	c, rdb := redisOnly(t)
	ctx := context.Background()
	a, p1, p2 := newID("a"), newID("p"), newID("p")
	c.Committed(ctx, []registration.Commit{commit(a, 10, 0, 1, []registration.PoolSeatState{poolState(p1, 5, 0, 1, epoch, a)})})
	h, err := c.Reserve(ctx, a, 1)
	require.NoError(t, err)
	require.Equal(t, p1, h.Pools[0].PoolID)
	c.Committed(ctx, []registration.Commit{{ActivityID: a, Failed: true, Holds: []registration.Hold{h}}})

	moved := commit(a, 10, 0, 2, []registration.PoolSeatState{poolState(p2, 1, 0, 1, epoch, a)})
	moved.ActivityChanged = true
	c.Committed(ctx, []registration.Commit{moved})
	require.Equal(t, p2, activityFields(t, rdb, a)["pools"])

	h, err = c.Reserve(ctx, a, 1)
	require.NoError(t, err)
	require.Len(t, h.Pools, 1)
	require.Equal(t, p2, h.Pools[0].PoolID)
	require.Equal(t, [2]string{"0", "1"}, [2]string{poolFields(t, rdb, p1)["held"], poolFields(t, rdb, p2)["held"]})
	_, err = c.Reserve(ctx, a, 1)
	require.ErrorIs(t, err, registration.ErrGateFull, "p2 has one seat, held")
	require.Equal(t, "1", activityFields(t, rdb, a)["held"], "the refusal held nothing")

	left := commit(a, 10, 0, 3, nil)
	left.ActivityChanged = true
	c.Committed(ctx, []registration.Commit{left})
	h2, err := c.Reserve(ctx, a, 1)
	require.NoError(t, err, "in no pool any more")
	require.Empty(t, h2.Pools)
}

func TestTheGateOnARedisClusterAcrossSlots(t *testing.T) {
	t.Parallel()
	cluster := testenv.PrivateRedisCluster(t)
	cc := cluster.Client(t)
	c := capacity.New(capacity.Config{Redis: cc, TTL: time.Minute})
	ctx := context.Background()
	a, p := newID("a"), newID("p")
	for cluster.MasterOf(t, capacity.Key(a)).Addr == cluster.MasterOf(t, capacity.PoolKey(p)).Addr {
		p = newID("p")
	}
	pools := func(seq int64, taken int) []registration.PoolSeatState {
		return []registration.PoolSeatState{poolState(p, 3, taken, seq, epoch, a)}
	}
	c.Committed(ctx, []registration.Commit{commit(a, 10, 0, 1, pools(1, 1))})
	require.Equal(t, "3", poolFields(t, cc, p)["capacity"])
	require.Equal(t, p, activityFields(t, cc, a)["pools"])

	h, err := c.Reserve(ctx, a, 2)
	require.NoError(t, err)
	require.Len(t, h.Pools, 1)
	_, err = c.Reserve(ctx, a, 1)
	require.ErrorIs(t, err, registration.ErrGateFull)
	require.Equal(t, [2]string{"2", "2"}, [2]string{activityFields(t, cc, a)["held"], poolFields(t, cc, p)["held"]})
	s, err := c.Seats(ctx, a)
	require.NoError(t, err)
	require.Equal(t, [3]int{10, 2, 0}, [3]int{s.Capacity, s.Taken, s.Remaining})

	c.Committed(ctx, []registration.Commit{commit(a, 10, 2, 2, pools(2, 3), h)})
	require.Equal(t, [2]string{"0", "0"}, [2]string{activityFields(t, cc, a)["held"], poolFields(t, cc, p)["held"]})
	require.Equal(t, "3", poolFields(t, cc, p)["taken"])
	s, ok := c.CachedSeats(ctx, a)
	require.True(t, ok)
	require.Equal(t, [2]int{2, 0}, [2]int{s.Taken, s.Remaining})
}
