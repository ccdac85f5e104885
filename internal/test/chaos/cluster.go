package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/store"
)

// Cluster is a PostgreSQL cluster (or a highly available formation) and a
// Redis of the test's own, and capacityd instances that reach each of
// them through a proxy of their own, so that one instance's link can be
// slowed, throttled, reset or black-holed while the others' are not. With
// proxies, as docs/deploy.md's reference topology has them, HAProxy is in
// front of the instances and, on a single server, PgBouncer between the
// instances' links and PostgreSQL.
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
	// Bouncer is PgBouncer (deploy/pgbouncer/pgbouncer.ini, transaction
	// pooling) in front of the single server, nil without proxies or with
	// a formation.
	Bouncer *testenv.PgBouncer
	// Proxy is HAProxy (deploy/haproxy/haproxy.cfg) in front of the
	// instances, nil without proxies; proxyEntry is the node that stands
	// for it among Entries.
	Proxy      *testenv.HAProxy
	proxyEntry *Node
}

// Topology chooses what a cluster runs.
type Topology struct {
	// HA makes PostgreSQL a pg_auto_failover formation started with
	// Formation, instead of a single server.
	HA        bool
	Formation testenv.AutoFailoverOptions
	// Proxies puts HAProxy in front of the instances and, on a single
	// server, PgBouncer in front of PostgreSQL. A formation gets no
	// PgBouncer (docs/deploy.md: not a tested topology).
	Proxies bool
}

// StartCluster starts the servers of top and n instances of bin with env,
// each through its own links.
func StartCluster(t testing.TB, n int, bin string, top Topology, env ...string) *Cluster {
	t.Helper()
	c := &Cluster{Redis: testenv.PrivateRedis(t)}
	var dbURL string
	if top.HA {
		c.Formation = testenv.PrivateAutoFailover(t, top.Formation)
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
		if top.Proxies {
			// Migrated directly above: a transaction pooler cannot.
			c.Bouncer = testenv.PrivatePgBouncer(t, dbURL, 0)
			dbURL = c.Bouncer.URL(dbURL)
		}
	}
	c.RedisAdmin = testenv.RedisClient(t, c.Redis.URL())
	// postgres://USER[:PASSWORD]@HOSTS/...: every host:port gets a link.
	hosts := strings.SplitN(dbURL, "/", 4)[2]
	hosts = hosts[strings.LastIndex(hosts, "@")+1:]
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
	if top.Proxies {
		var addrs []string
		for _, nd := range c.Nodes {
			addrs = append(addrs, strings.TrimPrefix(nd.URL, "http://"))
		}
		c.Proxy = testenv.StartHAProxy(t, addrs...)
		c.Proxy.WaitServersUp(t, len(addrs))
		c.proxyEntry = &Node{Name: "haproxy", URL: c.Proxy.URL}
		c.proxyEntry.runs.Add(1)
	}
	return c
}

// Entries returns where clients send their requests: each instance
// directly and, with proxies, HAProxy, which stands for an instance it
// chooses.
func (c *Cluster) Entries() []*Node {
	if c.proxyEntry == nil {
		return c.Nodes
	}
	return append(slices.Clone(c.Nodes), c.proxyEntry)
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
