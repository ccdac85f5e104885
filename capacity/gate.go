package capacity

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/physiciansnet/capacityd/registration"
)

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
	v, err := c.gate(ctx, script{s: reserveScript, keys: keys(Key(activityID)), args: []any{seats, life, member}})
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
	v, err := c.gate(ctx, script{s: pooledReserveScript, keys: ks, args: []any{seats, life, member, pools}})
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
