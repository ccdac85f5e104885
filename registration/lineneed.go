package registration

import "slices"

// LineNeed is the part of an activity's waiting list that Decide may
// need for a batch of commands. At most Seats seats can be free at any
// moment of the batch (the free seats, those the commands release, and
// those a capacity raise adds), so at most Seats registrations are
// promoted, at most Seats/s of them of s seats; and at most Removals
// registrations leave the line otherwise (cancellations).
type LineNeed struct {
	// Strict: the head of the line is needed (its first Head()
	// registrations), as PolicyStrict promotes. Fill: for each party size
	// s from 1 to Seats, the first BySize(s) registrations of that size,
	// as PolicyFill promotes. A batch that changes the policy needs both.
	Strict, Fill    bool
	Seats, Removals int
}

// Head is how many registrations of the line's head a strict activity's
// batch may need.
func (q LineNeed) Head() int { return q.Seats + q.Removals }

// BySize is how many of the first waiting registrations of s seats a fill
// activity's batch may need: promotions of s seats go oldest first among
// those of s seats, so the rest of them can never be reached.
func (q LineNeed) BySize(s int) int {
	if s < 1 || s > q.Seats {
		return 0
	}
	return q.Seats/s + q.Removals
}

// None reports whether no part of the line is needed.
func (q LineNeed) None() bool { return !q.Strict && !q.Fill }

// LineNeeded is what of the waiting list Decide may need for the commands
// on st: st.Activity must carry exact counts, and st.Registrations the
// registrations the commands name. Nothing is needed when nobody waits,
// nor for commands that promote nobody (signups and status changes: a
// quiet line stays quiet when seats are only taken).
func LineNeeded(st ActivityState, cmds []Command) LineNeed {
	return lineNeeded(st, cmds, false, -1)
}

// lineNeeded is LineNeeded for an activity that a release elsewhere in
// one of its pools may promote into (shared), with at most bound seats
// free in its pools at any moment (bound < 0: no pools).
func lineNeeded(st ActivityState, cmds []Command, shared bool, bound int) LineNeed {
	a := st.Activity
	if a.Waiting == 0 || (!shared && !slices.ContainsFunc(cmds, promotes)) {
		return LineNeed{}
	}
	most := a.Capacity
	freed, _ := releasedSeats(st, cmds)
	removals := 0
	need := LineNeed{Strict: a.Policy != PolicyFill, Fill: a.Policy == PolicyFill}
	for _, c := range cmds {
		switch c := c.(type) {
		case CancelCommand:
			// A cancellation frees the seats of an occupying registration
			// (releasedSeats) or takes a waiting one off the line. (One
			// promoted by the batch and then cancelled gives back seats
			// its promotion took from those counted: its place counts
			// once.)
			if r, ok := st.Registrations[c.RegistrationID]; !ok || r.Status == Waitlisted {
				removals++
			}
		case ActivityCommand:
			if c.Patch.Capacity != nil {
				most = max(most, *c.Patch.Capacity)
			}
			if p := c.Patch.Policy; p != nil {
				need.Strict = need.Strict || *p == PolicyStrict
				need.Fill = need.Fill || *p == PolicyFill
			}
		}
	}
	// Blocks' reserved seats count as free: a block's end may free them.
	need.Seats, need.Removals = Room{Capacity: most, Taken: a.Taken}.Remaining()+freed, min(removals, a.Waiting)
	if bound >= 0 {
		need.Seats = min(need.Seats, max(0, bound))
	}
	if need.Seats == 0 {
		// No seat can be free: nobody is promoted.
		return LineNeed{}
	}
	return need
}

// Promotes reports whether a command may promote from the waiting list
// (and free seats of its activity's pools).
func Promotes(c Command) bool { return promotes(c) }

// promotes reports whether a command may promote from the waiting list.
func promotes(c Command) bool {
	switch c := c.(type) {
	case CancelCommand, ExpireCommand, SeatsCommand, ActivityCommand, ReleaseCommand:
		return true
	case BlockCommand:
		return c.Op != BlockCreate
	}
	return false
}

// Releases counts the commands that may free seats or take a place off
// the list (cancellations, expiries, seat reductions): a first guess,
// before anything is read, of how much of the line's head a batch needs.
func Releases(cmds []Command) int {
	n := 0
	for _, c := range cmds {
		switch c := c.(type) {
		case CancelCommand, ExpireCommand, SeatsCommand:
			n++
		case ReleaseCommand:
			n += len(c.RegistrationIDs)
		case BlockCommand:
			if c.Op != BlockCreate {
				n++
			}
		}
	}
	return n
}

// LineNeeds is what of each activity's waiting list DecideAll may need
// for the change c: c.Activities and c.Pools must carry exact counts, and
// the activities' states the registrations their commands name. An
// activity in no pool needs what LineNeeded says. A pooled one may also
// be promoted into by a release elsewhere in one of its pools (a release in
// another activity, a pool's capacity raise, an activity leaving the
// pool), bounded by the seats that can be free in each of its pools.
func LineNeeds(c Change) []LineNeed {
	out := make([]LineNeed, len(c.Activities))
	pools := make(map[string]PoolState, len(c.Pools))
	for _, p := range c.Pools {
		pools[p.Pool.ID] = p
	}
	// most[p] bounds the seats that can be free in pool p at any moment
	// of the change; freedIn[p] says whether a promotion across it may
	// run.
	most := make(map[string]int, len(c.Pools))
	freedIn := make(map[string]bool, len(c.Pools))
	for i, p := range c.Pools {
		capacity := p.Pool.Capacity
		if i < len(c.PoolCommands) {
			for _, cmd := range c.PoolCommands[i] {
				// Any pool command runs the promotion across the pool.
				freedIn[p.Pool.ID] = true
				if pc, ok := cmd.(PoolCommand); ok && pc.Patch.Capacity != nil {
					capacity = max(capacity, *pc.Patch.Capacity)
				}
			}
		}
		// Blocks' reserved seats count as free: a block's end may free
		// them.
		most[p.Pool.ID] = Room{Capacity: capacity, Taken: p.Pool.Taken}.Free()
	}
	for i, st := range c.Activities {
		cmds := commandsOf(c, i)
		freed, leaves := releasedSeats(st, cmds)
		// Any command that may promote runs the promotion across the
		// activity's pools.
		promoting := slices.ContainsFunc(cmds, promotes)
		for _, id := range st.Activity.Pools {
			most[id] += freed
			if promoting {
				freedIn[id] = true
			}
		}
		if leaves {
			for _, id := range st.Activity.Pools {
				most[id] += st.Activity.Taken
			}
		}
	}
	for i, st := range c.Activities {
		cmds := commandsOf(c, i)
		if len(st.Activity.Pools) == 0 {
			out[i] = LineNeeded(st, cmds)
			continue
		}
		bound, shared := -1, false
		for _, id := range st.Activity.Pools {
			shared = shared || freedIn[id]
			if bound < 0 || most[id] < bound {
				bound = most[id]
			}
		}
		out[i] = lineNeeded(st, cmds, shared, bound)
	}
	return out
}

func commandsOf(c Change, i int) []Command {
	if i < len(c.Commands) {
		return c.Commands[i]
	}
	return nil
}

// releasedSeats bounds the seats the commands free in the activity (a
// registration made by the same batch counts as the most seats one may
// hold), and says whether one of them changes its pools (an activity
// leaving a pool frees its seats there).
func releasedSeats(st ActivityState, cmds []Command) (freed int, leaves bool) {
	released := func(id string, keep int) {
		r, ok := st.Registrations[id]
		switch {
		case !ok:
			freed += MaxSeatsLimit
		case r.Status.Occupying():
			freed += max(0, r.Seats-keep)
		}
	}
	for _, c := range cmds {
		switch c := c.(type) {
		case CancelCommand:
			released(c.RegistrationID, 0)
		case ExpireCommand:
			released(c.RegistrationID, 0)
		case SeatsCommand:
			released(c.RegistrationID, c.Seats)
		case ReleaseCommand:
			for _, id := range c.RegistrationIDs {
				released(id, 0)
			}
		case ActivityCommand:
			leaves = leaves || c.Patch.Pools != nil
		}
	}
	return freed, leaves
}
