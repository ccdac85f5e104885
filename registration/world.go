package registration

import (
	"fmt"
	"slices"
	"time"
)

// JoinStride spaces the join orders of two change transactions: a
// transaction numbers its waitlistings JoinBase*JoinStride + 1, + 2, …
// (Registration.Joined).
const JoinStride = 1_000_000

// PoolState is what the authority knows about a pool, read under its lock
// in a change transaction: the pool with its exact Taken and its
// activities, and its last seq.
type PoolState struct {
	Pool    Pool
	LastSeq int64
}

// Change is what one change transaction read under its locks: the
// activities it locked, each with its commands (none for an activity
// locked only because a release in one of its pools may promote from its
// waiting list), and the pools it locked, each with its commands
// (PoolCommands).
type Change struct {
	Activities   []ActivityState
	Commands     [][]Command
	Pools        []PoolState
	PoolCommands [][]Command
	// Series are the series of the activities' signups (and
	// re-admissions), with the users' active registrations in them, read
	// under the (series, user) locks; and the series that activity
	// commands name.
	Series []SeriesState
	// At is the transaction's time (the activities' states carry it too).
	At time.Time
	// JoinBase is the transaction's value of the join sequence, taken
	// after its locks: the waitlistings it decides join after every one of
	// the transactions before it that shared a lock (Registration.Joined).
	JoinBase int64
}

// PoolPlan is what DecideAll makes of one pool: its state after the
// transaction and its commands' outcomes.
type PoolPlan struct {
	Pool    Pool
	LastSeq int64
	// Outcomes has one outcome per pool command, in order.
	Outcomes []Outcome
	// Changed is true when the pool's seats, capacity, title or activities
	// may have changed: its LastSeq moved and its row is to be written.
	Changed bool
	// SettingsChanged is true when its title or capacity changed.
	SettingsChanged bool
}

// SeatState returns the pool's seat state after the transaction.
func (p PoolPlan) SeatState() PoolSeatState {
	return PoolSeatState{PoolID: p.Pool.ID, Capacity: p.Pool.Capacity, Taken: p.Pool.Taken, Reserved: p.Pool.Reserved, LastSeq: p.LastSeq,
		UpdatedAt: p.Pool.UpdatedAt, Activities: slices.Clone(p.Pool.Activities)}
}

// DecideAll applies the commands of one change transaction: each
// activity's in order by Decide's rules, then each pool's. A signup must
// fit its activity and every one of its pools; whatever frees seats of a
// pool (a release in one of its activities, a capacity raise, an activity
// leaving it) promotes across the pool's activities: the heads of their
// lines, each by its own waitlist_policy, oldest Joined first, while they
// fit all their limits. The caller must have locked and read every
// activity of a pool that something in the transaction may free (and
// every pool of those), as LineNeeds assumes.
func DecideAll(c Change, now time.Time) ([]Plan, []PoolPlan, error) {
	w := &world{
		byID:     make(map[string]*decision, len(c.Activities)),
		pools:    make(map[string]*PoolPlan, len(c.Pools)),
		joinBase: c.JoinBase,
		now:      c.At,
		series:   make(map[string]*SeriesState, len(c.Series)),
	}
	for _, sr := range c.Series {
		held := make(map[string][]string, len(sr.Held))
		for u, ids := range sr.Held {
			held[u] = slices.Clone(ids)
		}
		sr.Held = held
		w.series[sr.ID] = &sr
	}
	for i, ps := range c.Pools {
		p := &PoolPlan{Pool: ps.Pool, LastSeq: ps.LastSeq}
		p.Pool.Activities = slices.Clone(ps.Pool.Activities)
		if i < len(c.PoolCommands) {
			p.Outcomes = make([]Outcome, len(c.PoolCommands[i]))
		}
		w.pools[p.Pool.ID] = p
		w.poolOrder = append(w.poolOrder, p)
	}
	for i, st := range c.Activities {
		var cmds []Command
		if i < len(c.Commands) {
			cmds = c.Commands[i]
		}
		d := newDecision(st, cmds)
		d.w = w
		for _, id := range st.Activity.Pools {
			p, ok := w.pools[id]
			if !ok {
				return nil, nil, fmt.Errorf("registration: activity %s's pool %s was not read", st.Activity.ID, id)
			}
			d.pools = append(d.pools, &p.Pool)
		}
		w.decisions = append(w.decisions, d)
		w.byID[d.act.ID] = d
	}
	for _, d := range w.decisions {
		if err := d.run(now); err != nil {
			return nil, nil, fmt.Errorf("activity %s: %w", d.act.ID, err)
		}
	}
	for i, p := range w.poolOrder {
		if i >= len(c.PoolCommands) {
			break
		}
		for j, cmd := range c.PoolCommands[i] {
			pc, ok := cmd.(PoolCommand)
			if !ok {
				return nil, nil, fmt.Errorf("registration: pool %s: command %T", p.Pool.ID, cmd)
			}
			if err := w.patchPool(p, j, pc); err != nil {
				return nil, nil, fmt.Errorf("pool %s: %w", p.Pool.ID, err)
			}
		}
	}
	plans := make([]Plan, len(w.decisions))
	for _, d := range w.decisions {
		if len(d.events) > 0 {
			for _, p := range d.pools {
				w.pools[p.ID].Changed = true
			}
		}
	}
	pools := make([]PoolPlan, len(w.poolOrder))
	for i, p := range w.poolOrder {
		if p.Changed {
			p.LastSeq++
		}
		pools[i] = *p
	}
	for i, d := range w.decisions {
		p, err := d.plan()
		if err != nil {
			return nil, nil, fmt.Errorf("activity %s: %w", d.act.ID, err)
		}
		for _, pp := range d.pools {
			p.Pools = append(p.Pools, w.pools[pp.ID].SeatState())
		}
		plans[i] = p
	}
	return plans, pools, nil
}

// world is the state of DecideAll: the activities and pools of one change
// transaction.
type world struct {
	decisions []*decision
	byID      map[string]*decision
	pools     map[string]*PoolPlan
	poolOrder []*PoolPlan
	joinBase  int64
	joins     int64
	now       time.Time
	series    map[string]*SeriesState
}

// join returns the next join order of the transaction.
func (w *world) join() int64 {
	w.joins++
	return w.joinBase*JoinStride + w.joins
}

// neighbours returns the activities of the transaction that share a pool
// with any of pools, in the transaction's order, and d.
func (w *world) neighbours(d *decision, pools []*Pool) []*decision {
	out := []*decision{d}
	for _, p := range pools {
		for _, id := range p.Activities {
			if n, ok := w.byID[id]; ok && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// unknownPools returns the ids of pools the transaction did not read
// (they do not exist).
func (w *world) unknownPools(ids []string) []string {
	var out []string
	for _, id := range ids {
		if _, ok := w.pools[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

// patchPool applies a pool command: a capacity raise promotes across the
// pool's activities; a capacity cut evicts nobody.
func (w *world) patchPool(p *PoolPlan, i int, c PoolCommand) error {
	if c.Patch.Title != nil {
		p.Pool.Title = *c.Patch.Title
	}
	if c.Patch.Capacity != nil {
		p.Pool.Capacity = *c.Patch.Capacity
	}
	p.Pool.UpdatedAt = settingsChangedAt(p.Pool.UpdatedAt, w.at())
	p.Changed, p.SettingsChanged = true, true
	var ds []*decision
	for _, id := range p.Pool.Activities {
		if d, ok := w.byID[id]; ok {
			ds = append(ds, d)
		}
	}
	if err := w.promoteAcross(ds, Origin{Actor: ActorSystem, RequestID: c.RequestID}); err != nil {
		return err
	}
	pool := p.Pool
	pool.Activities = slices.Clone(pool.Activities)
	pool.Remaining = pool.SeatRoom().Remaining()
	p.Outcomes[i] = Outcome{Pool: &pool, Changed: true}
	return nil
}

// at returns the transaction's time.
func (w *world) at() time.Time {
	if len(w.decisions) > 0 {
		return w.decisions[0].st.At
	}
	return w.now
}
