// Package activitycache keeps, per instance, the settings of the activities
// that public reads ask for, and remembers for a moment the ids that name
// no activity, so that public reads of activities reach PostgreSQL a
// bounded number of times however many clients ask: a lookup that misses
// both is read with the other lookups of the moment in one statement, one
// statement in flight at a time.
//
// An entry lives for TTL: a change of an activity's settings made through
// this instance drops its entry at once (the cache is a
// registration.Observer), one made through another instance shows here
// within TTL. An id found unknown is refused for UnknownTTL without asking
// the database; an activity created through this instance is never
// refused as unknown (see Created), one created through another shows
// within UnknownTTL.
package activitycache

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/groupcommit"
	"github.com/physiciansnet/capacityd/registration"
)

// Defaults of Config.
const (
	DefaultTTL        = 5 * time.Second
	DefaultUnknownTTL = 5 * time.Second
	// DefaultMaxEntries bounds the known and, separately, the unknown
	// entries.
	DefaultMaxEntries = 50_000
	// DefaultMaxBatch caps the ids one lookup statement takes.
	DefaultMaxBatch = 5000
	// A crowd of lookups gathers: after a statement that took at least
	// gatherAt ids, the next waits until as many more have queued, or for
	// gatherFor. A crowd of reads of ids the instance does not know (ids
	// that name nothing, sent to make the database work) then costs a
	// statement per gatherFor, however it trickles in; the few lookups of
	// quiet times (an activity's settings reloaded after their TTL) never
	// wait.
	gatherAt  = 8
	gatherFor = 100 * time.Millisecond
)

// Loader reads the activities among ids that exist (their settings; seat
// counts are not needed), in one statement.
type Loader func(ctx context.Context, ids []string) ([]registration.Activity, error)

// Config configures a Cache.
type Config struct {
	Load Loader
	// TTL is the lifetime of a known activity's entry, UnknownTTL that of
	// an unknown id's; defaults DefaultTTL and DefaultUnknownTTL.
	TTL        time.Duration
	UnknownTTL time.Duration
	// MaxEntries bounds each of the two maps; default DefaultMaxEntries.
	MaxEntries int
	// LoadTimeout bounds one batched load, so that a read waiting for it
	// answers near its request's deadline when the database is silent;
	// default groupcommit's.
	LoadTimeout time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Registerer receives the metrics; nil: none.
	Registerer prometheus.Registerer
}

// Cache is the per-instance cache of activity settings.
type Cache struct {
	load       Loader
	ttl        time.Duration
	unknownTTL time.Duration
	now        func() time.Time
	lookups    *groupcommit.Group[struct{}, string, lookup]
	reads      *prometheus.CounterVec

	mu      sync.Mutex
	known   *bounded[registration.Activity]
	unknown *bounded[struct{}]
	// epoch moves on every invalidation, so that a lookup that read the
	// database before one does not store what it read.
	epoch uint64
}

type lookup struct {
	a     registration.Activity
	found bool
}

// New returns a Cache.
func New(cfg Config) *Cache {
	maxEntries := cmp.Or(cfg.MaxEntries, DefaultMaxEntries)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Cache{
		load:       cfg.Load,
		ttl:        cmp.Or(cfg.TTL, DefaultTTL),
		unknownTTL: cmp.Or(cfg.UnknownTTL, DefaultUnknownTTL),
		now:        cfg.Now,
		known:      newBounded[registration.Activity](maxEntries),
		unknown:    newBounded[struct{}](maxEntries),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_activity_cache_reads_total",
			Help: "Public reads of an activity's settings by result: hit (cached), unknown (cached as naming no activity), lookup (read from the database).",
		}, []string{"result"}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(c.reads)
	}
	c.lookups = groupcommit.New(groupcommit.PerKey(c.lookupAll), groupcommit.Options{
		MaxBatch: DefaultMaxBatch, FlushTimeout: cfg.LoadTimeout, GatherAt: gatherAt, GatherFor: gatherFor,
	})
	return c
}

// Cached returns the activity's settings when they are cached (ok), or
// not_found when the id is cached as unknown; neither (nil error, not ok)
// means only Get can tell.
func (c *Cache) Cached(id string) (a registration.Activity, ok bool, err error) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.known.get(id, now); ok {
		c.reads.WithLabelValues("hit").Inc()
		return a, true, nil
	}
	if _, ok := c.unknown.get(id, now); ok {
		c.reads.WithLabelValues("unknown").Inc()
		return registration.Activity{}, false, registration.ActivityNotFound(id)
	}
	return registration.Activity{}, false, nil
}

// Get returns the activity's settings (Taken, Remaining and Waiting are
// zero), or not_found. Before it asks the database, it calls beforeLookup
// (when set), whose error it returns instead: the place for a rate limit
// on reads that reach the database.
func (c *Cache) Get(ctx context.Context, id string, beforeLookup func() error) (registration.Activity, error) {
	if a, ok, err := c.Cached(id); ok || err != nil {
		return a, err
	}
	if beforeLookup != nil {
		if err := beforeLookup(); err != nil {
			return registration.Activity{}, err
		}
	}
	c.reads.WithLabelValues("lookup").Inc()
	l, err := c.lookups.Submit(ctx, struct{}{}, id)
	switch {
	case errors.Is(err, groupcommit.ErrWithdrawn):
		return registration.Activity{}, capacityd.Unavailable(err, "the request ended before the activity was read")
	case errors.Is(err, groupcommit.ErrClosed):
		return registration.Activity{}, capacityd.Unavailable(err, "the service is shutting down")
	case err != nil:
		return registration.Activity{}, err
	case !l.found:
		return registration.Activity{}, registration.ActivityNotFound(id)
	}
	return l.a, nil
}

// lookupAll is the flush of the lookups: one statement for every id looked
// up meanwhile, whose answers are cached.
func (c *Cache) lookupAll(ctx context.Context, _ struct{}, ids []string) ([]lookup, error) {
	c.mu.Lock()
	epoch := c.epoch
	c.mu.Unlock()
	rows, err := c.load(ctx, slices.Compact(slices.Sorted(slices.Values(ids))))
	if err != nil {
		return nil, err
	}
	byID := make(map[string]registration.Activity, len(rows))
	for _, a := range rows {
		byID[a.ID] = a
	}
	out := make([]lookup, len(ids))
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, id := range ids {
		out[i].a, out[i].found = byID[id]
		if c.epoch != epoch {
			continue
		}
		if out[i].found {
			c.known.put(id, out[i].a, now.Add(c.ttl), now)
		} else {
			c.unknown.put(id, struct{}{}, now.Add(c.unknownTTL), now)
		}
	}
	return out, nil
}

// Created makes an activity just created through this instance visible to
// the reads that follow, even if its id was cached as unknown, and caches
// its settings.
func (c *Cache) Created(a registration.Activity) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unknown.remove(a.ID)
	c.epoch++
	a.Taken, a.Remaining, a.Waiting = 0, 0, 0
	c.known.put(a.ID, a, now.Add(c.ttl), now)
}

// Committed drops the entries of the activities whose settings a change
// transaction changed. It implements registration.Observer.
func (c *Cache) Committed(_ context.Context, commits []registration.Commit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cm := range commits {
		if !cm.Failed && cm.ActivityChanged {
			c.known.remove(cm.ActivityID)
			c.epoch++
		}
	}
}

// Close ends the lookups; those in flight finish first.
func (c *Cache) Close(ctx context.Context) error { return c.lookups.Close(ctx) }
