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
package capacity

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"github.com/physiciansnet/capacityd/registration"
)

func newSeats(id string, capacity, taken, waiting int, source string, now time.Time) registration.Seats {
	return registration.Seats{ActivityID: id, Capacity: capacity, Taken: taken, Remaining: max(0, capacity-taken),
		Waiting: waiting, Source: source, AsOf: now.UTC().Truncate(time.Second)}
}

// Authority reads an activity's seats in the database.
type Authority interface {
	// SeatState returns the activity's capacity, waiting-list setting,
	// occupying and waitlisted registrations and last event seq, all read
	// in one snapshot, or a not_found *capacityd.Error.
	SeatState(ctx context.Context, activityID string) (registration.SeatState, error)
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
	return &Counter{
		rdb:       cfg.Redis,
		authority: cfg.Authority,
		announcer: cfg.Announcer,
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

// Reserve holds seats of the activity for a signup in flight, deciding
// by registration.Admit on the counter's taken + held (the Lua form of the
// rule, in scripts.go). It implements registration.Gate:
// registration.ErrGateFull when the rule refuses, registration.ErrGateWaitlist
// when the signup joins the waiting list, ErrNoCounter when the activity has no counter (the
// authority decides, and its commit builds the counter: see Committed),
// and a wrapped Redis error when the display tier cannot answer.
func (c *Counter) Reserve(ctx context.Context, activityID string, seats int) (registration.Hold, error) {
	seats = max(seats, 1)
	if err := c.usable(); err != nil {
		return registration.Hold{}, err
	}
	c.touch(activityID)
	v, err := reserveScript.Run(ctx, c.rdb, []string{Key(activityID)}, seats).Slice()
	if err != nil {
		return registration.Hold{}, c.redisError("reserve", err)
	}
	switch n, _ := v[0].(int64); n {
	case -1:
		return registration.Hold{}, ErrNoCounter
	case -2:
		return registration.Hold{}, registration.ErrGateFull
	case -3:
		return registration.Hold{}, registration.ErrGateWaitlist
	}
	gen, _ := v[1].(string)
	c.recovered(ctx)
	return registration.Hold{Gen: gen, Seats: seats}, nil
}

// Committed applies the commits of a change transaction to the display
// counters, in one pipeline: the authority's taken and waiting as of the
// commit's seq, the capacity and waiting-list setting as of the activity's
// updated_at (neither steps back to an older commit's), and the holds of
// the batch's signups given back; a missing counter is built from the
// commit (the authority's state as of its seq). It implements
// registration.Observer.
func (c *Counter) Committed(ctx context.Context, commits []registration.Commit) {
	if c.usable() != nil {
		return
	}
	var keys [][]string
	var args [][]any
	gen := c.newGen()
	for _, cm := range commits {
		c.touch(cm.ActivityID)
		a := []any{-1, 0, 0, 0, 0, 0, c.ttl.Milliseconds(), gen, 0}
		if !cm.Failed {
			st := cm.State
			a[0], a[1], a[2], a[3], a[4] = st.LastSeq, st.Taken, st.Waiting, st.Capacity, boolFlag(st.Waitlist)
			a[5], a[8] = st.UpdatedAt.UnixMicro(), boolFlag(st.Policy == registration.PolicyFill)
		} else if len(cm.Holds) == 0 {
			continue
		}
		keys = append(keys, []string{Key(cm.ActivityID)})
		args = append(args, append(a, holdArgs(cm.Holds)...))
	}
	if len(keys) == 0 {
		return
	}
	if err := runScripts(ctx, c.rdb, settleScript, keys, args); err != nil {
		_ = c.redisError("settle", err)
	}
}

// holdArgs returns (generation, seats) pairs of holds.
func holdArgs(hs []registration.Hold) []any {
	var out []any
	count := make(map[string]int)
	for _, h := range hs {
		if count[h.Gen] == 0 {
			out = append(out, h.Gen, 0)
		}
		count[h.Gen] += h.Count()
	}
	for i := 0; i < len(out); i += 2 {
		out[i+1] = count[out[i].(string)]
	}
	return out
}

// newGen returns a fresh counter generation, unique across instances.
func (c *Counter) newGen() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + hex.EncodeToString(b)
}

func boolFlag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// CachedSeats returns the activity's seat display from its counter when
// the counter is warm (ok), which also shows that the activity exists; ok
// is false when there is no counter or the display tier cannot answer. It
// never queries the database.
func (c *Counter) CachedSeats(ctx context.Context, activityID string) (registration.Seats, bool) {
	if c.usable() != nil {
		return registration.Seats{}, false
	}
	v, err := c.rdb.HMGet(ctx, Key(activityID), "taken", "held", "capacity", "waiting").Result()
	if err != nil {
		_ = c.redisError("read", err)
		return registration.Seats{}, false
	}
	c.recovered(ctx)
	n, ok := parseInts(v)
	if !ok {
		return registration.Seats{}, false
	}
	return newSeats(activityID, n[2], n[0]+n[1], n[3], registration.SourceCache, c.now()), true
}

// Seats returns the activity's seat display: from the counter while it is
// warm (no database query), else from the authority, rebuilding the counter
// on the way.
func (c *Counter) Seats(ctx context.Context, activityID string) (registration.Seats, error) {
	if c.usable() == nil {
		v, err := c.rdb.HMGet(ctx, Key(activityID), "taken", "held", "capacity", "waiting").Result()
		if err == nil {
			c.recovered(ctx)
			if n, ok := parseInts(v); ok {
				return newSeats(activityID, n[2], n[0]+n[1], n[3], registration.SourceCache, c.now()), nil
			}
			return c.rebuild(ctx, activityID)
		}
		_ = c.redisError("read", err)
		if ctx.Err() != nil {
			return registration.Seats{}, capacityd.Unavailable(ctx.Err(), "the request ended before the seats were read")
		}
	}
	st, err := c.authority.SeatState(ctx, activityID)
	if err != nil {
		return registration.Seats{}, err
	}
	return newSeats(activityID, st.Capacity, st.Taken, st.Waiting, registration.SourceDatabase, c.now()), nil
}

// parseInts parses the fields of an HMGET, all integers; ok is false when
// one is missing.
func parseInts(v []any) ([]int, bool) {
	out := make([]int, len(v))
	for i, x := range v {
		s, ok := x.(string)
		if !ok {
			return nil, false
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// rebuild reads the activity at the authority and writes the counter if it
// is still missing. One rebuild per activity runs at a time in this process.
func (c *Counter) rebuild(ctx context.Context, activityID string) (registration.Seats, error) {
	v, err, _ := c.rebuilds.Do(activityID, func() (any, error) {
		st, err := c.authority.SeatState(ctx, activityID)
		if err != nil {
			return nil, err
		}
		c.metrics.rebuilds.Inc()
		err = buildScript.Run(ctx, c.rdb, []string{Key(activityID)}, st.Taken, st.Capacity, st.Waiting,
			boolFlag(st.Waitlist), st.LastSeq, c.ttl.Milliseconds(), c.newGen(), st.UpdatedAt.UnixMicro(),
			boolFlag(st.Policy == registration.PolicyFill)).Err()
		if err != nil {
			_ = c.redisError("rebuild", err)
		}
		return newSeats(activityID, st.Capacity, st.Taken, st.Waiting, registration.SourceDatabase, c.now()), nil
	})
	if err != nil {
		return registration.Seats{}, err
	}
	return v.(registration.Seats), nil
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
// the counters of the activities changed recently, so that the next commit
// or read rebuilds them from the authority: while Redis could not be
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
		c.announce(ctx, id)
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

func (c *Counter) announce(ctx context.Context, activityID string) {
	if c.announcer != nil {
		c.announcer.Announce(ctx, activityID)
	}
}

// recent returns the activities changed through this instance within
// window, with the time of their last change, and forgets older ones (and
// their drift).
func (c *Counter) recent(window time.Duration) (active map[string]time.Time, forgotten []string) {
	now := c.now()
	c.activeMu.Lock()
	defer c.activeMu.Unlock()
	active = make(map[string]time.Time, len(c.active))
	for id, at := range c.active {
		if now.Sub(at) > window {
			delete(c.active, id)
			c.metrics.drift.DeleteLabelValues(id)
			forgotten = append(forgotten, id)
			continue
		}
		active[id] = at
	}
	return active, forgotten
}

// reading is one read of a counter next to the authority.
type reading struct {
	display int // taken + held
	gen     string
	state   registration.SeatState
}

// compare reads an activity's counter and then its state at the authority,
// and records their difference as the activity's drift; ok is false when
// there is no counter.
func (c *Counter) compare(ctx context.Context, activityID string) (r reading, ok bool, err error) {
	v, err := c.rdb.HMGet(ctx, Key(activityID), "taken", "held", "gen").Result()
	if err != nil {
		return r, false, c.redisError("reconcile", err)
	}
	n, ok := parseInts(v[:2])
	gen, _ := v[2].(string)
	if !ok || gen == "" {
		return r, false, nil
	}
	r.display, r.gen = n[0]+n[1], gen
	r.state, err = c.authority.SeatState(ctx, activityID)
	if err != nil {
		return r, false, err
	}
	c.metrics.drift.WithLabelValues(activityID).Set(float64(r.display - r.state.Taken))
	return r, true, nil
}

// correct resets an activity's counter of generation gen to the
// authority's state, and announces the change. It reports whether the
// counter was still of that generation.
func (c *Counter) correct(ctx context.Context, activityID, gen string, st registration.SeatState) bool {
	n, err := correctScript.Run(ctx, c.rdb, []string{Key(activityID)}, gen, st.Taken, st.Waiting, st.LastSeq).Int()
	if err != nil || n != 1 {
		return false
	}
	c.metrics.corrections.Inc()
	c.log.Info("display counter corrected", "activity_id", activityID)
	c.announce(ctx, activityID)
	return true
}
