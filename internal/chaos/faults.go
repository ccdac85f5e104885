package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/physiciansnet/capacityd/internal/history"
	"github.com/physiciansnet/capacityd/internal/testenv"
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
)

// AllClasses lists every fault class.
var AllClasses = []Class{InstanceKill, RedisKill, RedisFlush, PostgresRestart, Latency, Bandwidth, Reset, HalfOpen}

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
	default:
		in.toxic(cl, node)
	}
}

// toxic puts a toxic of class cl on one of the node's links, PostgreSQL's
// and Redis's in turn, for a while.
func (in *injector) toxic(cl Class, node int) {
	in.nthLink++
	link, target := in.c.PostgresLinks[node], "postgres"
	if in.nthLink%2 == 0 {
		link, target = in.c.RedisLinks[node], "redis"
	}
	dir := testenv.Downstream
	if in.rng.IntN(2) == 0 || (!in.lostAnswers && (cl == Reset || cl == HalfOpen)) {
		dir = testenv.Upstream
	}
	f := in.rec.BeginFault(string(cl), fmt.Sprintf("%s→%s %s", in.c.Nodes[node].Name, target, dir))
	var err error
	switch cl {
	case Latency:
		err = link.Latency(dir, 100+in.rng.IntN(200), 50)
	case Bandwidth:
		err = link.Bandwidth(dir, 2+in.rng.IntN(8))
	case Reset:
		err = link.Reset(dir, in.rng.IntN(50))
	case HalfOpen:
		err = link.HalfOpen(dir)
	}
	if err != nil {
		in.t.Fatal(err)
	}
	time.Sleep(in.hold())
	link.Heal()
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
