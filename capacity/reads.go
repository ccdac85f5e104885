package capacity

import (
	"context"
	"strconv"
	"time"

	"github.com/physiciansnet/capacityd"
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
