package stream

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// shardPrefix and shardSuffix frame an activity id in its shard channel.
const (
	shardPrefix = "capacityd:seats:{"
	shardSuffix = "}"
)

// ShardChannel returns the shard channel on which the changes of one
// activity are announced on a Redis Cluster (SPUBLISH/SSUBSCRIBE). It
// carries the hash tag of the activity's keys (see capacity.Key), so it
// lives on the node that holds the activity's counter.
func ShardChannel(activityID string) string { return shardPrefix + activityID + shardSuffix }

// activityOfChannel returns the activity id of a shard channel.
func activityOfChannel(channel string) (string, bool) {
	id, ok := strings.CutPrefix(channel, shardPrefix)
	if !ok {
		return "", false
	}
	return strings.CutSuffix(id, shardSuffix)
}

// sharded holds the instance's sharded subscriptions on a Redis Cluster:
// one shard channel per watched activity, subscribed while the activity
// has watchers, with one connection per master node that owns some of
// them. A SSUBSCRIBE names one channel, so channels of different slots
// share a connection (one command may not span slots). When a connection
// fails, or the node gives up a slot (failover, resharding), every
// channel of that connection is placed again on the master the cluster
// names now, after a backoff.
type sharded struct {
	rdb *redis.ClusterClient
	n   *Notifier
	// kick wakes the run loop to place or drop subscriptions.
	kick chan struct{}

	mu      sync.Mutex
	wanted  map[string]struct{} // activities with watchers here
	on      map[string]*nodeSub // activity → the connection it was subscribed on
	nodes   map[string]*nodeSub // master address → its connection
	broken  bool                // a subscription failed since the last healthy moment
	lastErr error
}

// nodeSub is one connection to a master node and the shard channels
// subscribed on it.
type nodeSub struct {
	addr string
	ps   *redis.PubSub
	// ids maps each activity subscribed here to whether the node
	// confirmed the subscription.
	ids map[string]bool
	// unsubs counts the SUNSUBSCRIBEs sent and not yet confirmed, per
	// activity, to tell them from a node dropping a slot.
	unsubs map[string]int
}

func newSharded(rdb *redis.ClusterClient, n *Notifier) *sharded {
	return &sharded{
		rdb: rdb, n: n, kick: make(chan struct{}, 1),
		wanted: make(map[string]struct{}), on: make(map[string]*nodeSub), nodes: make(map[string]*nodeSub),
	}
}

// want records that the activity has watchers. Called with n.mu held.
func (s *sharded) want(id string) {
	s.mu.Lock()
	s.wanted[id] = struct{}{}
	s.updateHealthLocked()
	s.mu.Unlock()
	s.wake()
}

// unwant records that the activity has no watchers left. Called with n.mu
// held.
func (s *sharded) unwant(id string) {
	s.mu.Lock()
	delete(s.wanted, id)
	s.updateHealthLocked()
	s.mu.Unlock()
	s.wake()
}

func (s *sharded) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// publish announces the activities on their shard channels, in one
// pipeline that the cluster client splits by node.
func (s *sharded) publish(ctx context.Context, ids []string) error {
	pipe := s.rdb.Pipeline()
	for _, id := range ids {
		pipe.SPublish(ctx, ShardChannel(id), id)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// run places and drops subscriptions as watchers come and go until ctx
// ends, retrying (with backoff) those that could not be placed.
func (s *sharded) run(ctx context.Context) {
	const minBackoff, maxBackoff = 100 * time.Millisecond, 2 * time.Second
	backoff := minBackoff
	lastLog := time.Time{}
	s.n.setSubscribed(s.healthy(), false)
	defer s.closeAll()
	for {
		var retry <-chan time.Time
		if err := s.reconcile(ctx); err != nil && ctx.Err() == nil {
			if time.Since(lastLog) > 10*time.Second {
				lastLog = time.Now()
				s.n.log.Warn("sharded change announcements down; streams and long polls re-read on a timer", "err", err)
			}
			retry = time.After(backoff)
			backoff = min(2*backoff, maxBackoff)
		} else {
			backoff = minBackoff
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-retry:
		}
	}
}

// reconcile subscribes the watched activities that are not yet and drops
// the others. It returns the first error met (those activities are tried
// again later) or the last failure of a connection.
func (s *sharded) reconcile(ctx context.Context) error {
	s.mu.Lock()
	var add, drop []string
	for id := range s.wanted {
		if s.on[id] == nil {
			add = append(add, id)
		}
	}
	for id := range s.on {
		if _, ok := s.wanted[id]; !ok {
			drop = append(drop, id)
		}
	}
	failure := s.lastErr
	s.lastErr = nil
	s.mu.Unlock()

	for _, id := range drop {
		s.unsubscribe(ctx, id)
	}
	var firstErr error
	for _, id := range add {
		if err := s.subscribe(ctx, id); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return errors.Join(firstErr, failure)
}

// subscribe sends SSUBSCRIBE for the activity's channel on the connection
// to the master that owns its slot, opening it if needed.
func (s *sharded) subscribe(ctx context.Context, id string) error {
	channel := ShardChannel(id)
	node, err := s.rdb.MasterForKey(ctx, channel)
	if err != nil {
		return err
	}
	addr := node.Options().Addr
	s.mu.Lock()
	ns := s.nodes[addr]
	if ns == nil {
		ns = &nodeSub{addr: addr, ps: node.SSubscribe(ctx), ids: make(map[string]bool), unsubs: make(map[string]int)}
		s.nodes[addr] = ns
		go s.receive(ctx, ns)
	}
	ns.ids[id] = false
	s.on[id] = ns
	s.updateHealthLocked()
	s.mu.Unlock()
	if err := ns.ps.SSubscribe(ctx, channel); err != nil {
		s.fail(ns, err)
		return err
	}
	return nil
}

// unsubscribe sends SUNSUBSCRIBE for the activity's channel, and closes
// its connection when nothing else is subscribed on it.
func (s *sharded) unsubscribe(ctx context.Context, id string) {
	s.mu.Lock()
	ns := s.on[id]
	if ns == nil {
		s.mu.Unlock()
		return
	}
	delete(s.on, id)
	delete(ns.ids, id)
	last := len(ns.ids) == 0
	if last {
		delete(s.nodes, ns.addr)
	} else {
		ns.unsubs[id]++
	}
	s.mu.Unlock()
	if last {
		_ = ns.ps.Close()
		return
	}
	if err := ns.ps.SUnsubscribe(ctx, ShardChannel(id)); err != nil {
		s.fail(ns, err)
	}
}

// receive dispatches the messages of one connection until it fails or is
// closed. It pings the node when the connection is quiet, so a silent loss
// is noticed.
func (s *sharded) receive(ctx context.Context, ns *nodeSub) {
	pinged := false
	for ctx.Err() == nil {
		msg, err := ns.ps.ReceiveTimeout(ctx, s.n.refresh)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				pinged = true
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				err = ns.ps.Ping(pctx)
				cancel()
				if err == nil {
					continue
				}
			}
			s.fail(ns, err)
			return
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if !s.confirm(ns, m) {
				s.fail(ns, errors.New("the node dropped the shard channel "+m.Channel))
				return
			}
		case *redis.Message:
			s.n.poke(m.Payload)
		}
	}
}

// confirm records a subscription reply. A subscribed activity's watchers
// are poked, since changes may have been missed before. It reports false
// when the node unsubscribed a channel on its own (it no longer owns the
// slot).
func (s *sharded) confirm(ns *nodeSub, m *redis.Subscription) bool {
	id, ok := activityOfChannel(m.Channel)
	if !ok {
		return true
	}
	poke := false
	s.mu.Lock()
	switch m.Kind {
	case "ssubscribe":
		if _, ok := ns.ids[id]; ok && s.on[id] == ns {
			ns.ids[id] = true
			s.updateHealthLocked()
			poke = true
		}
	case "sunsubscribe":
		if ns.unsubs[id] == 0 {
			// A closed connection's replies do not count.
			ok = s.nodes[ns.addr] != ns
		} else if ns.unsubs[id]--; ns.unsubs[id] == 0 {
			delete(ns.unsubs, id)
		}
	}
	s.mu.Unlock()
	// n.mu is taken after s.mu is released: Watch holds n.mu while it
	// takes s.mu.
	if poke {
		s.n.poke(id)
	}
	return ok
}

// fail forgets a connection that failed: its activities are subscribed
// again on the masters the cluster names once its topology is reloaded.
func (s *sharded) fail(ns *nodeSub, err error) {
	s.mu.Lock()
	if s.nodes[ns.addr] != ns {
		s.mu.Unlock()
		return
	}
	delete(s.nodes, ns.addr)
	for id := range ns.ids {
		if s.on[id] == ns {
			delete(s.on, id)
		}
	}
	s.broken = true
	s.lastErr = err
	s.n.losses.Inc()
	s.updateHealthLocked()
	s.mu.Unlock()
	_ = ns.ps.Close()
	s.rdb.ReloadState(context.Background())
	s.wake()
}

// healthy reports whether every watched activity's subscription is
// confirmed.
func (s *sharded) healthy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.healthyLocked()
}

func (s *sharded) healthyLocked() bool {
	for id := range s.wanted {
		ns := s.on[id]
		if ns == nil || !ns.ids[id] {
			return false
		}
	}
	return true
}

// updateHealthLocked tells the notifier whether announcements may be
// missed. s.mu is held.
func (s *sharded) updateHealthLocked() {
	up := s.healthyLocked()
	again := up && s.broken
	if up {
		s.broken = false
	}
	s.n.setSubscribed(up, again)
}

// closeAll closes every connection.
func (s *sharded) closeAll() {
	s.mu.Lock()
	nodes := s.nodes
	s.nodes, s.on = make(map[string]*nodeSub), make(map[string]*nodeSub)
	s.updateHealthLocked()
	s.mu.Unlock()
	for _, ns := range nodes {
		_ = ns.ps.Close()
	}
}
