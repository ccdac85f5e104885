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

// Cluster is a PostgreSQL cluster (or a highly available formation) and a
// Redis of the test's own, and capacityd instances that reach each of
// them through a proxy of their own, so that one instance's link can be
// slowed, throttled, reset or black-holed while the others' are not.
type Cluster struct {
	// Postgres is the single server, nil with a formation.
	Postgres *testenv.PostgresServer
	// Formation is the pg_auto_failover formation, nil with a single
	// server. The instances connect to both of its nodes (a multi-host
	// URL that chooses the read-write one).
	Formation *testenv.AutoFailover
	Redis     *testenv.RedisServer
	Nodes     []*Node
	// PostgresLinks and RedisLinks are the nodes' proxies, by node index:
	// with a formation, PostgresLinks[i] holds instance i's proxies to
	// each of its nodes.
	PostgresLinks [][]*testenv.Proxy
	RedisLinks    []*testenv.Proxy
	// RedisAdmin talks to Redis directly, not through a proxy.
	RedisAdmin *redis.Client
}

// StartCluster starts the servers and n instances of bin with env, each
// through its own proxies. With ha, PostgreSQL is a pg_auto_failover
// formation started with opts, else a single server.
func StartCluster(t testing.TB, n int, bin string, ha bool, opts testenv.AutoFailoverOptions, env ...string) *Cluster {
	t.Helper()
	c := &Cluster{Redis: testenv.PrivateRedis(t)}
	var dbURL string
	if ha {
		c.Formation = testenv.PrivateAutoFailover(t, opts)
		dbURL = c.Formation.URL()
	} else {
		c.Postgres = testenv.PrivatePostgres(t)
		dbURL = c.Postgres.URL
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		pool := testenv.Pool(t, dbURL, 2)
		if _, err := store.Migrate(ctx, pool); err != nil {
			t.Fatalf("chaos: migrate: %v", err)
		}
		pool.Close()
	}
	c.RedisAdmin = testenv.RedisClient(t, c.Redis.URL())
	// postgres://postgres@HOSTS/...: every host:port gets a proxy.
	hosts := strings.TrimPrefix(strings.SplitN(dbURL, "/", 4)[2], "postgres@")
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		rd := testenv.StartProxy(t, name+"-redis", c.Redis.Addr)
		var links []*testenv.Proxy
		var proxied []string
		for j, addr := range strings.Split(hosts, ",") {
			pg := testenv.StartProxy(t, fmt.Sprintf("%s-postgres%d", name, j), addr)
			links, proxied = append(links, pg), append(proxied, pg.Addr)
		}
		c.PostgresLinks, c.RedisLinks = append(c.PostgresLinks, links), append(c.RedisLinks, rd)
		dbURL := strings.Replace(dbURL, hosts, strings.Join(proxied, ","), 1)
		nodeEnv := append([]string{"DATABASE_URL=" + dbURL, "REDIS_URL=redis://" + rd.Addr + "/0"}, env...)
		c.Nodes = append(c.Nodes, StartNode(t, name, bin, nodeEnv...))
	}
	return c
}

// Heal removes every toxic from every link.
func (c *Cluster) Heal() {
	for i := range c.Nodes {
		for _, l := range c.PostgresLinks[i] {
			l.Heal()
		}
		c.RedisLinks[i].Heal()
	}
}
