package capacity

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd/registration"
)

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

// announce tells this instance's memory and every instance's seat streams
// that the activity's seats changed.
func (c *Counter) announce(ctx context.Context, activityID string) {
	if c.memory != nil {
		c.memory.Apply(SeatChange{ActivityID: activityID})
	}
	if c.announcer != nil {
		c.announcer.Announce(ctx, activityID)
	}
}
