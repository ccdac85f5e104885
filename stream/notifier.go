// Package stream carries the live side of the service: change
// announcements between instances (Notifier) and the seat streams that
// fan them out to pages (Hub).
package stream

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/registration"
)

// Channel is the Redis pub/sub channel on which every instance announces
// the activities whose seats or registrations changed, on a single Redis
// node: each message is a capacity.SeatChange (the activity's new seats
// and its pools', which receivers keep in their seat memory) or a bare
// activity id (a change whose seats are to be read again). On a Redis
// Cluster, where a plain PUBLISH reaches every node, each activity has a
// shard channel instead (ShardChannel), carrying bare ids.
const Channel = "capacityd:seats"

// Notifier defaults.
const (
	DefaultRefreshInterval = 5 * time.Second
	// recoveryPolling is the least time watchers keep being poked on a
	// timer after the subscription came back.
	recoveryPolling = 5 * time.Second
	// publishSuspension is how long announcements skip Redis after a
	// failed publish, so that an outage costs one failed call a second.
	publishSuspension = time.Second
)

// NotifierConfig configures a Notifier.
type NotifierConfig struct {
	// Redis carries the announcements of every instance; nil means none:
	// only this instance's changes are seen, and watchers are poked every
	// RefreshInterval.
	Redis redis.UniversalClient
	// RefreshInterval is how often watchers are poked while announcements
	// may be missed (the subscription is down or just came back). Default
	// 5s.
	RefreshInterval time.Duration
	Logger          *slog.Logger
	// Registerer registers the subscription's gauge and the counter of its
	// losses; nil means none.
	Registerer prometheus.Registerer
	// Memory is the instance's seat memory, kept current from the
	// announced changes and forgotten whenever announcements may have been
	// missed; nil: none.
	Memory *capacity.Memory
}

// Notifier tells watchers of an activity when it changes, on any instance.
// On a single Redis node it holds one subscription to Channel for the
// whole instance; on a Redis Cluster (a *redis.ClusterClient) it uses
// sharded pub/sub, subscribing the shard channel of each activity while
// the activity has watchers here. It announces this instance's commits,
// and pokes the watchers of each announced activity. While announcements may be missed it pokes every watcher on a
// timer instead, so that they re-read. It implements
// registration.Observer (announcing commits) and registration.Changes
// (watching).
type Notifier struct {
	rdb     redis.UniversalClient
	cluster *sharded // set on a Redis Cluster
	refresh time.Duration
	log     *slog.Logger
	gauge   prometheus.Gauge
	// losses counts the times a subscription that was up failed: after
	// each, every watcher re-reads while Polling.
	losses prometheus.Counter
	memory *capacity.Memory

	healthy atomic.Bool // the subscription is up
	// recoveredAt (unix nanoseconds) is when the subscription came back
	// after a failure; zero before any failure.
	recoveredAt atomic.Int64
	// suspendedUntil (unix nanoseconds) skips publishing after an error.
	suspendedUntil atomic.Int64

	mu       sync.Mutex
	watchers map[string]*watchSet
	closed   bool
	done     chan struct{}
}

// watchSet is the watchers of one activity.
type watchSet struct{ chans map[chan struct{}]struct{} }

// NewNotifier returns a Notifier. Call Run to start its subscription and
// Close to stop it.
func NewNotifier(cfg NotifierConfig) *Notifier {
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Notifier{
		rdb: cfg.Redis, refresh: cfg.RefreshInterval, log: cfg.Logger, memory: cfg.Memory,
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capacityd_seat_stream_subscribed",
			Help: "1 while this instance's Redis subscription to change announcements is up.",
		}),
		losses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capacityd_seat_stream_subscription_losses_total",
			Help: "Times this instance's Redis subscription to change announcements went down; each is followed by re-reads of what its streams and long polls follow.",
		}),
		watchers: make(map[string]*watchSet),
		done:     make(chan struct{}),
	}
	if c, ok := cfg.Redis.(*redis.ClusterClient); ok {
		n.cluster = newSharded(c, n)
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(n.gauge, n.losses)
	}
	return n
}

// Watch returns a channel that receives after each announced change of the
// activity, coalesced (it holds at most one pending signal), and a
// function that ends the watch.
func (n *Notifier) Watch(activityID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	ws := n.watchers[activityID]
	if ws == nil {
		ws = &watchSet{chans: make(map[chan struct{}]struct{})}
		n.watchers[activityID] = ws
		if n.cluster != nil {
			n.cluster.want(activityID)
		}
	}
	ws.chans[ch] = struct{}{}
	n.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			delete(ws.chans, ch)
			if len(ws.chans) == 0 && n.watchers[activityID] == ws {
				delete(n.watchers, activityID)
				if n.cluster != nil {
					n.cluster.unwant(activityID)
				}
			}
		})
	}
}

// Announce tells every instance that the activity changed: this
// instance's watchers at once, the others through Redis.
func (n *Notifier) Announce(ctx context.Context, activityID string) {
	n.AnnounceAll(ctx, []string{activityID})
}

// AnnounceAll announces each of ids as Announce does, in one Redis
// round trip.
func (n *Notifier) AnnounceAll(ctx context.Context, ids []string) {
	changes := make([]capacity.SeatChange, len(ids))
	for i, id := range ids {
		n.poke(id)
		changes[i] = capacity.SeatChange{ActivityID: id}
	}
	n.publish(ctx, changes)
}

// Committed announces the activities a change transaction changed
// (capacity.SeatChanges): each activity that changed, and every activity
// of the pools of its commit (the seats left in a pool bound what each of
// its activities shows), each once. A commit of a pool's own change (no
// activity) announces its pools' activities. It implements
// registration.Observer; run it after the observers that update what
// watchers read (the display counter). The changes reach this instance's
// seat memory here, before they are published.
func (n *Notifier) Committed(ctx context.Context, commits []registration.Commit) {
	changes := capacity.SeatChanges(commits)
	for _, c := range changes {
		if n.memory != nil {
			n.memory.Apply(c) // this instance's reads see its commits at once
		}
		n.poke(c.ActivityID)
	}
	n.publish(ctx, changes)
}

// publish sends the changes in one pipeline, on Channel (with their
// seats) or on their shard channels (their ids), unless there is no Redis
// or it failed a moment ago.
func (n *Notifier) publish(ctx context.Context, changes []capacity.SeatChange) {
	if n.rdb == nil || len(changes) == 0 || time.Now().UnixNano() < n.suspendedUntil.Load() {
		return
	}
	var err error
	if n.cluster != nil {
		ids := make([]string, len(changes))
		for i, c := range changes {
			ids[i] = c.ActivityID
		}
		err = n.cluster.publish(ctx, ids)
	} else {
		pipe := n.rdb.Pipeline()
		for _, c := range changes {
			pipe.Publish(ctx, Channel, c.Encode())
		}
		_, err = pipe.Exec(ctx)
	}
	if err != nil && ctx.Err() == nil {
		n.suspendedUntil.Store(time.Now().Add(publishSuspension).UnixNano())
	}
}

// poke signals the watchers of one activity without ever blocking.
func (n *Notifier) poke(activityID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ws := n.watchers[activityID]; ws != nil {
		for ch := range ws.chans {
			signal(ch)
		}
	}
}

// pokeAll signals every watcher.
func (n *Notifier) pokeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ws := range n.watchers {
		for ch := range ws.chans {
			signal(ch)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Healthy reports whether the Redis subscription is up; on a Redis
// Cluster, whether the shard channel of every activity watched here is
// subscribed.
func (n *Notifier) Healthy() bool { return n.healthy.Load() }

// CarriesSeats reports whether the announced changes keep the seat memory
// current now: the subscription to Channel is up. On a Redis Cluster
// (shard channels, subscribed only while an activity has watchers here,
// carrying bare ids) they never do.
func (n *Notifier) CarriesSeats() bool {
	return n.memory != nil && n.cluster == nil && n.healthy.Load()
}

// setSubscribed records whether announcements reach this instance; again
// means they came back after a failure. Either way the seat memory is
// forgotten: announcements may have been missed.
func (n *Notifier) setSubscribed(up, again bool) {
	if n.memory != nil {
		n.memory.Forget()
	}
	if again {
		n.recoveredAt.Store(time.Now().UnixNano())
	}
	n.healthy.Store(up)
	if up {
		n.gauge.Set(1)
	} else {
		n.gauge.Set(0)
	}
}

// Polling reports whether announcements may be missed, so that watchers
// are poked on a timer: while the subscription is down, and for a while
// after it came back, since the instances that publish may still be
// skipping Redis after their own errors.
func (n *Notifier) Polling() bool {
	if !n.healthy.Load() {
		return true
	}
	at := n.recoveredAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < max(recoveryPolling, 2*n.refresh)
}

// Run holds the instance's subscription (on a Redis Cluster, its shard
// channel subscriptions) until ctx ends or the notifier is closed,
// subscribing again (with backoff) whenever it breaks, and pokes
// every watcher each RefreshInterval while Polling. When the subscription
// comes back, every watcher is poked once, since changes may have been
// missed.
func (n *Notifier) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-n.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	go n.pollWhileMissing(ctx)
	if n.rdb == nil {
		<-ctx.Done()
		return
	}
	if n.cluster != nil {
		n.cluster.run(ctx)
		return
	}
	const minBackoff, maxBackoff = 100 * time.Millisecond, 2 * time.Second
	backoff := minBackoff
	lastLog := time.Time{}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		subscribed, err := n.listen(ctx, attempt > 0)
		if subscribed && ctx.Err() == nil {
			n.losses.Inc() // counted before the instance shows as unsubscribed
		}
		n.setSubscribed(false, false)
		if ctx.Err() != nil {
			return
		}
		if subscribed {
			backoff = minBackoff
		}
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			n.log.Warn("change announcements down; streams and long polls re-read on a timer", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (n *Notifier) pollWhileMissing(ctx context.Context) {
	t := time.NewTicker(n.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n.Polling() {
				n.pokeAll()
			}
		}
	}
}

// listen subscribes to Channel and dispatches its messages until the
// connection fails. It pings the server when the channel is quiet, so a
// silent loss of the connection is noticed. subscribed reports whether the
// subscription was confirmed.
func (n *Notifier) listen(ctx context.Context, again bool) (subscribed bool, err error) {
	ps := n.rdb.Subscribe(ctx, Channel)
	defer ps.Close()
	// Closing the subscription is what interrupts a blocked receive.
	defer context.AfterFunc(ctx, func() { _ = ps.Close() })()
	pinged := false
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, n.refresh)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged && subscribed {
				pinged = true
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				err = ps.Ping(pctx)
				cancel()
				if err == nil {
					continue
				}
			}
			return subscribed, err
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == Channel {
				subscribed = true
				n.setSubscribed(true, again)
				n.pokeAll()
			}
		case *redis.Message:
			n.received(m.Payload)
		}
	}
	return subscribed, ctx.Err()
}

// received applies an announced change to the seat memory and pokes the
// activity's watchers.
func (n *Notifier) received(payload string) {
	c, ok := capacity.DecodeSeatChange(payload)
	if !ok {
		return
	}
	if n.memory != nil {
		n.memory.Apply(c)
	}
	n.poke(c.ActivityID)
}

// Close stops Run. It is safe to call more than once.
func (n *Notifier) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.closed {
		n.closed = true
		close(n.done)
	}
}
