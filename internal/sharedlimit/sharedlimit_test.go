package sharedlimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/sharedlimit"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// TestInstancesShareOneBucketPerKey: two limiters on two clients of one
// Redis (two instances) draw on one bucket per key: whichever takes the
// attempts, and however many at once, exactly the burst is allowed, and
// the refusal says how long to wait. Another key has its own bucket.
func TestInstancesShareOneBucketPerKey(t *testing.T) {
	t.Parallel()
	srv := testenv.PrivateRedis(t)
	url := "redis://" + srv.Addr
	limiters := []*sharedlimit.Limiter{
		sharedlimit.New(testenv.RedisClient(t, url), "codes:"),
		sharedlimit.New(testenv.RedisClient(t, url), "codes:"),
	}
	ctx := context.Background()
	for i := range 3 {
		ok, _, err := limiters[i%2].Allow(ctx, "alice", 0.001, 3)
		require.NoError(t, err)
		require.True(t, ok, "attempt %d of a burst of 3", i+1)
	}
	for _, l := range limiters {
		ok, wait, err := l.Allow(ctx, "alice", 0.001, 3)
		require.NoError(t, err)
		require.False(t, ok, "the bucket is shared")
		require.Greater(t, wait, 900*time.Second, "one attempt per 1000 s")
	}
	ok, _, err := limiters[1].Allow(ctx, "bob", 0.001, 3)
	require.NoError(t, err)
	require.True(t, ok, "another key, another bucket")

	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := range 40 {
		wg.Go(func() {
			ok, _, err := limiters[g%2].Allow(ctx, "carol", 0.001, 5)
			if err != nil {
				t.Error(err)
			}
			if ok {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 5, allowed.Load(), "40 attempts at once over two instances")
}

// TestALimiterWithoutRedisSaysSo: an attempt that cannot reach Redis is
// an error, not an answer, so that the caller can count it itself.
func TestALimiterWithoutRedisSaysSo(t *testing.T) {
	t.Parallel()
	srv := testenv.PrivateRedis(t)
	l := sharedlimit.New(testenv.RedisClient(t, "redis://"+srv.Addr), "codes:")
	srv.Kill()
	ok, _, err := l.Allow(context.Background(), "alice", 1, 1)
	require.Error(t, err)
	require.False(t, ok)
}
