package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// scaleEnv is two instances on one deployment shape, and a way to flush
// its Redis.
type scaleEnv struct {
	insts []*apptest.Instance
	flush func(context.Context) error
}

// onRedisCluster starts two instances on one database and a Redis Cluster
// of three masters with a replica each, each instance with its own
// cluster client.
func onRedisCluster(t *testing.T) scaleEnv {
	cluster := testenv.PrivateRedisCluster(t)
	a := apptest.Start(t, apptest.Options{Redis: cluster.Client(t)})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL, Redis: cluster.Client(t)})
	admin := cluster.Client(t)
	return scaleEnv{insts: []*apptest.Instance{a, b}, flush: func(ctx context.Context) error {
		return admin.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FlushAll(ctx).Err() })
	}}
}

// throughPgBouncer starts two instances whose DATABASE_URL is a
// PgBouncer in transaction mode with 6 server connections for their 32
// (the URL a user writes: the pooler's address, nothing added), on a
// Redis of their own.
func throughPgBouncer(t *testing.T) scaleEnv {
	rs := testenv.PrivateRedis(t)
	bouncer := testenv.PrivatePgBouncer(t, testenv.DatabaseURL(), 6)
	url := bouncer.URL(testenv.NewDatabase(t))
	a := apptest.Start(t, apptest.Options{DatabaseURL: url, RedisURL: rs.URL()})
	b := apptest.Start(t, apptest.Options{DatabaseURL: url, RedisURL: rs.URL()})
	admin := testenv.RedisClient(t, rs.URL())
	return scaleEnv{insts: []*apptest.Instance{a, b}, flush: func(ctx context.Context) error {
		return admin.FlushAll(ctx).Err()
	}}
}

// TestScaledOutAdmissionIsExact runs the exactness checks with two
// instances on a Redis Cluster, and through PgBouncer in transaction mode.
func TestScaledOutAdmissionIsExact(t *testing.T) {
	t.Parallel()
	for name, start := range map[string]func(*testing.T) scaleEnv{
		"redis-cluster": onRedisCluster,
		"pgbouncer":     throughPgBouncer,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := start(t)
			t.Run("burst", func(t *testing.T) { burstFillsExactly(t, env) })
			t.Run("duplicates", func(t *testing.T) { duplicatesGetOneSeat(t, env) })
			t.Run("cancels", func(t *testing.T) { cancelsFreeSeatsOnce(t, env) })
			t.Run("flushed", func(t *testing.T) { flushingRedisNeverOversells(t, env) })
		})
	}
}

func burstFillsExactly(t *testing.T, env scaleEnv) {
	a := env.insts[0]
	id := a.CreateActivity(t, "burst", 100)
	counts := signupBurst(t, env.insts, id, "u", 800)
	require.Equal(t, map[int]int{201: 100, 409: 700}, counts)
	require.Equal(t, 100, a.AuthorityTaken(t, id))
	for _, inst := range env.insts {
		require.Equal(t, 100, displayTaken(t, inst, id))
	}
}

func duplicatesGetOneSeat(t *testing.T, env scaleEnv) {
	a := env.insts[0]
	id := a.CreateActivity(t, "duplicates", 100)
	statuses := make(map[string][]int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for u := range 40 {
		user := fmt.Sprint("dup", u)
		for k := range 4 {
			api := env.insts[k%len(env.insts)].API(t, user, false)
			wg.Go(func() {
				status := apptest.SignupStatus(api.Signup(t.Context(), id, client.SignupOptions{}))
				mu.Lock()
				statuses[user] = append(statuses[user], status)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	for user, got := range statuses {
		require.ElementsMatch(t, []int{201, 409, 409, 409}, got, user)
	}
	require.Equal(t, 40, a.AuthorityTaken(t, id))
	require.Equal(t, 40, displayTaken(t, a, id))
}

func cancelsFreeSeatsOnce(t *testing.T, env scaleEnv) {
	a, b := env.insts[0], env.insts[1]
	id := a.CreateActivity(t, "cancels", 20)
	var regs []string
	for i := range 20 {
		regs = append(regs, env.insts[i%2].MustSignup(t, id, fmt.Sprint("c", i)).ID)
	}
	var wg sync.WaitGroup
	for i, reg := range regs[:10] {
		for _, inst := range env.insts { // each cancel twice, on both instances
			owner := inst.API(t, fmt.Sprint("c", i), false)
			wg.Go(func() {
				_, err := owner.CancelRegistration(t.Context(), reg)
				require.NoError(t, err)
			})
		}
	}
	wg.Wait()
	require.Equal(t, 10, a.AuthorityTaken(t, id))
	require.Equal(t, 10, displayTaken(t, b, id), "ten seats freed, not twenty")
	counts := signupBurst(t, env.insts, id, "late", 100)
	require.Equal(t, map[int]int{201: 10, 409: 90}, counts)
	require.Equal(t, 20, a.AuthorityTaken(t, id))
	require.Equal(t, 20, displayTaken(t, a, id))
}

func flushingRedisNeverOversells(t *testing.T, env scaleEnv) {
	a := env.insts[0]
	id := a.CreateActivity(t, "flushed", 100)
	stop := make(chan struct{})
	highest := watchAuthority(t, a, id, stop)
	flushes := keepFlushing(stop, env.flush)
	counts := signupBurst(t, env.insts, id, "w1-", 1000)
	close(stop)

	require.Positive(t, <-flushes)
	require.LessOrEqual(t, <-highest, 100, "the authority never exceeds capacity")
	require.Equal(t, a.AuthorityTaken(t, id), counts[http.StatusCreated], "every 201 is a row, every row a 201")
	require.Zero(t, counts[-1]+counts[http.StatusInternalServerError]+counts[http.StatusServiceUnavailable], "%v", counts)
	counts2 := signupBurst(t, env.insts, id, "w2-", 300)
	require.Equal(t, 100, counts[http.StatusCreated]+counts2[http.StatusCreated])
	require.Equal(t, 100, a.AuthorityTaken(t, id))
	require.Equal(t, 100, displayTaken(t, a, id))
}
