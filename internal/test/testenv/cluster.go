package testenv

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster is a Redis Cluster of the test's own: three masters with a
// replica each, redis-server processes on loopback ports, without
// persistence but with their cluster configuration kept in a temporary
// folder, so a killed node restarted rejoins as itself.
type RedisCluster struct {
	// Nodes are every node, masters and replicas as created.
	Nodes []*RedisServer
	// Addrs are the nodes' host:port, the seeds of a cluster client.
	Addrs []string
}

// clusterNodeTimeout is how long the nodes wait before they hold a
// silent master failed and promote its replica.
const clusterNodeTimeout = 1000 * time.Millisecond

// PrivateRedisCluster starts six redis-server nodes, joins them into a
// cluster of three masters with a replica each (redis-cli --cluster
// create) and waits until every node reports cluster_state:ok. The nodes
// are killed when t ends.
func PrivateRedisCluster(t T) *RedisCluster {
	t.Helper()
	SkipShort(t, "a private Redis cluster")
	bin, err := exec.LookPath("redis-server")
	Require(t, err == nil, "redis-server")
	cli, err := exec.LookPath("redis-cli")
	Require(t, err == nil, "redis-cli")
	dir := t.TempDir()
	c := &RedisCluster{}
	for i := range 6 {
		n := startRedis(t, func(port int) *RedisServer {
			return redisOn(t, "redis-cluster", bin, port, "--cluster-port", strconv.Itoa(FreePort(t)),
				"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d-%d.conf", i, port)),
				"--cluster-node-timeout", strconv.FormatInt(clusterNodeTimeout.Milliseconds(), 10),
				// A replica may take over however long ago it last heard
				// from its master, and replicas sync at once.
				"--cluster-replica-validity-factor", "0", "--repl-diskless-sync-delay", "0", "--dir", dir)
		})
		t.Cleanup(n.Kill)
		c.Nodes, c.Addrs = append(c.Nodes, n), append(c.Addrs, n.Addr)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("testenv: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy(t)
	return c
}

// Client returns a cluster client with the service's settings (short
// timeouts, one retry, the topology reloaded every second), closed when t
// ends.
func (c *RedisCluster) Client(t T) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: c.Addrs, DialTimeout: time.Second, ReadTimeout: 500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond, PoolTimeout: time.Second, MaxRetries: 1,
		ClusterStateReloadInterval: time.Second,
	})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// node returns a plain client of one node, closed when t ends.
func node(t T, addr string) *redis.Client {
	t.Helper()
	n := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second})
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// WaitHealthy waits until every running node reports cluster_state:ok,
// every slot is served by a running master as every node sees it, and
// every replica is in sync with its master (so that it can take over).
func (c *RedisCluster) WaitHealthy(t T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.healthy()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: Redis Cluster not healthy within 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// slotRange is a range of slots and the address of the master serving
// it, as one node sees the cluster.
type slotRange struct {
	start, end int64
	master     string
}

// slotMasters returns the masters of the slot ranges as the node behind
// cl sees them (CLUSTER SHARDS).
func slotMasters(ctx context.Context, cl *redis.Client) ([]slotRange, error) {
	shards, err := cl.ClusterShards(ctx).Result()
	if err != nil {
		return nil, err
	}
	var out []slotRange
	for _, sh := range shards {
		master := ""
		for _, n := range sh.Nodes {
			if n.Role == "master" {
				master = net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
			}
		}
		for _, r := range sh.Slots {
			out = append(out, slotRange{start: r.Start, end: r.End, master: master})
		}
	}
	return out, nil
}

func (c *RedisCluster) healthy() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: n.Addr, DialTimeout: time.Second, ReadTimeout: time.Second})
		info, err := cl.ClusterInfo(ctx).Result()
		var ranges []slotRange
		var repl string
		if err == nil {
			ranges, err = slotMasters(ctx, cl)
		}
		if err == nil {
			repl, err = cl.Info(ctx, "replication").Result()
		}
		_ = cl.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", n.Addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster_state is not ok:\n%s", n.Addr, info)
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("%s: a replica not in sync with its master", n.Addr)
		}
		covered := int64(0)
		for _, r := range ranges {
			if !c.running(r.master) {
				return fmt.Errorf("%s: slots %d-%d have no running master", n.Addr, r.start, r.end)
			}
			covered += r.end - r.start + 1
		}
		if covered != 16384 {
			return fmt.Errorf("%s: %d of 16384 slots served", n.Addr, covered)
		}
	}
	return nil
}

func (c *RedisCluster) running(addr string) bool {
	return c.byAddr(addr) != nil && c.byAddr(addr).Running()
}

func (c *RedisCluster) byAddr(addr string) *RedisServer {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// MasterOf returns the node that serves key's slot as its master, as a
// running node sees it.
func (c *RedisCluster) MasterOf(t T, key string) *RedisServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		cl := node(t, n.Addr)
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			continue
		}
		ranges, err := slotMasters(ctx, cl)
		if err != nil {
			continue
		}
		for _, r := range ranges {
			if m := c.byAddr(r.master); r.start <= slot && slot <= r.end && m != nil {
				return m
			}
		}
	}
	t.Fatalf("testenv: no master found for %q", key)
	return nil
}

// Node returns a plain client of one node (for commands about that node
// only, such as PUBSUB SHARDCHANNELS), closed when t ends.
func (c *RedisCluster) Node(t T, n *RedisServer) *redis.Client {
	t.Helper()
	return node(t, n.Addr)
}
