package capacity

import "context"

// Channel is the Redis pub/sub channel on which every instance announces
// the ids of activities whose seats changed.
const Channel = "capacityd:seats"

// Changed announces that the activity's seats changed, to the SSE streams of
// every instance. Without a display tier it does nothing; a Redis error is
// counted and logged, and streams catch up at their next refresh.
func (c *Counter) Changed(ctx context.Context, activityID string) {
	c.touch(activityID)
	if c.usable() != nil {
		return
	}
	if err := c.rdb.Publish(ctx, Channel, activityID).Err(); err != nil {
		_ = c.redisError("publish", err)
	}
}
