package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/physiciansnet/capacityd/internal/testenv"
	"github.com/physiciansnet/capacityd/store"
)

// Cluster is a PostgreSQL cluster and a Redis of the test's own, and
// capacityd instances that reach each of them through a proxy of their
// own, so that one instance's link can be slowed, throttled, reset or
// black-holed while the others' are not.
type Cluster struct {
	Postgres *testenv.PostgresServer
	Redis    *testenv.RedisServer
	Nodes    []*Node
	// PostgresLinks and RedisLinks are the nodes' proxies, by node index.
	PostgresLinks, RedisLinks []*testenv.Proxy
	// RedisAdmin talks to Redis directly, not through a proxy.
	RedisAdmin *redis.Client
}

// StartCluster starts the servers and n instances of bin with env, each
// through its own proxies.
func StartCluster(t testing.TB, n int, bin string, env ...string) *Cluster {
	t.Helper()
	c := &Cluster{Postgres: testenv.PrivatePostgres(t), Redis: testenv.PrivateRedis(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool := testenv.Pool(t, c.Postgres.URL, 2)
	if _, err := store.Migrate(ctx, pool); err != nil {
		t.Fatalf("chaos: migrate: %v", err)
	}
	pool.Close()
	c.RedisAdmin = testenv.RedisClient(t, c.Redis.URL())
	pgAddr := strings.TrimPrefix(strings.SplitN(c.Postgres.URL, "/", 4)[2], "postgres@")
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		pg := testenv.StartProxy(t, name+"-postgres", pgAddr)
		rd := testenv.StartProxy(t, name+"-redis", c.Redis.Addr)
		c.PostgresLinks, c.RedisLinks = append(c.PostgresLinks, pg), append(c.RedisLinks, rd)
		dbURL := strings.Replace(c.Postgres.URL, pgAddr, pg.Addr, 1)
		nodeEnv := append([]string{"DATABASE_URL=" + dbURL, "REDIS_URL=redis://" + rd.Addr + "/0"}, env...)
		c.Nodes = append(c.Nodes, StartNode(t, name, bin, nodeEnv...))
	}
	return c
}

// Heal removes every toxic from every link.
func (c *Cluster) Heal() {
	for i := range c.Nodes {
		c.PostgresLinks[i].Heal()
		c.RedisLinks[i].Heal()
	}
}
