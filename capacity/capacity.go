// Package capacity is the display tier: a per-activity Redis counter of
// taken seats that widgets read and that rejects signups once an activity is
// full, without touching PostgreSQL.
//
// The counter is never the authority. It is updated asymmetrically (reserved
// before a signup's insert, released after a cancellation commits), so it
// errs towards showing fewer seats; it carries a TTL set when it is built from
// the authority and is rebuilt on a miss. Redis errors are reported to the
// caller, which falls back to the authority.
package capacity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/physiciansnet/capacityd"
)

// Sources of a Seats reading.
const (
	SourceCache    = "cache"
	SourceDatabase = "database"
)

// Seats is the live seat display of an activity.
type Seats struct {
	ActivityID string    `json:"activity_id"`
	Capacity   int       `json:"capacity"`
	Taken      int       `json:"taken"`
	Remaining  int       `json:"remaining"`
	Source     string    `json:"source"`
	AsOf       time.Time `json:"as_of"`
}

func newSeats(id string, capacity, taken int, source string, now time.Time) Seats {
	return Seats{ActivityID: id, Capacity: capacity, Taken: taken,
		Remaining: max(0, capacity-taken), Source: source, AsOf: now.UTC().Truncate(time.Second)}
}

// Authority counts an activity's occupying registrations in the database.
type Authority interface {
	// SeatCount returns the activity's capacity and its number of
	// occupying registrations, or a not_found *capacityd.Error.
	SeatCount(ctx context.Context, activityID string) (capacity, taken int, err error)
}

// ErrFull means the display counter says the activity has no seat left.
var ErrFull = errors.New("capacity: activity full by the display counter")

// ErrNoCache means there is no display tier configured.
var ErrNoCache = errors.New("capacity: no display tier")

// ErrSuspended means the display tier failed a moment ago and is not asked
// again until its suspension ends.
var ErrSuspended = errors.New("capacity: display tier suspended after an error")

// suspension is how long the display tier is left alone after an error, so
// that an outage costs one failed call per second, not one per request.
const suspension = time.Second

// Hold is a seat reserved in the display counter for a signup in flight. The
// zero Hold holds nothing.
type Hold struct {
	// Gen is the generation of the counter the seat was reserved in; a
	// release only applies to the same generation.
	Gen string
}

// Held reports whether h holds a seat.
func (h Hold) Held() bool { return h.Gen != "" }

// Config configures a Counter.
type Config struct {
	// Redis is the display tier; nil means none (every read from the
	// authority).
	Redis redis.UniversalClient
	// Authority rebuilds counters and answers when Redis cannot.
	Authority Authority
	// TTL is the lifetime of a counter from its build. Default 60s.
	TTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger logs Redis errors, at most once per ErrorLogEvery.
	Logger *slog.Logger
	// Registerer registers the metrics; nil means none.
	Registerer prometheus.Registerer
}

// Counter is the display counter of every activity.
type Counter struct {
	rdb       redis.UniversalClient
	authority Authority
	ttl       time.Duration
	now       func() time.Time
	log       *slog.Logger
	rebuilds  singleflight.Group
	metrics   *metrics

	logMu   sync.Mutex
	lastLog time.Time

	// suspendedUntil (unix nanoseconds) skips Redis after an error; stale
	// is set by an error and makes the next success invalidate the
	// counters of recently active activities, which may have missed
	// changes while Redis could not be reached.
	suspendedUntil atomic.Int64
	stale          atomic.Bool

	activeMu sync.Mutex
	active   map[string]time.Time // activity id → last change seen here
}

// New returns a Counter.
func New(cfg Config) *Counter {
	if cfg.TTL <= 0 {
		cfg.TTL = 60 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Counter{
		rdb:       cfg.Redis,
		authority: cfg.Authority,
		ttl:       cfg.TTL,
		now:       cfg.Now,
		log:       cfg.Logger,
		metrics:   newMetrics(cfg.Registerer),
		active:    make(map[string]time.Time),
	}
}

// Key returns the Redis key of an activity's counter. Every key of one
// activity shares the hash tag {<activity id>}, so they live in one Redis
// Cluster slot.
func Key(activityID string) string { return "seats:{" + activityID + "}" }

// reserveScript reserves one seat.
//
// KEYS[1] the activity's counter hash (fields taken, capacity, gen).
// Returns {-1} when the key is missing (never creates it), {-2, taken,
// capacity} when taken >= capacity, else {taken after the increment, gen}.
var reserveScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'taken', 'capacity', 'gen')
if not v[1] or not v[2] then return {-1} end
local taken, capacity = tonumber(v[1]), tonumber(v[2])
if taken >= capacity then return {-2, taken, capacity} end
return {redis.call('HINCRBY', KEYS[1], 'taken', 1), v[3]}
`)

// releaseScript frees seats, never below zero.
//
// KEYS[1] the counter hash; ARGV[1] the generation the seats were reserved
// in, or "" for any; ARGV[2] how many seats. Returns the new taken, -1 when
// the key is missing, -2 when the generation differs (the counter was
// rebuilt since: nothing to undo).
var releaseScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'taken', 'gen')
if not v[1] then return -1 end
if ARGV[1] ~= '' and v[2] ~= ARGV[1] then return -2 end
local n = math.min(tonumber(v[1]), tonumber(ARGV[2]))
if n <= 0 then return tonumber(v[1]) end
return redis.call('HINCRBY', KEYS[1], 'taken', -n)
`)

// buildScript writes a counter only if none exists.
//
// KEYS[1] the counter hash; ARGV[1] taken, ARGV[2] capacity, ARGV[3] TTL in
// milliseconds, ARGV[4] a fresh generation. Returns 1 when written, 0 when a
// counter was already there.
var buildScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'taken', ARGV[1], 'capacity', ARGV[2], 'gen', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// setCapacityScript changes the capacity of an existing counter.
//
// KEYS[1] the counter hash; ARGV[1] the new capacity. Returns 1 when set, 0
// when there was no counter.
var setCapacityScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'capacity', ARGV[1])
return 1
`)

// correctScript replaces taken in the counter of a given generation.
//
// KEYS[1] the counter hash; ARGV[1] the generation, ARGV[2] the new taken.
// Returns 1 when corrected, 0 otherwise.
var correctScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'taken', ARGV[2])
return 1
`)

// Reserve holds one seat of the activity in the display counter, building
// the counter from the authority first if it is missing. It returns ErrFull
// when the counter has no seat left, a *capacityd.Error when the authority
// refuses the rebuild (not_found, unavailable), and a wrapped Redis error
// when the display tier cannot answer; the caller then goes to the
// authority without a hold.
func (c *Counter) Reserve(ctx context.Context, activityID string) (Hold, error) {
	if err := c.usable(); err != nil {
		return Hold{}, err
	}
	c.touch(activityID)
	key := Key(activityID)
	for range 3 {
		v, err := reserveScript.Run(ctx, c.rdb, []string{key}).Slice()
		if err != nil {
			return Hold{}, c.redisError("reserve", err)
		}
		n, _ := v[0].(int64)
		switch {
		case n == -1:
			if _, err := c.rebuild(ctx, activityID); err != nil {
				return Hold{}, err
			}
			continue
		case n == -2:
			return Hold{}, ErrFull
		}
		gen, _ := v[1].(string)
		if gen == "" {
			gen = "-"
		}
		c.recovered(ctx)
		return Hold{Gen: gen}, nil
	}
	return Hold{}, errors.New("capacity: counter vanished three times in a row")
}

// Release undoes a Hold whose signup the authority refused or failed. It is
// a no-op when the counter was rebuilt since the hold was taken.
func (c *Counter) Release(ctx context.Context, activityID string, h Hold) {
	if !h.Held() || c.usable() != nil {
		return
	}
	gen := h.Gen
	if gen == "-" {
		gen = ""
	}
	if err := releaseScript.Run(ctx, c.rdb, []string{Key(activityID)}, gen, 1).Err(); err != nil {
		_ = c.redisError("release", err)
	}
}

// Freed records that n seats of the activity were freed by a committed
// cancellation or expiry.
func (c *Counter) Freed(ctx context.Context, activityID string, n int) {
	if c.usable() != nil {
		return
	}
	c.touch(activityID)
	if err := releaseScript.Run(ctx, c.rdb, []string{Key(activityID)}, "", n).Err(); err != nil {
		_ = c.redisError("free", err)
	}
}

// SetCapacity changes the capacity in the activity's counter, if it has one.
func (c *Counter) SetCapacity(ctx context.Context, activityID string, capacity int) {
	if c.rdb == nil {
		return
	}
	c.touch(activityID)
	if err := setCapacityScript.Run(ctx, c.rdb, []string{Key(activityID)}, capacity).Err(); err != nil {
		_ = c.redisError("set capacity", err)
		// A counter left with the old capacity must not outlive the change.
		c.rdb.Del(ctx, Key(activityID))
	}
}

// Seats returns the activity's seat display: from the counter while it is
// warm (no database query), else from the authority, rebuilding the counter
// on the way.
func (c *Counter) Seats(ctx context.Context, activityID string) (Seats, error) {
	if c.usable() == nil {
		v, err := c.rdb.HMGet(ctx, Key(activityID), "taken", "capacity").Result()
		if err == nil {
			c.recovered(ctx)
			if taken, capacity, ok := parseCounter(v); ok {
				return newSeats(activityID, capacity, taken, SourceCache, c.now()), nil
			}
			return c.rebuild(ctx, activityID)
		}
		_ = c.redisError("read", err)
		if ctx.Err() != nil {
			return Seats{}, capacityd.Unavailable(ctx.Err(), "the request ended before the seats were read")
		}
	}
	capacity, taken, err := c.authority.SeatCount(ctx, activityID)
	if err != nil {
		return Seats{}, err
	}
	return newSeats(activityID, capacity, taken, SourceDatabase, c.now()), nil
}

func parseCounter(v []any) (taken, capacity int, ok bool) {
	if len(v) != 2 {
		return 0, 0, false
	}
	ts, ok1 := v[0].(string)
	cs, ok2 := v[1].(string)
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	t, err1 := strconv.Atoi(ts)
	cp, err2 := strconv.Atoi(cs)
	return t, cp, err1 == nil && err2 == nil
}

// rebuild counts the activity at the authority and writes the counter if it
// is still missing. One rebuild per activity runs at a time in this process.
func (c *Counter) rebuild(ctx context.Context, activityID string) (Seats, error) {
	v, err, _ := c.rebuilds.Do(activityID, func() (any, error) {
		capacity, taken, err := c.authority.SeatCount(ctx, activityID)
		if err != nil {
			return nil, err
		}
		c.metrics.rebuilds.Inc()
		gen := strconv.FormatInt(c.now().UnixNano(), 36)
		err = buildScript.Run(ctx, c.rdb, []string{Key(activityID)}, taken, capacity, c.ttl.Milliseconds(), gen).Err()
		if err != nil {
			_ = c.redisError("rebuild", err)
		}
		return newSeats(activityID, capacity, taken, SourceDatabase, c.now()), nil
	})
	if err != nil {
		return Seats{}, err
	}
	return v.(Seats), nil
}

// Ping checks that the display tier answers.
func (c *Counter) Ping(ctx context.Context) error {
	if c.rdb == nil {
		return ErrNoCache
	}
	return c.rdb.Ping(ctx).Err()
}

// usable says whether Redis may be asked now: there is a display tier and
// it is not suspended after a recent error.
func (c *Counter) usable() error {
	if c.rdb == nil {
		return ErrNoCache
	}
	if time.Now().UnixNano() < c.suspendedUntil.Load() {
		return ErrSuspended
	}
	return nil
}

// recovered runs after a successful Redis call. After an outage it deletes
// the counters of the activities changed recently, so that the next read or
// reservation rebuilds them from the authority: while Redis could not be
// reached, signups and cancellations went to the authority alone.
func (c *Counter) recovered(ctx context.Context) {
	if !c.stale.CompareAndSwap(true, false) {
		return
	}
	c.activeMu.Lock()
	ids := make([]string, 0, len(c.active))
	for id := range c.active {
		ids = append(ids, id)
	}
	c.activeMu.Unlock()
	for _, id := range ids {
		if err := c.rdb.Del(ctx, Key(id)).Err(); err != nil {
			c.stale.Store(true)
			return
		}
		// Streams missed the changes made while Redis was away.
		c.rdb.Publish(ctx, Channel, id)
	}
	c.log.Info("redis display tier back; counters of recently active activities invalidated", "count", len(ids))
}

// redisError counts err, suspends the display tier for a moment, logs at
// most once a second, and returns err wrapped.
//
// A request that ended (its client went away, its deadline passed) is not a
// Redis failure: that error is returned as it is, with no suspension.
func (c *Counter) redisError(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("capacity: redis %s: %w", op, err)
	}
	c.metrics.redisErrors.WithLabelValues(op).Inc()
	c.stale.Store(true)
	c.suspendedUntil.Store(time.Now().Add(suspension).UnixNano())
	c.logMu.Lock()
	if now := time.Now(); now.Sub(c.lastLog) >= time.Second {
		c.lastLog = now
		c.logMu.Unlock()
		c.log.Warn("redis display tier error; falling back to the authority", "op", op, "err", err)
	} else {
		c.logMu.Unlock()
	}
	return fmt.Errorf("capacity: redis %s: %w", op, err)
}

func (c *Counter) touch(activityID string) {
	c.activeMu.Lock()
	c.active[activityID] = c.now()
	c.activeMu.Unlock()
}
