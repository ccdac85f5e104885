// Package capacity is the display tier: a per-activity Redis counter of
// taken seats (and of the waiting list) that widgets read and that sheds
// signups once an activity is full, without touching PostgreSQL.
//
// The counter is never the authority. It is updated asymmetrically: a seat
// is held before a signup reaches the authority, and a freed seat is shown
// only after the transaction that freed it committed; so it errs towards
// showing fewer seats. After each commit it takes the authority's counts
// as of the commit's event seq. It carries a TTL set when it is built from
// the authority; a missing counter is rebuilt by the next commit (from the
// counts it carries) or seat read. Redis errors are reported to the
// caller, which falls back to the authority.
//
// A pooled activity (one that shares seats with others in capacity pools)
// has, besides its own counter, a counter per pool in another Redis
// Cluster slot: its seats show the fewest left of the activity and its
// pools, and its gate holds a signup's seats in all of them (see Reserve).
package capacity

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/physiciansnet/capacityd/internal/groupcommit"
	"github.com/physiciansnet/capacityd/internal/lru"
	"github.com/physiciansnet/capacityd/registration"
)

// Authority reads an activity's seats, or a pool's, in the database.
type Authority interface {
	// SeatState returns the activity's capacity, waiting-list setting,
	// occupying and waitlisted registrations and last event seq, and the
	// states of its pools, all read in one snapshot, or a not_found
	// *capacityd.Error.
	SeatState(ctx context.Context, activityID string) (registration.SeatState, error)
	// PoolSeatState returns a pool's capacity, taken, last seq and
	// activities, read in one snapshot, or a not_found *capacityd.Error.
	PoolSeatState(ctx context.Context, poolID string) (registration.PoolSeatState, error)
}

// Announcer tells the seat streams of every instance that an activity's
// seats changed.
type Announcer interface {
	Announce(ctx context.Context, activityID string)
}

// ErrNoCounter means the activity has no display counter yet (or it
// expired): the signup goes to the authority without a hold.
var ErrNoCounter = errors.New("capacity: no display counter for the activity")

// ErrNoCache means there is no display tier configured.
var ErrNoCache = errors.New("capacity: no display tier")

// ErrSuspended means the display tier failed a moment ago and is not asked
// again until its suspension ends.
var ErrSuspended = errors.New("capacity: display tier suspended after an error")

// suspension is how long the display tier is left alone after an error, so
// that an outage costs one failed call per second, not one per request.
const suspension = time.Second

// Config configures a Counter.
type Config struct {
	// Redis is the display tier; nil means none (every read from the
	// authority).
	Redis redis.UniversalClient
	// Authority rebuilds counters and answers when Redis cannot.
	Authority Authority
	// Announcer is told when a counter is corrected or invalidated
	// outside a commit; nil: nobody.
	Announcer Announcer
	// TTL is the lifetime of a counter from its build. Default 60s.
	TTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger logs Redis errors, at most once per ErrorLogEvery.
	Logger *slog.Logger
	// Registerer registers the metrics; nil means none.
	Registerer prometheus.Registerer
	// Memory keeps the seats of warm activities in this process, so that
	// they are read without a round trip; nil: every read asks Redis.
	// Whoever announces and receives the seat changes (this instance's
	// commits and the others') applies them to it (Memory.Apply), and
	// forgets it when they may have been missed.
	Memory *Memory
	// Live reports whether announcements of seat changes reach the
	// memory now; nil: never (the memory is not used).
	Live func() bool
}

// Counter is the display counter of every activity.
type Counter struct {
	rdb       redis.UniversalClient
	authority Authority
	announcer Announcer
	ttl       time.Duration
	now       func() time.Time
	log       *slog.Logger
	rebuilds  singleflight.Group
	metrics   *metrics
	memory    *Memory
	live      func() bool

	logMu   sync.Mutex
	lastLog time.Time

	// suspendedUntil (unix nanoseconds) skips Redis after an error; stale
	// is set by an error and makes the next success invalidate the
	// counters of recently active activities, which may have missed
	// changes while Redis could not be reached.
	suspendedUntil atomic.Int64
	stale          atomic.Bool

	activeMu    sync.Mutex
	active      map[string]time.Time // activity id → last change seen here
	activePools map[string]time.Time // pool id → last change seen here

	// together is true when one script may touch the keys of several
	// counters (Redis is not a Cluster): a pooled activity's gate is then
	// one script (pooledReserveScript).
	together bool
	// poolsOf remembers the pools field of the counters of activities
	// that signed up here, so that the gate of a pooled activity can
	// name its pools' keys up front.
	poolsMu sync.Mutex
	poolsOf *lru.Cache[string, string]
	// gates sends the signups' gate runs that come at once in one
	// pipeline (gate_batch.go).
	gates *groupcommit.Group[struct{}, script, gateReply]
}

// DefaultTTL is the lifetime of a display counter before it is rebuilt
// from the authority (SEAT_CACHE_TTL).
const DefaultTTL = 60 * time.Second

// New returns a Counter.
func New(cfg Config) *Counter {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Counter{
		rdb:         cfg.Redis,
		authority:   cfg.Authority,
		announcer:   cfg.Announcer,
		ttl:         cfg.TTL,
		now:         cfg.Now,
		log:         cfg.Logger,
		metrics:     newMetrics(cfg.Registerer),
		memory:      cfg.Memory,
		live:        cfg.Live,
		active:      make(map[string]time.Time),
		activePools: make(map[string]time.Time),
		together:    !isCluster(cfg.Redis),
		poolsOf:     lru.New[string, string](DefaultMemorySize),
	}
	c.gates = c.newGates()
	return c
}

// isCluster reports whether rdb is a Redis Cluster client, whose scripts
// may touch the keys of one slot only.
func isCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// Key returns the Redis key of an activity's counter. Every key of one
// activity shares the hash tag {<activity id>}, so they live in one Redis
// Cluster slot.
func Key(activityID string) string { return "seats:{" + activityID + "}" }

// PoolKey returns the Redis key of a pool's counter, with the pool's own
// hash tag: on a Redis Cluster it lives in another slot than the counters
// of its activities.
func PoolKey(poolID string) string { return "pool:{" + poolID + "}" }

// HoldsKey returns the key of the holds of a counter (an activity's or a
// pool's, by its key): a sorted set of the holds counted in its held,
// scored by their deadlines, in the counter's slot.
func HoldsKey(counterKey string) string { return counterKey + ":holds" }

// keys returns a counter's key and its holds' key, the keys of every
// script on the counter.
func keys(counterKey string) []string { return []string{counterKey, HoldsKey(counterKey)} }
