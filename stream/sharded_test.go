package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/stream"
)

// shardChannels returns the shard channels with subscribers on one node.
func shardChannels(t *testing.T, c *testenv.RedisCluster, n *testenv.RedisServer) []string {
	t.Helper()
	chans, err := c.Node(t, n).PubSubShardChannels(context.Background(), "*").Result()
	require.NoError(t, err)
	return chans
}

func TestAnnouncementsOnARedisClusterAreSharded(t *testing.T) {
	t.Parallel()
	cluster := testenv.PrivateRedisCluster(t)
	a := startNotifier(t, cluster.Client(t), 0)
	b := startNotifier(t, cluster.Client(t), 0)
	ids := []string{activity(t), activity(t), activity(t), activity(t), activity(t), activity(t)}
	var watches []<-chan struct{}
	for _, id := range ids {
		ch, stop := b.Watch(id)
		defer stop()
		watches = append(watches, ch)
	}
	require.Eventually(t, b.Healthy, 5*time.Second, 5*time.Millisecond, "every watched activity's channel subscribed")
	for _, ch := range watches {
		signalled(ch, 100*time.Millisecond) // the poke of each confirmation
	}

	for i, id := range ids {
		a.Announce(context.Background(), id)
		require.True(t, signalled(watches[i], time.Second), "the other instance hears %s through its shard channel", id)
	}
	// Each channel is subscribed on the master of its slot alone, which is
	// the master of the activity's counter; nothing uses plain pub/sub.
	for _, id := range ids {
		owner := cluster.MasterOf(t, "seats:{"+id+"}")
		for _, n := range cluster.Nodes {
			if n == owner {
				require.Contains(t, shardChannels(t, cluster, n), stream.ShardChannel(id))
			} else {
				require.NotContains(t, shardChannels(t, cluster, n), stream.ShardChannel(id))
			}
			numsub, err := cluster.Node(t, n).PubSubNumSub(context.Background(), stream.Channel).Result()
			require.NoError(t, err)
			require.Zero(t, numsub[stream.Channel], "no plain subscription on %s", n.Addr)
		}
	}
}

func TestShardChannelsFollowWatchers(t *testing.T) {
	t.Parallel()
	cluster := testenv.PrivateRedisCluster(t)
	n := startNotifier(t, cluster.Client(t), 0)
	other := startNotifier(t, cluster.Client(t), 0)
	id := activity(t)
	owner := cluster.MasterOf(t, stream.ShardChannel(id))
	_, stop1 := n.Watch(id)
	left, stop2 := n.Watch(id)
	require.Eventually(t, func() bool { return contains(shardChannels(t, cluster, owner), stream.ShardChannel(id)) },
		5*time.Second, 10*time.Millisecond)
	require.Eventually(t, n.Healthy, 5*time.Second, 5*time.Millisecond)
	stop1()
	// With one watcher left the channel stays subscribed: the watcher
	// still hears an announcement made on another instance after the
	// first watcher left.
	select {
	case <-left:
	default:
	}
	other.Announce(context.Background(), id)
	require.True(t, signalled(left, time.Second), "the watcher left hears the other instance")
	require.Contains(t, shardChannels(t, cluster, owner), stream.ShardChannel(id), "one watcher left")
	stop2()
	require.Eventually(t, func() bool { return !contains(shardChannels(t, cluster, owner), stream.ShardChannel(id)) },
		5*time.Second, 10*time.Millisecond, "unsubscribed with the last watcher")
}

func TestShardSubscriptionsMoveToThePromotedReplica(t *testing.T) {
	t.Parallel()
	cluster := testenv.PrivateRedisCluster(t)
	a := startNotifier(t, cluster.Client(t), 50*time.Millisecond)
	b, losses := startCountedNotifier(t, cluster.Client(t), 50*time.Millisecond)
	id := activity(t)
	ch, stop := b.Watch(id)
	defer stop()
	require.Eventually(t, b.Healthy, 5*time.Second, 5*time.Millisecond)
	require.Zero(t, losses())

	master := cluster.MasterOf(t, stream.ShardChannel(id))
	master.Kill()
	require.Eventually(t, func() bool { return !b.Healthy() }, 5*time.Second, 5*time.Millisecond)
	require.GreaterOrEqual(t, losses(), 1.0, "the failed shard connection is counted before the instance shows as unsubscribed")
	require.True(t, b.Polling(), "watchers are poked on a timer while the subscription is down")
	cluster.WaitHealthy(t)
	promoted := cluster.MasterOf(t, stream.ShardChannel(id))
	require.NotEqual(t, master.Addr, promoted.Addr)
	require.Eventually(t, b.Healthy, 10*time.Second, 10*time.Millisecond, "subscribed again on the promoted replica")
	require.Contains(t, shardChannels(t, cluster, promoted), stream.ShardChannel(id))

	// Announcements flow again once the publisher's suspension is over.
	require.Eventually(t, func() bool {
		for len(ch) > 0 {
			<-ch
		}
		a.Announce(context.Background(), id)
		return signalled(ch, 200*time.Millisecond) && !b.Polling()
	}, 15*time.Second, 10*time.Millisecond)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
