// Package settingscache keeps, per instance, the settings of the
// activities (and of the pools) that public reads ask for, and remembers
// for a moment the ids that name none, so that public reads reach
// PostgreSQL a bounded number of times however many clients ask: a lookup
// that misses both is read with the other lookups of the moment in one
// statement, one statement in flight at a time.
//
// An entry lives for TTL: a change of settings made through this instance
// drops its entry at once (the cache is a registration.Observer), one made
// through another instance shows here within TTL. An id found unknown is
// refused for UnknownTTL without asking the database; one created through
// this instance is never refused as unknown (see Created), one created
// through another shows within UnknownTTL.
package settingscache

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

// Loader reads the activities (or pools) among ids that exist (their
// settings; seat counts are not needed), in one statement.
type Loader[T any] func(ctx context.Context, ids []string) ([]T, error)

// Kind is what a Cache keeps: activities or pools.
type Kind[T any] struct {
	// Name names the cache in its metric:
	// capacityd_<Name>_cache_reads_total.
	Name string
	// ID returns the public id of v.
	ID func(v T) string
	// Settings returns v without its seat counts (Created keeps them).
	Settings func(v T) T
	// NotFound is the error of an id that names nothing.
	NotFound func(id string) error
	// Changed returns the ids whose settings a commit changed, or all
	// when it may have changed any.
	Changed func(c registration.Commit) (ids []string, all bool)
}

// Activities is the Kind of activity settings.
var Activities = Kind[registration.Activity]{
	Name: "activity",
	ID:   func(a registration.Activity) string { return a.ID },
	Settings: func(a registration.Activity) registration.Activity {
		a.Taken, a.Remaining, a.Waiting = 0, 0, 0
		return a
	},
	NotFound: func(id string) error { return registration.ActivityNotFound(id) },
	Changed: func(c registration.Commit) ([]string, bool) {
		if c.ActivityChanged {
			return []string{c.ActivityID}, false
		}
		return nil, false
	},
}

// Pools is the Kind of pool settings. A pool's own change drops its
// entry; a change of an activity's settings drops every pool's, since
// the activity may have joined or left pools (which lists its pools'
// activities) — such changes are rare.
var Pools = Kind[registration.Pool]{
	Name: "pool",
	ID:   func(p registration.Pool) string { return p.ID },
	Settings: func(p registration.Pool) registration.Pool {
		p.Taken, p.Remaining, p.Reserved = 0, 0, 0
		return p
	},
	NotFound: func(id string) error { return registration.PoolNotFound(id) },
	Changed: func(c registration.Commit) ([]string, bool) {
		if c.ActivityChanged {
			return nil, true
		}
		if c.ActivityID != "" {
			return nil, false
		}
		ids := make([]string, len(c.Pools))
		for i, p := range c.Pools {
			ids[i] = p.PoolID
		}
		return ids, false
	},
}

// Config configures a Cache.
type Config[T any] struct {
	Kind Kind[T]
	Load Loader[T]
	// TTL is the lifetime of a known entry, UnknownTTL that of an unknown
	// id's; defaults DefaultTTL and DefaultUnknownTTL.
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

// Cache is the per-instance cache of the settings of one Kind.
type Cache[T any] struct {
	kind       Kind[T]
	load       Loader[T]
	ttl        time.Duration
	unknownTTL time.Duration
	now        func() time.Time
	lookups    *groupcommit.Group[struct{}, string, lookup[T]]
	reads      *prometheus.CounterVec

	mu      sync.Mutex
	known   *bounded[T]
	unknown *bounded[struct{}]
	// epoch moves on every invalidation, so that a lookup that read the
	// database before one does not store what it read.
	epoch uint64
}

type lookup[T any] struct {
	v     T
	found bool
}

// New returns a Cache.
func New[T any](cfg Config[T]) *Cache[T] {
	maxEntries := cmp.Or(cfg.MaxEntries, DefaultMaxEntries)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Cache[T]{
		kind:       cfg.Kind,
		load:       cfg.Load,
		ttl:        cmp.Or(cfg.TTL, DefaultTTL),
		unknownTTL: cmp.Or(cfg.UnknownTTL, DefaultUnknownTTL),
		now:        cfg.Now,
		known:      newBounded[T](maxEntries),
		unknown:    newBounded[struct{}](maxEntries),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_" + cfg.Kind.Name + "_cache_reads_total",
			Help: "Public reads of an " + cfg.Kind.Name + "'s settings by result: hit (cached), unknown (cached as naming no " + cfg.Kind.Name + "), lookup (read from the database).",
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

// Cached returns the settings of id when they are cached (ok), or
// not_found when the id is cached as unknown; neither (nil error, not ok)
// means only Get can tell.
func (c *Cache[T]) Cached(id string) (v T, ok bool, err error) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.known.get(id, now); ok {
		c.reads.WithLabelValues("hit").Inc()
		return v, true, nil
	}
	if _, ok := c.unknown.get(id, now); ok {
		c.reads.WithLabelValues("unknown").Inc()
		return v, false, c.kind.NotFound(id)
	}
	return v, false, nil
}

// Get returns the settings of id (its seat counts are zero), or
// not_found. Before it asks the database, it calls beforeLookup (when
// set), whose error it returns instead: the place for a rate limit on
// reads that reach the database.
func (c *Cache[T]) Get(ctx context.Context, id string, beforeLookup func() error) (T, error) {
	var zero T
	if v, ok, err := c.Cached(id); ok || err != nil {
		return v, err
	}
	if beforeLookup != nil {
		if err := beforeLookup(); err != nil {
			return zero, err
		}
	}
	c.reads.WithLabelValues("lookup").Inc()
	l, err := c.lookups.Submit(ctx, struct{}{}, id)
	switch {
	case errors.Is(err, groupcommit.ErrWithdrawn):
		return zero, capacityd.Unavailable(err, "the request ended before the %s was read", c.kind.Name)
	case errors.Is(err, groupcommit.ErrClosed):
		return zero, capacityd.Unavailable(err, "the service is shutting down")
	case err != nil:
		return zero, err
	case !l.found:
		return zero, c.kind.NotFound(id)
	}
	return l.v, nil
}

// lookupAll is the flush of the lookups: one statement for every id looked
// up meanwhile, whose answers are cached.
func (c *Cache[T]) lookupAll(ctx context.Context, _ struct{}, ids []string) ([]lookup[T], error) {
	c.mu.Lock()
	epoch := c.epoch
	c.mu.Unlock()
	rows, err := c.load(ctx, slices.Compact(slices.Sorted(slices.Values(ids))))
	if err != nil {
		return nil, err
	}
	byID := make(map[string]T, len(rows))
	for _, v := range rows {
		byID[c.kind.ID(v)] = v
	}
	out := make([]lookup[T], len(ids))
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, id := range ids {
		out[i].v, out[i].found = byID[id]
		if c.epoch != epoch {
			continue
		}
		if out[i].found {
			c.known.put(id, out[i].v, now.Add(c.ttl), now)
		} else {
			c.unknown.put(id, struct{}{}, now.Add(c.unknownTTL), now)
		}
	}
	return out, nil
}

// Created makes v, just created through this instance, visible to the
// reads that follow, even if its id was cached as unknown, and caches its
// settings.
func (c *Cache[T]) Created(v T) {
	now := c.now()
	id := c.kind.ID(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unknown.remove(id)
	c.epoch++
	c.known.put(id, c.kind.Settings(v), now.Add(c.ttl), now)
}

// Forget drops the entries of ids, whose settings changed outside a
// change transaction (a pool's activities, when an activity is created in
// it).
func (c *Cache[T]) Forget(ids ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		c.known.remove(id)
	}
	c.epoch++
}

// Committed drops the entries whose settings a change transaction
// changed. It implements registration.Observer.
func (c *Cache[T]) Committed(_ context.Context, commits []registration.Commit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cm := range commits {
		if cm.Failed {
			continue
		}
		ids, all := c.kind.Changed(cm)
		switch {
		case all:
			c.known = newBounded[T](c.known.entries.Cap())
		case len(ids) == 0:
			continue
		}
		for _, id := range ids {
			c.known.remove(id)
		}
		c.epoch++
	}
}

// Close ends the lookups; those in flight finish first.
func (c *Cache[T]) Close(ctx context.Context) error { return c.lookups.Close(ctx) }
