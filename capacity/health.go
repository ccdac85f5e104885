package capacity

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Ping checks that the display tier answers.
func (c *Counter) Ping(ctx context.Context) error {
	if c.rdb == nil {
		return ErrNoCache
	}
	return c.rdb.Ping(ctx).Err()
}

// usable says whether Redis may be asked now: there is a display tier and
// it is not suspended after a recent error.
func (c *Counter) usable() error {
	if c.rdb == nil {
		return ErrNoCache
	}
	if time.Now().UnixNano() < c.suspendedUntil.Load() {
		return ErrSuspended
	}
	return nil
}

// recovered runs after a successful Redis call. After an outage it deletes
// the counters of the activities changed recently, so that the next commit
// or read rebuilds them from the authority: while Redis could not be
// reached, signups and cancellations went to the authority alone.
func (c *Counter) recovered(ctx context.Context) {
	if !c.stale.CompareAndSwap(true, false) {
		return
	}
	c.activeMu.Lock()
	ids := make([]string, 0, len(c.active))
	for id := range c.active {
		ids = append(ids, id)
	}
	pools := make([]string, 0, len(c.activePools))
	for id := range c.activePools {
		pools = append(pools, id)
	}
	c.activeMu.Unlock()
	for _, id := range pools {
		if err := c.rdb.Del(ctx, PoolKey(id), HoldsKey(PoolKey(id))).Err(); err != nil {
			c.stale.Store(true)
			return
		}
	}
	for _, id := range ids {
		if err := c.rdb.Del(ctx, Key(id), HoldsKey(Key(id))).Err(); err != nil {
			c.stale.Store(true)
			return
		}
		// Streams missed the changes made while Redis was away.
		c.announce(ctx, id)
	}
	c.log.Info("redis display tier back; counters of recently active activities and pools invalidated",
		"count", len(ids), "pools", len(pools))
}

// redisError counts err, suspends the display tier for a moment, logs at
// most once a second, and returns err wrapped.
//
// A request that ended (its client went away, its deadline passed) is not a
// Redis failure: that error is returned as it is, with no suspension.
func (c *Counter) redisError(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("capacity: redis %s: %w", op, err)
	}
	c.metrics.redisErrors.WithLabelValues(op).Inc()
	c.stale.Store(true)
	c.suspendedUntil.Store(time.Now().Add(suspension).UnixNano())
	c.logMu.Lock()
	if now := time.Now(); now.Sub(c.lastLog) >= time.Second {
		c.lastLog = now
		c.logMu.Unlock()
		c.log.Warn("redis display tier error; falling back to the authority", "op", op, "err", err)
	} else {
		c.logMu.Unlock()
	}
	return fmt.Errorf("capacity: redis %s: %w", op, err)
}
