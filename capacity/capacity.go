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
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/lru"
	"github.com/physiciansnet/capacityd/registration"
)

// newSeats returns the seat display of counts c: remaining is what a new
// signup could get (registration.Counts.Remaining).
func newSeats(id string, c registration.Counts, source string, now time.Time) registration.Seats {
	return registration.Seats{ActivityID: id, Capacity: c.Capacity, Taken: c.Taken, Reserved: c.Reserved,
		Remaining: c.Remaining(), Waiting: c.Waiting, Source: source, AsOf: now.UTC().Truncate(time.Second)}
}

// stateSeats returns the seat display of an activity's state at the
// authority.
func stateSeats(id string, st registration.SeatState, now time.Time) registration.Seats {
	return newSeats(id, st.Counts(), registration.SourceDatabase, now)
}

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

// DefaultHoldLifetime is how long a hold of a request without a deadline
// counts.
const DefaultHoldLifetime = 30 * time.Second

// holdLifetime returns how long a hold for a request of ctx counts: until
// the request's deadline (at least a millisecond), else
// DefaultHoldLifetime.
func holdLifetime(ctx context.Context) int64 {
	d, ok := ctx.Deadline()
	if !ok {
		return DefaultHoldLifetime.Milliseconds()
	}
	return max(time.Until(d).Milliseconds(), 1)
}

// Reserve holds seats of the activity for a signup in flight, deciding
// by registration.Admit on the counter's taken + held (the Lua form of the
// rule, in scripts.go). It implements registration.Gate:
// registration.ErrGateFull when the rule refuses, registration.ErrGateWaitlist
// when the signup joins the waiting list, ErrNoCounter when the activity has no counter (the
// authority decides, and its commit builds the counter: see Committed),
// and a wrapped Redis error when the display tier cannot answer.
//
// An activity of no pool costs one script. So does a pooled activity on
// a Redis that is not a Cluster, once this process knows its pools (from
// an earlier signup's answer): one script holds the seats in its counter
// and its pools' counters, or none (pooledReserveScript). On a Redis
// Cluster, and for a pooled activity not known here yet, the seats are
// held in its counter first and then in each of its pools' counters, one
// script per pool (they live in other slots of a Redis Cluster) in one
// pipeline; the Hold carries them all. If a pool has no room left, every
// seat held for the signup is given back and the answer is the one
// registration.Admit gives when the pools leave too few seats: the waiting
// list when the activity keeps one, else full (which the service confirms
// at the authority before anyone is refused). A missing pool counter is
// answered like a missing activity counter, after the holds are given
// back: ErrNoCounter.
func (c *Counter) Reserve(ctx context.Context, activityID string, seats int) (registration.Hold, error) {
	seats = max(seats, 1)
	if err := c.usable(); err != nil {
		return registration.Hold{}, err
	}
	c.touch(activityID)
	life, member := holdLifetime(ctx), c.newGen()+":"+strconv.Itoa(seats)
	known, learnt := c.knownPools(activityID)
	if learnt && known != "" && c.together {
		hold, done, err := c.reserveTogether(ctx, activityID, known, seats, life, member)
		if done {
			return hold, err
		}
	}
	v, err := reserveScript.Run(ctx, c.rdb, keys(Key(activityID)), seats, life, member).Slice()
	if err != nil {
		return registration.Hold{}, c.redisError("reserve", err)
	}
	if err := gateAnswer(v); err != nil {
		if errors.Is(err, registration.ErrGateWaitlist) {
			return registration.Hold{}, c.waitlistIn(ctx, splitIDs(field(v, 1)), seats)
		}
		return registration.Hold{}, err
	}
	gen, _ := v[1].(string)
	hold := registration.Hold{Gen: gen, Seats: seats}
	if !learnt || known != field(v, 2) {
		c.learnPools(activityID, field(v, 2))
	}
	if pools := splitIDs(field(v, 2)); len(pools) > 0 {
		if hold, err = c.reservePools(ctx, activityID, hold, pools, field(v, 3) == "1", life); err != nil {
			return registration.Hold{}, err
		}
	}
	c.recovered(ctx)
	return hold, nil
}

// waitlistIn answers a signup for seats that its activity's counter puts
// on the waiting list: ErrGateWaitlist, unless one of the activity's pools
// can never hold the seats (ErrGateFull) or has no counter (ErrNoCounter).
func (c *Counter) waitlistIn(ctx context.Context, pools []string, seats int) error {
	if len(pools) == 0 {
		return registration.ErrGateWaitlist
	}
	runs := make([]script, len(pools))
	for i, id := range pools {
		runs[i] = script{s: poolHoldsScript, keys: []string{PoolKey(id)}, args: []any{seats}}
	}
	cmds, err := runScripts(ctx, c.rdb, runs)
	if err != nil {
		return c.redisError("reserve", err)
	}
	for _, cmd := range cmds {
		switch n, _ := cmd.Int64(); n {
		case -1:
			return ErrNoCounter
		case 0:
			return registration.ErrGateFull
		}
	}
	return registration.ErrGateWaitlist
}

// gateAnswer returns the refusal a reserve script answered, nil when it
// held the seats.
func gateAnswer(v []any) error {
	switch n, _ := v[0].(int64); n {
	case -1:
		return ErrNoCounter
	case -2:
		return registration.ErrGateFull
	case -3:
		return registration.ErrGateWaitlist
	}
	return nil
}

// reserveTogether holds seats for a signup of a pooled activity whose
// pools this process knows (pools, the counter's pools field) in one
// script. done is false when the activity's pools are no longer those:
// the caller holds the seats the way that learns them.
func (c *Counter) reserveTogether(ctx context.Context, activityID, pools string, seats int, life int64,
	member string,
) (hold registration.Hold, done bool, err error) {
	ids := splitIDs(pools)
	ks := keys(Key(activityID))
	for _, id := range ids {
		c.touchPool(id)
		ks = append(ks, keys(PoolKey(id))...)
	}
	v, err := pooledReserveScript.Run(ctx, c.rdb, ks, seats, life, member, pools).Slice()
	if err != nil {
		return registration.Hold{}, true, c.redisError("reserve", err)
	}
	if n, _ := v[0].(int64); n == -4 {
		c.learnPools(activityID, field(v, 1))
		return registration.Hold{}, false, nil
	}
	if err := gateAnswer(v); err != nil {
		return registration.Hold{}, true, err
	}
	hold = registration.Hold{Gen: member, Seats: seats}
	for _, id := range ids {
		hold.Pools = append(hold.Pools, registration.PoolHold{PoolID: id, Gen: member, Seats: seats})
	}
	c.recovered(ctx)
	return hold, true, nil
}

// knownPools returns the pools field of the activity's counter as the
// last signup here found it.
func (c *Counter) knownPools(activityID string) (string, bool) {
	c.poolsMu.Lock()
	defer c.poolsMu.Unlock()
	return c.poolsOf.Get(activityID)
}

// learnPools remembers the pools field of the activity's counter.
func (c *Counter) learnPools(activityID, pools string) {
	c.poolsMu.Lock()
	defer c.poolsMu.Unlock()
	c.poolsOf.Add(activityID, pools)
}

// field returns v[i] as a string, "" when there is none.
func field(v []any, i int) string {
	if i >= len(v) {
		return ""
	}
	s, _ := v[i].(string)
	return s
}

// reservePools holds hold's seats in each pool's counter, in one pipeline.
// Unless every pool has room, it gives back what it held (and the
// activity's hold) and says why.
func (c *Counter) reservePools(ctx context.Context, activityID string, hold registration.Hold, pools []string,
	waitlist bool, life int64,
) (registration.Hold, error) {
	runs := make([]script, len(pools))
	for i, id := range pools {
		c.touchPool(id)
		runs[i] = script{s: poolReserveScript, keys: keys(PoolKey(id)), args: []any{hold.Seats, life, hold.Gen}}
	}
	cmds, _ := runScripts(ctx, c.rdb, runs)
	var failed error
	missing, full, never := false, false, false
	for i, cmd := range cmds {
		v, err := cmd.Slice()
		if err != nil {
			failed = err
			continue
		}
		switch n, _ := v[0].(int64); n {
		case -1:
			missing = true
		case -2:
			full = true
		case -5:
			full, never = true, true
		default:
			hold.Pools = append(hold.Pools, registration.PoolHold{PoolID: pools[i], Gen: field(v, 1), Seats: hold.Seats})
		}
	}
	if failed == nil && !missing && !full {
		return hold, nil
	}
	c.giveBack(ctx, activityID, hold)
	switch {
	case failed != nil:
		return registration.Hold{}, c.redisError("reserve", failed)
	case missing:
		return registration.Hold{}, ErrNoCounter
	case waitlist && !never:
		return registration.Hold{}, registration.ErrGateWaitlist
	default:
		return registration.Hold{}, registration.ErrGateFull
	}
}

// giveBack gives a hold back to the activity's counter and its pools',
// for a signup that will not go ahead with it. It runs even when ctx has
// ended (the client went away), so that no seat stays held for nothing.
func (c *Counter) giveBack(ctx context.Context, activityID string, hold registration.Hold) {
	ctx = context.WithoutCancel(ctx)
	runs := []script{{s: settleScript, keys: keys(Key(activityID)),
		args: append(failedSettleArgs(c.ttl), holdArgs([]registration.Hold{hold})...)}}
	for _, ph := range hold.Pools {
		runs = append(runs, script{s: poolSettleScript, keys: keys(PoolKey(ph.PoolID)),
			args: []any{-1, 0, 0, 0, c.ttl.Milliseconds(), "", "", 0, ph.Gen, max(ph.Seats, 1)}})
	}
	if _, err := runScripts(ctx, c.rdb, runs); err != nil {
		_ = c.redisError("give back", err)
	}
}

// failedSettleArgs are settleScript's arguments of a failed commit: nothing
// to apply but the holds that follow.
func failedSettleArgs(ttl time.Duration) []any {
	return []any{-1, 0, 0, 0, 0, 0, ttl.Milliseconds(), "", 0, "", 0}
}

// Committed applies the commits of a change transaction to the display
// counters, in one pipeline: the authority's taken and waiting as of the
// commit's seq, the capacity and waiting-list setting as of the activity's
// updated_at (neither steps back to an older commit's), and the holds of
// the batch's signups given back; a missing counter is built from the
// commit (the authority's state as of its seq). The pools' counters are
// settled the same way from the commits' pool states (the newest of each
// pool's), and the holds' pool holds given back to them; a commit without
// an activity (a pool's own change) settles its pools alone. It implements
// registration.Observer.
func (c *Counter) Committed(ctx context.Context, commits []registration.Commit) {
	if c.usable() != nil {
		return
	}
	var runs []script
	gen := c.newGen()
	pools := make(map[string]*poolSettle)
	var order []string
	pool := func(id string) *poolSettle {
		p := pools[id]
		if p == nil {
			p = &poolSettle{holds: make(map[string]int)}
			pools[id] = p
			order = append(order, id)
			c.touchPool(id)
		}
		return p
	}
	for _, cm := range commits {
		for _, h := range cm.Holds {
			for _, ph := range h.Pools {
				if ph.Gen != "" {
					pool(ph.PoolID).give(ph.Gen, max(ph.Seats, 1))
				}
			}
		}
		if !cm.Failed {
			for _, ps := range cm.Pools {
				pool(ps.PoolID).offer(ps)
			}
		}
		if cm.ActivityID == "" {
			continue
		}
		c.touch(cm.ActivityID)
		a := failedSettleArgs(c.ttl)
		if !cm.Failed {
			st := cm.State
			a[0], a[1], a[2], a[3], a[4] = st.LastSeq, st.Taken, st.Waiting, st.Capacity, boolFlag(st.Waitlist)
			a[5], a[8], a[9] = st.UpdatedAt.UnixMicro(), boolFlag(st.Policy == registration.PolicyFill), joinPools(st.Pools)
			a[10] = st.Reserved
		} else if len(cm.Holds) == 0 {
			continue
		}
		a[7] = gen
		runs = append(runs, script{s: settleScript, keys: keys(Key(cm.ActivityID)), args: append(a, holdArgs(cm.Holds)...)})
	}
	for _, id := range order {
		p := pools[id]
		a := []any{-1, 0, 0, 0, c.ttl.Milliseconds(), gen, "", 0}
		if st := p.state; p.has {
			a[0], a[1], a[2], a[3], a[6] = st.LastSeq, st.Taken, st.Capacity, st.UpdatedAt.UnixMicro(), joinIDs(st.Activities)
			a[7] = st.Reserved
		} else if len(p.order) == 0 {
			continue
		}
		for _, g := range p.order {
			a = append(a, g, p.holds[g])
		}
		runs = append(runs, script{s: poolSettleScript, keys: keys(PoolKey(id)), args: a})
	}
	if len(runs) == 0 {
		return
	}
	if _, err := runScripts(ctx, c.rdb, runs); err != nil {
		_ = c.redisError("settle", err)
	}
}

// poolSettle is what a batch of commits brings one pool's counter: its
// newest state, and the holds to give back by generation.
type poolSettle struct {
	state registration.PoolSeatState
	has   bool
	holds map[string]int
	order []string // generations of holds, in order of appearance
}

// offer keeps st if it is newer than the state kept.
func (p *poolSettle) offer(st registration.PoolSeatState) {
	if !p.has || st.LastSeq > p.state.LastSeq ||
		(st.LastSeq == p.state.LastSeq && st.UpdatedAt.After(p.state.UpdatedAt)) {
		p.state, p.has = st, true
	}
}

func (p *poolSettle) give(gen string, seats int) {
	if _, ok := p.holds[gen]; !ok {
		p.order = append(p.order, gen)
	}
	p.holds[gen] += seats
}

// joinPools returns the ids of pools sorted and comma-separated: the
// activity counter's pools field.
func joinPools(pools []registration.PoolSeatState) string {
	ids := make([]string, len(pools))
	for i, p := range pools {
		ids[i] = p.PoolID
	}
	return joinIDs(ids)
}

// joinIDs returns ids sorted and comma-separated.
func joinIDs(ids []string) string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return strings.Join(slices.Compact(ids), ",")
}

// splitIDs splits a field written by joinIDs; nil for "".
func splitIDs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
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

// remembered returns the activity's seats from memory, while the memory
// is kept current by announcements.
func (c *Counter) remembered(activityID string) (registration.Seats, bool) {
	if !c.remembering() {
		return registration.Seats{}, false
	}
	return c.memory.Seats(activityID)
}

// remembering reports whether the memory is in use now.
func (c *Counter) remembering() bool {
	return c.memory != nil && c.live != nil && c.live()
}

// memoryEpoch returns the memory's epoch before a read that may fill it:
// 0 when the memory is not in use (Fill ignores a read made before the
// memory was forgotten, or while it was not kept current).
func (c *Counter) memoryEpoch() uint64 {
	if !c.remembering() {
		return 0
	}
	return c.memory.Epoch()
}

// CachedSeats returns the activity's seat display from memory or from its
// counter when
// the counter is warm (ok), which also shows that the activity exists; ok
// is false when there is no counter (of the activity or of one of its
// pools) or the display tier cannot answer. It never queries the database.
func (c *Counter) CachedSeats(ctx context.Context, activityID string) (registration.Seats, bool) {
	if s, ok := c.remembered(activityID); ok {
		return s, true
	}
	if c.usable() != nil {
		return registration.Seats{}, false
	}
	s, ok, err := c.read(ctx, activityID)
	if err != nil {
		_ = c.redisError("read", err)
		return registration.Seats{}, false
	}
	c.recovered(ctx)
	return s, ok
}

// Seats returns the activity's seat display: from the counter (and its
// pools' counters) while it is warm (no database query), else from the
// authority, rebuilding the missing counters on the way.
func (c *Counter) Seats(ctx context.Context, activityID string) (registration.Seats, error) {
	if s, ok := c.remembered(activityID); ok {
		return s, nil
	}
	if c.usable() == nil {
		s, ok, err := c.read(ctx, activityID)
		if err == nil {
			c.recovered(ctx)
			if ok {
				return s, nil
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
	return stateSeats(activityID, st, c.now()), nil
}

// activityFields and poolFields are the fields of a counter that a seat
// read needs.
var (
	activityFields = []any{"taken", "held", "capacity", "waiting", "pools", "reserved", "seq", "version"}
	poolFields     = []any{"taken", "held", "capacity", "reserved", "seq", "version"}
)

// readFields reads fields of a counter (by its key) after dropping its
// holds past their deadline, as HMGET does, followed by the counter's
// PTTL (see pttl).
func (c *Counter) readFields(ctx context.Context, key string, fields ...any) ([]any, error) {
	return readScript.Run(ctx, c.rdb, keys(key), fields...).Slice()
}

// read reads the activity's counter and, for a pooled activity, its pools'
// counters in one pipeline (on a Redis Cluster, one per node); ok is false
// when one of them is missing. What it read (without the holds) is
// remembered when the memory is in use.
func (c *Counter) read(ctx context.Context, activityID string) (registration.Seats, bool, error) {
	epoch := c.memoryEpoch()
	v, err := c.readFields(ctx, Key(activityID), activityFields...)
	if err != nil {
		return registration.Seats{}, false, err
	}
	n, ok := parseInts(v[:4])
	pools, hasPools := v[4].(string)
	if !ok || !hasPools {
		return registration.Seats{}, false, nil
	}
	reserved := optionalInt(v[5])
	seen := &ActivitySeats{Seq: int64(optionalInt(v[6])), Version: int64(optionalInt(v[7])), Capacity: n[2], Taken: n[0],
		Waiting: n[3], Reserved: reserved, Pools: splitIDs(pools)}
	life := pttl(v)
	counts := registration.NewCounts(shown(registration.Room{Capacity: n[2], Taken: n[0], Reserved: reserved}, n[1]),
		n[3], false, "", []registration.Room(nil))
	var poolsSeen []PoolSeatsSeen
	if ids := seen.Pools; len(ids) > 0 {
		runs := make([]script, len(ids))
		for i, id := range ids {
			runs[i] = script{s: readScript, keys: keys(PoolKey(id)), args: poolFields}
		}
		cmds, err := runScripts(ctx, c.rdb, runs)
		if err != nil {
			return registration.Seats{}, false, err
		}
		for i, cmd := range cmds {
			pv, _ := cmd.Slice()
			p, ok := parseInts(pv[:3])
			if !ok {
				return registration.Seats{}, false, nil
			}
			preserved := optionalInt(pv[3])
			life = min(life, pttl(pv))
			counts = counts.Within(shown(registration.Room{Pool: ids[i], Capacity: p[2], Taken: p[0], Reserved: preserved}, p[1]))
			poolsSeen = append(poolsSeen, PoolSeatsSeen{PoolID: ids[i], Seq: int64(optionalInt(pv[4])),
				Version: int64(optionalInt(pv[5])), Capacity: p[2], Taken: p[0], Reserved: preserved})
		}
	}
	if epoch != 0 {
		c.memory.Fill(epoch, activityID, seen, poolsSeen, life)
	}
	return newSeats(activityID, counts, registration.SourceCache, c.now()), true, nil
}

// pttl returns the time to live that readFields appends to the fields
// read: 0 for a counter without one.
func pttl(v []any) time.Duration {
	ms, _ := v[len(v)-1].(int64)
	return time.Duration(max(ms, 0)) * time.Millisecond
}

// shown returns a counter's room as its display shows it, held seats
// counted as taken: all of them, but never so many that taken + held +
// reserved passes the capacity (the authority's taken alone may).
func shown(r registration.Room, held int) registration.Room {
	r.Taken += min(held, r.Remaining())
	return r
}

// PoolSeats returns a pool's seat display, and where it was read
// (registration.SourceCache or SourceDatabase): from its counter while it
// is warm, Taken being taken + held (signups in flight count as taken),
// else from the authority, rebuilding the counter on the way. A pool that
// does not exist is a not_found error.
func (c *Counter) PoolSeats(ctx context.Context, poolID string) (registration.PoolSeatState, string, error) {
	if c.usable() == nil {
		v, err := c.readFields(ctx, PoolKey(poolID), "taken", "held", "capacity", "seq", "version", "activities", "reserved")
		if err == nil {
			c.recovered(ctx)
			if n, ok := parseInts(v[:5]); ok {
				r := shown(registration.Room{Capacity: n[2], Taken: n[0], Reserved: optionalInt(v[6])}, n[1])
				return registration.PoolSeatState{PoolID: poolID, Capacity: r.Capacity, Taken: r.Taken, Reserved: r.Reserved,
					LastSeq:   int64(n[3]),
					UpdatedAt: time.UnixMicro(int64(n[4])).UTC(), Activities: append([]string{}, splitIDs(field(v, 5))...),
				}, registration.SourceCache, nil
			}
			st, err := c.rebuildPool(ctx, poolID)
			return st, registration.SourceDatabase, err
		}
		_ = c.redisError("read", err)
		if ctx.Err() != nil {
			return registration.PoolSeatState{}, "", capacityd.Unavailable(ctx.Err(), "the request ended before the seats were read")
		}
	}
	st, err := c.authority.PoolSeatState(ctx, poolID)
	return st, registration.SourceDatabase, err
}

// optionalInt parses a field that a counter written before it existed
// lacks: missing (or not a number) reads as 0.
func optionalInt(v any) int {
	s, _ := v.(string)
	n, _ := strconv.Atoi(s)
	return n
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

// rebuild reads the activity at the authority and writes its counter, and
// its pools' counters, where they are still missing. One rebuild per
// activity runs at a time in this process.
func (c *Counter) rebuild(ctx context.Context, activityID string) (registration.Seats, error) {
	v, err, _ := c.rebuilds.Do(activityID, func() (any, error) {
		epoch := c.memoryEpoch()
		st, err := c.authority.SeatState(ctx, activityID)
		if err != nil {
			return nil, err
		}
		if epoch != 0 {
			c.memory.Fill(epoch, activityID, stateSeen(st, st.LastSeq), poolsSeenOf(st.Pools), c.ttl)
		}
		c.metrics.rebuilds.Inc()
		runs := []script{{s: buildScript, keys: keys(Key(activityID)), args: []any{st.Taken, st.Capacity, st.Waiting,
			boolFlag(st.Waitlist), st.LastSeq, c.ttl.Milliseconds(), c.newGen(), st.UpdatedAt.UnixMicro(),
			boolFlag(st.Policy == registration.PolicyFill), joinPools(st.Pools), st.Reserved}}}
		for _, p := range st.Pools {
			runs = append(runs, c.buildPool(p))
		}
		if _, err := runScripts(ctx, c.rdb, runs); err != nil {
			_ = c.redisError("rebuild", err)
		}
		return stateSeats(activityID, st, c.now()), nil
	})
	if err != nil {
		return registration.Seats{}, err
	}
	return v.(registration.Seats), nil
}

// rebuildPool reads the pool at the authority and writes its counter if it
// is still missing. One rebuild per pool runs at a time in this process.
func (c *Counter) rebuildPool(ctx context.Context, poolID string) (registration.PoolSeatState, error) {
	v, err, _ := c.rebuilds.Do(PoolKey(poolID), func() (any, error) {
		st, err := c.authority.PoolSeatState(ctx, poolID)
		if err != nil {
			return nil, err
		}
		c.metrics.rebuilds.Inc()
		if _, err := runScripts(ctx, c.rdb, []script{c.buildPool(st)}); err != nil {
			_ = c.redisError("rebuild", err)
		}
		return st, nil
	})
	if err != nil {
		return registration.PoolSeatState{}, err
	}
	return v.(registration.PoolSeatState), nil
}

// buildPool is the build of a pool's counter from its state at the
// authority.
func (c *Counter) buildPool(st registration.PoolSeatState) script {
	return script{s: poolBuildScript, keys: keys(PoolKey(st.PoolID)), args: []any{st.Taken, st.Capacity, st.LastSeq,
		st.UpdatedAt.UnixMicro(), c.ttl.Milliseconds(), c.newGen(), joinIDs(st.Activities), st.Reserved}}
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
	pools := make([]string, 0, len(c.activePools))
	for id := range c.activePools {
		pools = append(pools, id)
	}
	c.activeMu.Unlock()
	for _, id := range pools {
		if err := c.rdb.Del(ctx, PoolKey(id), HoldsKey(PoolKey(id))).Err(); err != nil {
			c.stale.Store(true)
			return
		}
	}
	for _, id := range ids {
		if err := c.rdb.Del(ctx, Key(id), HoldsKey(Key(id))).Err(); err != nil {
			c.stale.Store(true)
			return
		}
		// Streams missed the changes made while Redis was away.
		c.announce(ctx, id)
	}
	c.log.Info("redis display tier back; counters of recently active activities and pools invalidated",
		"count", len(ids), "pools", len(pools))
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

func (c *Counter) touchPool(poolID string) {
	c.activeMu.Lock()
	c.activePools[poolID] = c.now()
	c.activeMu.Unlock()
}

func (c *Counter) announce(ctx context.Context, activityID string) {
	if c.memory != nil {
		c.memory.Apply(SeatChange{ActivityID: activityID})
	}
	if c.announcer != nil {
		c.announcer.Announce(ctx, activityID)
	}
}

// recent returns the activities and the pools changed through this
// instance within window, with the time of their last change, and forgets
// older ones (and their drift).
func (c *Counter) recent(window time.Duration) (active, pools map[string]time.Time, forgotten []string) {
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
	pools = make(map[string]time.Time, len(c.activePools))
	for id, at := range c.activePools {
		if now.Sub(at) > window {
			delete(c.activePools, id)
			forgotten = append(forgotten, id)
			continue
		}
		pools[id] = at
	}
	return active, pools, forgotten
}

// reading is one read of a counter next to the authority.
type reading struct {
	display int // taken + held + reserved
	gen     string
	taken   int // taken + reserved at the authority
	// correct resets the counter, if still of generation gen, to the
	// authority's state read; it reports whether it did.
	correct func(ctx context.Context) bool
}

// readDisplay reads a counter's taken + held + reserved (the seats not
// free to the public) and generation; ok is false when there is no
// counter.
func (c *Counter) readDisplay(ctx context.Context, key string) (display int, gen string, ok bool, err error) {
	v, err := c.readFields(ctx, key, "taken", "held", "gen", "reserved")
	if err != nil {
		return 0, "", false, c.redisError("reconcile", err)
	}
	n, ok := parseInts(v[:2])
	gen, _ = v[2].(string)
	if !ok || gen == "" {
		return 0, "", false, nil
	}
	return n[0] + n[1] + optionalInt(v[3]), gen, true, nil
}

// compare reads an activity's counter and then its state at the authority,
// and records their difference as the activity's drift; ok is false when
// there is no counter.
func (c *Counter) compare(ctx context.Context, activityID string) (r reading, ok bool, err error) {
	display, gen, ok, err := c.readDisplay(ctx, Key(activityID))
	if !ok || err != nil {
		return r, false, err
	}
	st, err := c.authority.SeatState(ctx, activityID)
	if err != nil {
		return r, false, err
	}
	r = reading{display: display, gen: gen, taken: st.Taken + st.Reserved,
		correct: func(ctx context.Context) bool { return c.correct(ctx, activityID, gen, st) }}
	c.metrics.drift.WithLabelValues(activityID).Set(float64(r.display - r.taken))
	return r, true, nil
}

// correct resets an activity's counter of generation gen to the
// authority's state, and announces the change. It reports whether the
// counter was still of that generation.
func (c *Counter) correct(ctx context.Context, activityID, gen string, st registration.SeatState) bool {
	n, err := correctScript.Run(ctx, c.rdb, keys(Key(activityID)), gen, st.Taken, st.Waiting, st.LastSeq, st.Reserved).Int()
	if err != nil || n != 1 {
		return false
	}
	c.metrics.corrections.Inc()
	c.log.Info("display counter corrected", "activity_id", activityID)
	c.announce(ctx, activityID)
	return true
}

// comparePool reads a pool's counter and then its state at the authority;
// ok is false when there is no counter.
func (c *Counter) comparePool(ctx context.Context, poolID string) (r reading, ok bool, err error) {
	display, gen, ok, err := c.readDisplay(ctx, PoolKey(poolID))
	if !ok || err != nil {
		return r, false, err
	}
	st, err := c.authority.PoolSeatState(ctx, poolID)
	if err != nil {
		return r, false, err
	}
	return reading{display: display, gen: gen, taken: st.Taken + st.Reserved,
		correct: func(ctx context.Context) bool { return c.correctPool(ctx, gen, st) }}, true, nil
}

// correctPool resets a pool's counter of generation gen to the authority's
// state, unless a newer commit reached it, and announces the change to
// the streams of its activities. It reports whether it corrected.
func (c *Counter) correctPool(ctx context.Context, gen string, st registration.PoolSeatState) bool {
	n, err := poolCorrectScript.Run(ctx, c.rdb, keys(PoolKey(st.PoolID)), gen, st.Taken, st.LastSeq, st.Reserved).Int()
	if err != nil || n != 1 {
		return false
	}
	c.metrics.corrections.Inc()
	c.log.Info("display counter corrected", "pool_id", st.PoolID)
	for _, id := range st.Activities {
		c.announce(ctx, id)
	}
	return true
}
