// Package sharedlimit counts rate-limited attempts in Redis, so that every
// instance of the service draws on one bucket per key: n instances behind
// a load balancer allow what one would, not n times as much.
package sharedlimit

import (
	"context"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Limiter is a token bucket per key kept in Redis (the generic cell rate
// algorithm of redis_rate, one script per attempt).
type Limiter struct {
	rdb    *redis_rate.Limiter
	prefix string
}

// New returns a Limiter on rdb whose keys all begin with prefix (the
// bucket of key k is the Redis key "rate:<prefix><k>").
func New(rdb redis.UniversalClient, prefix string) *Limiter {
	return &Limiter{rdb: redis_rate.NewLimiter(rdb), prefix: prefix}
}

// Allow takes one attempt of key's bucket, which refills at perSecond
// and holds at most burst. It returns false and how long until the next
// attempt is allowed when the bucket is empty, and an error when Redis
// cannot answer (the caller decides on its own then).
func (l *Limiter) Allow(ctx context.Context, key string, perSecond float64, burst int) (bool, time.Duration, error) {
	limit := redis_rate.Limit{Rate: 1, Burst: burst, Period: time.Duration(float64(time.Second) / perSecond)}
	res, err := l.rdb.Allow(ctx, l.prefix+key, limit)
	if err != nil {
		return false, 0, err
	}
	return res.Allowed > 0, res.RetryAfter, nil
}
