package testenv

import (
	"context"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisURL returns the URL of the shared test Redis.
func RedisURL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// RedisClient returns a client of url with the service's short timeouts,
// closed when t ends.
func RedisClient(t T, url string) *redis.Client {
	t.Helper()
	SkipShort(t, "Redis")
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = time.Second, 500*time.Millisecond, 500*time.Millisecond, time.Second
	opt.MaxRetries = 1
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Redis returns a client of the shared test Redis. Tests share it: keys are
// per activity and activity ids are unique, so tests never collide; a test
// that flushes or kills Redis must use PrivateRedis.
func Redis(t T) *redis.Client {
	t.Helper()
	SkipShort(t, "Redis (TEST_REDIS_URL)")
	c := RedisClient(t, RedisURL())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("testenv: shared Redis at %s: %v", RedisURL(), err)
	}
	return c
}
