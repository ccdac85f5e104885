package main

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestClusterClientHasTheSingleNodeTimeoutsAndRetries(t *testing.T) {
	single, err := openRedis(config{RedisURL: "redis://127.0.0.1:1/0"})
	require.NoError(t, err)
	defer single.Close()
	cluster, err := openRedis(config{RedisClusterAddrs: []string{"127.0.0.1:1", "127.0.0.1:2"}})
	require.NoError(t, err)
	defer cluster.Close()

	so, co := single.(*redis.Client).Options(), cluster.(*redis.ClusterClient).Options()
	require.Equal(t, []string{"127.0.0.1:1", "127.0.0.1:2"}, co.Addrs)
	require.Equal(t, so.DialTimeout, co.DialTimeout)
	require.Equal(t, so.ReadTimeout, co.ReadTimeout)
	require.Equal(t, so.WriteTimeout, co.WriteTimeout)
	require.Equal(t, so.PoolTimeout, co.PoolTimeout)
	require.Equal(t, so.MaxRetries, co.MaxRetries)
	require.Equal(t, 1, co.MaxRetries)
	require.Equal(t, clusterStateReload, co.ClusterStateReloadInterval)
}
