package histcheck

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// The pool check: what a pool's activities hold together, over the merged
// history of all of them (each activity's own partition cannot see it).
// The history says when a registration surely occupies seats: from the
// answer that showed it occupying (a signup's 201, a status change's or
// seat reduction's 200 with an occupying status) until the first call that
// could release it (a cancellation, a status change to a status that does
// not occupy, the start of the service's release of it), holding the seats that answer said, or fewer from the call
// of a seat reduction sent since: what it asked to keep. At every moment, the
// seats those registrations of a pool's activities surely hold must fit
// the pool's capacity; and every authoritative read of a pool must show no
// more taken than its capacity, at least what its activities surely held
// at some moment of the read, and remaining max(0, capacity − taken −
// reserved), reserved being the unused seats of its activities' blocks.
//
// It assumes what the workload does: a pool's capacity and an activity's
// pools are set at creation and never changed, and holds do not expire
// within the history.

// PoolVerdict is the outcome of the pool check.
type PoolVerdict struct {
	// Pools created, Activities created in pools, Registrations seen
	// occupying seats of a pool, and authoritative Reads of pools.
	Pools, Activities, Registrations, Reads int
	// Violations say what broke a pool's capacity, first each.
	Violations []string
}

// OK reports whether no pool was found over its capacity.
func (v PoolVerdict) OK() bool { return len(v.Violations) == 0 }

func (v PoolVerdict) String() string {
	res := "Ok"
	if !v.OK() {
		res = "Illegal"
	}
	s := fmt.Sprintf("%-9s %-7s %4d pools, %d activities in pools, %d registrations seen occupying, %d pool reads",
		"pools", res, v.Pools, v.Activities, v.Registrations, v.Reads)
	if !v.OK() {
		s += fmt.Sprintf("; %d violations, first: %s", len(v.Violations), v.Violations[0])
	}
	return s
}

// held is a registration's seats surely occupied, from its first moment.
type held struct {
	activity string
	// from is when it surely occupies seats (the return of the first
	// answer that showed it occupying), until when it may be released (the
	// first call that could release it; MaxInt64: none).
	from, until int64
	// seats is what the first answer that showed it occupying said it
	// held.
	seats int
	// cuts are the seat reductions sent for it: calls and seats kept.
	cuts []cut
}

type cut struct {
	at    int64
	seats int
}

// change is a step of a pool's surely held seats.
type change struct {
	at    int64
	delta int
	reg   string
}

// leastPoolSeats returns, for each activity created in pools, the least
// capacity of its pools that the history knows: its taken can never
// exceed it.
func leastPoolSeats(h history.History) map[string]int {
	capacity := map[string]int{}
	for _, op := range h.Ops {
		if op.Kind == history.CreatePool && op.Result == history.Answered && op.Output.Status == http.StatusCreated && op.Input.Key != "" {
			capacity[op.Input.Key] = op.Input.Capacity
		}
	}
	least := map[string]int{}
	for _, op := range h.Ops {
		if op.Kind != history.CreateActivity || op.Input.Key == "" {
			continue
		}
		for _, p := range op.Input.Pools {
			if c, ok := capacity[p]; ok && (least[op.Input.Key] == 0 || c < least[op.Input.Key]) {
				least[op.Input.Key] = c
			}
		}
	}
	return least
}

// checkPools runs the pool check on h.
func checkPools(h history.History) PoolVerdict {
	var v PoolVerdict
	capacity := map[string]int{}
	var pools []string
	inPools := map[string][]string{} // activity → its pools
	for _, op := range h.Ops {
		if op.Result != history.Answered || op.Output.Status != http.StatusCreated || op.Input.Key == "" {
			continue
		}
		switch op.Kind {
		case history.CreatePool:
			if _, seen := capacity[op.Input.Key]; !seen {
				pools = append(pools, op.Input.Key)
			}
			capacity[op.Input.Key] = op.Input.Capacity
		case history.CreateActivity:
			if len(op.Input.Pools) > 0 {
				inPools[op.Input.Key] = op.Input.Pools
			}
		}
	}
	v.Pools, v.Activities = len(pools), len(inPools)
	regs := heldRegistrations(h, inPools)
	v.Registrations = len(regs)
	changes := map[string][]change{}
	for id, r := range regs {
		for _, p := range inPools[r.activity] {
			changes[p] = append(changes[p], r.changes(id)...)
		}
	}
	steps := map[string][]level{}
	for _, p := range pools {
		var first string
		steps[p], first = sweep(changes[p], capacity[p])
		if first != "" {
			v.Violations = append(v.Violations, fmt.Sprintf("pool %s (capacity %d): %s", p, capacity[p], first))
		}
	}
	for _, op := range h.Ops {
		if op.Kind != history.ReadPool || op.Result != history.Answered || op.Output.Status != http.StatusOK {
			continue
		}
		v.Reads++
		o := op.Output
		if msg := checkPoolRead(o, steps[op.Input.Key], op.Call, op.Return); msg != "" {
			v.Violations = append(v.Violations, fmt.Sprintf("read of pool %s (op %d on %s): %s", op.Input.Key, op.ID, op.Instance, msg))
		}
	}
	return v
}

// heldRegistrations gathers the registrations of the activities in pools
// that the history shows occupying seats.
func heldRegistrations(h history.History, inPools map[string][]string) map[string]*held {
	regs := map[string]*held{}
	for _, op := range h.Ops {
		o := op.Output
		if op.Result != history.Answered || o.Registration == "" || !occupying(o.RegStatus) || inPools[op.Input.Key] == nil {
			continue
		}
		switch {
		case op.Kind == history.Signup && o.Status == http.StatusCreated,
			(op.Kind == history.SetStatus || op.Kind == history.ReduceSeats) && o.Status == http.StatusOK:
		default:
			continue
		}
		// The first answer says when and with how many seats; seats only
		// go down later, by the reductions sent for it.
		switch r, seen := regs[o.Registration]; {
		case !seen:
			regs[o.Registration] = &held{activity: op.Input.Key, from: op.Return, until: math.MaxInt64, seats: o.Seats}
		case op.Return < r.from:
			r.from, r.seats = op.Return, o.Seats
		case op.Return == r.from:
			r.seats = min(r.seats, o.Seats)
		}
	}
	for _, op := range h.Ops {
		if op.Kind == Release {
			released, _ := ReleaseOf(op.Output)
			for _, id := range released {
				if r := regs[id]; r != nil {
					r.until = min(r.until, op.Call)
				}
			}
			continue
		}
		r := regs[op.Input.Registration]
		if r == nil || op.Result == history.Refused {
			continue
		}
		switch {
		case op.Kind == history.Cancel, op.Kind == history.SetStatus && !occupying(op.Input.To):
			r.until = min(r.until, op.Call)
		case op.Kind == history.ReduceSeats:
			r.cuts = append(r.cuts, cut{at: op.Call, seats: max(op.Input.Seats, 1)})
		}
	}
	for id, r := range regs {
		if r.until <= r.from {
			delete(regs, id)
		}
	}
	return regs
}

// changes returns the steps of the seats registration id surely holds:
// up when it surely occupies them, down at each reduction sent meanwhile
// (to the seats it keeps) and to none when it may be released.
func (r *held) changes(id string) []change {
	sort.Slice(r.cuts, func(i, j int) bool { return r.cuts[i].at < r.cuts[j].at })
	seats := r.seats
	var later []cut
	for _, c := range r.cuts {
		if c.at <= r.from {
			seats = min(seats, c.seats)
		} else if c.at < r.until {
			later = append(later, c)
		}
	}
	out := []change{{at: r.from, delta: seats, reg: id}}
	for _, c := range later {
		if c.seats < seats {
			out = append(out, change{at: c.at, delta: c.seats - seats, reg: id})
			seats = c.seats
		}
	}
	if r.until != math.MaxInt64 {
		out = append(out, change{at: r.until, delta: -seats, reg: id})
	}
	return out
}

// level is what a pool's registrations surely held from at on.
type level struct {
	at    int64
	seats int
}

// sweep adds a pool's changes up in time (at equal times, seats given
// back before seats taken, so as never to count more than surely held)
// and returns the levels, and a description of the first moment they
// exceed capacity ("" if never).
func sweep(changes []change, capacity int) ([]level, string) {
	sort.Slice(changes, func(i, j int) bool {
		if changes[i].at != changes[j].at {
			return changes[i].at < changes[j].at
		}
		return changes[i].delta < changes[j].delta
	})
	levels := []level{{at: math.MinInt64}}
	holding := map[string]int{}
	seats := 0
	first := ""
	for _, c := range changes {
		seats += c.delta
		holding[c.reg] += c.delta
		if holding[c.reg] == 0 {
			delete(holding, c.reg)
		}
		levels = append(levels, level{at: c.at, seats: seats})
		if seats > capacity && first == "" {
			first = fmt.Sprintf("at %d its activities' registrations surely held %d seats: %s", c.at, seats, describeHolding(holding))
		}
	}
	return levels, first
}

func describeHolding(holding map[string]int) string {
	ids := make([]string, 0, len(holding))
	for id := range holding {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%s ×%d", id, holding[id])
	}
	return strings.Join(parts, ", ")
}

// checkPoolRead checks an authoritative pool read, from call to ret,
// against the pool's levels; it returns what is wrong ("" if nothing).
func checkPoolRead(o history.Output, levels []level, call, ret int64) string {
	switch {
	case o.Taken > o.Capacity:
		return fmt.Sprintf("taken %d over capacity %d", o.Taken, o.Capacity)
	case o.Remaining != nil && *o.Remaining != max(0, o.Capacity-o.Taken-o.Reserved):
		return fmt.Sprintf("remaining %d with capacity %d, taken %d and reserved %d", *o.Remaining, o.Capacity, o.Taken, o.Reserved)
	}
	// The fewest seats surely held at some moment of the read: the level
	// when it was sent and every level it went through until it returned.
	least := math.MaxInt
	for i, l := range levels {
		if l.at > ret {
			break
		}
		if l.at >= call || i == len(levels)-1 || levels[i+1].at >= call {
			least = min(least, l.seats)
		}
	}
	if least != math.MaxInt && o.Taken < least {
		return fmt.Sprintf("taken %d while its activities' registrations surely held at least %d seats throughout", o.Taken, least)
	}
	return ""
}
