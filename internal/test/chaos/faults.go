package chaos

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/physiciansnet/capacityd/internal/test/history"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// Class is a kind of fault.
type Class string

// The fault classes.
const (
	// InstanceKill kills an instance with SIGKILL and starts it again.
	InstanceKill Class = "instance_kill"
	// RedisKill kills Redis (its data is gone) and starts it again.
	RedisKill Class = "redis_kill"
	// RedisFlush flushes every key of Redis.
	RedisFlush Class = "redis_flush"
	// PostgresRestart stops PostgreSQL (fast shutdown: connections cut)
	// and starts it again.
	PostgresRestart Class = "postgres_restart"
	// Latency delays an instance's link to PostgreSQL or Redis.
	Latency Class = "latency"
	// Bandwidth throttles an instance's link to PostgreSQL or Redis.
	Bandwidth Class = "bandwidth"
	// Reset resets the connections of an instance's link as data flows,
	// either way (downstream: the request was received, the answer lost).
	Reset Class = "reset"
	// HalfOpen black-holes one direction of an instance's link: the
	// connections stay open, nothing arrives.
	HalfOpen Class = "half_open"
	// PostgresFailover kills the formation's primary (keeper and
	// PostgreSQL, SIGKILL) mid-load: the monitor promotes the standby. The
	// old primary then rejoins as the standby, and the fault ends when
	// the formation is whole again.
	PostgresFailover Class = "postgres_failover"
	// PostgresStandbyLoss stops the formation's standby while the primary
	// runs: commits wait for it until the monitor lets the primary go on
	// alone. The standby then rejoins.
	PostgresStandbyLoss Class = "postgres_standby_loss"
	// PostgresSwitchover is a planned switchover of the formation
	// (pg_autoctl perform switchover).
	PostgresSwitchover Class = "postgres_switchover"
	// PgBouncerRestart kills PgBouncer (SIGKILL) mid-load and starts it
	// again on the same port: the instances' connections to it break.
	PgBouncerRestart Class = "pgbouncer_restart"
	// HAProxyRestart kills HAProxy (SIGKILL) mid-load and starts it again
	// on the same port: the clients' connections through it break, and it
	// checks the instances anew before it sends them requests.
	HAProxyRestart Class = "haproxy_restart"
)

// AllClasses lists every fault class of a single PostgreSQL server.
var AllClasses = []Class{InstanceKill, RedisKill, RedisFlush, PostgresRestart, Latency, Bandwidth, Reset, HalfOpen}

// HAClasses lists every fault class of a pg_auto_failover formation:
// PostgreSQL's own are its failover, the loss of its standby and a
// switchover instead of a restart.
var HAClasses = []Class{InstanceKill, RedisKill, RedisFlush, PostgresFailover, PostgresStandbyLoss, PostgresSwitchover,
	Latency, Bandwidth, Reset, HalfOpen}

// ProxyClasses lists the fault classes of the proxies of a cluster with
// Config.Proxies: PgBouncer's restart (a single server's pooler) and
// HAProxy's.
var ProxyClasses = []Class{PgBouncerRestart, HAProxyRestart}

// everyClass lists every fault class, in the order a summary names them.
var everyClass = slices.Concat(AllClasses, []Class{PostgresFailover, PostgresStandbyLoss, PostgresSwitchover}, ProxyClasses)

// formationFault reports (1) whether cl is a fault of a pg_auto_failover
// formation, else 0.
func formationFault(cl Class) int {
	if cl == PostgresFailover || cl == PostgresStandbyLoss || cl == PostgresSwitchover {
		return 1
	}
	return 0
}

// formationWhole bounds the wait for a formation to have its primary and
// standby again after a fault.
const formationWhole = 2 * time.Minute

// injector injects faults into a cluster, one at a time, and records
// each in the history.
type injector struct {
	t       testing.TB
	c       *Cluster
	rec     *history.Recorder
	rng     *rand.Rand
	hold    func() time.Duration
	counts  map[Class]int
	nthLink int
	// lostAnswers lets resets and half-open links break the answer
	// direction too; else they break the request direction only.
	lostAnswers bool
}

// run injects the classes in turn, in a new random order each round,
// until ctx ends; it returns with every fault healed.
func (in *injector) run(ctx context.Context, classes []Class, gap func() time.Duration) {
	for {
		order := append([]Class(nil), classes...)
		in.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		// The formation's faults last in a round: they end only once it is
		// whole again, which takes longest.
		slices.SortStableFunc(order, func(a, b Class) int { return cmp.Compare(formationFault(a), formationFault(b)) })
		for _, cl := range order {
			if !sleep(ctx, gap()) {
				return
			}
			in.inject(cl)
		}
	}
}

// inject injects one fault of class cl, holds it, and heals it.
func (in *injector) inject(cl Class) {
	t, c := in.t, in.c
	in.counts[cl]++
	node := in.rng.IntN(len(c.Nodes))
	switch cl {
	case InstanceKill:
		n := c.Nodes[node]
		f := in.rec.BeginFault(string(cl), n.Instance())
		n.Kill()
		time.Sleep(in.hold() / 2)
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		f.End()
	case RedisKill:
		f := in.rec.BeginFault(string(cl), "redis")
		c.Redis.Kill()
		time.Sleep(in.hold())
		c.Redis.Start(t)
		f.End()
	case RedisFlush:
		f := in.rec.BeginFault(string(cl), "redis")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.RedisAdmin.FlushAll(ctx).Err()
		cancel()
		f.End()
		if err != nil {
			t.Fatalf("chaos: flush Redis: %v", err)
		}
	case PostgresRestart:
		f := in.rec.BeginFault(string(cl), "postgres")
		c.Postgres.Stop()
		time.Sleep(in.hold() / 2)
		c.Postgres.Start(t)
		f.End()
	case PostgresFailover, PostgresStandbyLoss:
		pf := c.Formation
		pf.WaitHealthy(t, formationWhole)
		var f *history.FaultSpan
		lost := 0
		if cl == PostgresFailover {
			// The fault starts at the kill itself: finding the primary
			// takes a moment.
			if lost = pf.Primary(); lost < 0 {
				t.Fatalf("chaos: the formation has no primary to kill")
			}
			f = in.rec.BeginFault(string(cl), "postgres")
			pf.KillNode(lost)
		} else {
			f = in.rec.BeginFault(string(cl), "postgres")
			lost = pf.StopStandby(t)
		}
		time.Sleep(in.hold())
		pf.StartNode(t, lost)
		pf.WaitHealthy(t, formationWhole)
		f.End()
	case PostgresSwitchover:
		c.Formation.WaitHealthy(t, formationWhole)
		f := in.rec.BeginFault(string(cl), "postgres")
		c.Formation.Switchover(t)
		f.End()
	case PgBouncerRestart:
		if c.Bouncer == nil {
			t.Fatalf("chaos: %s needs PgBouncer in the cluster (Config.Proxies on a single server)", cl)
		}
		in.restart(cl, "pgbouncer", c.Bouncer.Kill, c.Bouncer.Start)
	case HAProxyRestart:
		if c.Proxy == nil {
			t.Fatalf("chaos: %s needs HAProxy in the cluster (Config.Proxies)", cl)
		}
		in.restart(cl, "haproxy", c.Proxy.Kill, func(t testenv.T) {
			c.Proxy.Start(t)
			c.proxyEntry.runs.Add(1)
		})
	default:
		in.toxic(cl, node)
	}
}

// restart kills a server (SIGKILL), leaves it down for half a hold and
// starts it again on its port: one fault of class cl on target.
func (in *injector) restart(cl Class, target string, kill func(), start func(testenv.T)) {
	f := in.rec.BeginFault(string(cl), target)
	kill()
	time.Sleep(in.hold() / 2)
	start(in.t)
	f.End()
}

// toxic puts a toxic of class cl on one of the node's links, PostgreSQL's
// and Redis's in turn, for a while.
func (in *injector) toxic(cl Class, node int) {
	in.nthLink++
	links, target := in.c.PostgresLinks[node], "postgres"
	if in.nthLink%2 == 0 {
		links, target = []*testenv.Proxy{in.c.RedisLinks[node]}, "redis"
	}
	dir := testenv.Downstream
	if in.rng.IntN(2) == 0 || (!in.lostAnswers && (cl == Reset || cl == HalfOpen)) {
		dir = testenv.Upstream
	}
	f := in.rec.BeginFault(string(cl), fmt.Sprintf("%s→%s %s", in.c.Nodes[node].Name, target, dir))
	ms, kbps, resetMS := 100+in.rng.IntN(200), 2+in.rng.IntN(8), in.rng.IntN(50)
	for _, link := range links {
		var err error
		switch cl {
		case Latency:
			err = link.Latency(dir, ms, 50)
		case Bandwidth:
			err = link.Bandwidth(dir, kbps)
		case Reset:
			err = link.Reset(dir, resetMS)
		case HalfOpen:
			err = link.HalfOpen(dir)
		}
		if err != nil {
			in.t.Fatal(err)
		}
	}
	time.Sleep(in.hold())
	for _, link := range links {
		link.Heal()
	}
	f.End()
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
