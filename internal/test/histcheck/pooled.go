package histcheck

import (
	"net/http"
	"slices"
	"strings"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// Activities in pools. A signup must fit its activity and every pool the
// activity belongs to, and a release promotes across its pools: each
// activity's policy names its candidate (strict: the head, if it fits;
// fill: the oldest party that fits) in the seats free in it and its pools,
// and the oldest candidate to join a line is seated first, until none is
// left. An activity's partition sees its own operations only, not the
// pools' free seats, which the other activities of the pools change. So
// its model knows what a pool may do to it, not what it did:
//
//   - a signup that fits the activity's own seats (and line) may be
//     seated, or waitlisted (refused as full without a waiting list),
//     a refusal saying fewer seats remain than the party asks for, and
//     no more than the activity's own free seats;
//   - the line may be promoted at any moment (another activity's release
//     frees a pool's seats), by the policy in the activity's own free
//     seats: strict, the head; fill, a party no older party of which is
//     as small or smaller (the oldest that fits is promoted first);
//   - nothing is promoted unless it happens so: a release promotes no one
//     if the pools have no seats for it;
//   - an authoritative read's remaining (the least of the activity's and
//     its pools' free seats) is at most the activity's own free seats, and
//     the line is quiet for it: no candidate fits.
//
// The model's state is thus the set of states the activity may be in
// (activityStates); outside pools, it has one. What a pool holds across
// its activities is checked over the whole history (pools.go).

// activityStates is the activity model's state: every state the activity
// may be in, each once, in no particular order. It is never changed in
// place.
type activityStates []activityState

// with returns ss with the states of more that it does not hold yet.
func (ss activityStates) with(more ...activityState) activityStates {
	for _, s := range more {
		if !slices.ContainsFunc(ss, func(t activityState) bool { return equalActivity(s, t) }) {
			ss = append(ss, s)
		}
	}
	return ss
}

func equalStates(a, b any) bool {
	x, y := a.(activityStates), b.(activityStates)
	if len(x) != len(y) {
		return false
	}
	for _, s := range x {
		if !slices.ContainsFunc(y, func(t activityState) bool { return equalActivity(s, t) }) {
			return false
		}
	}
	return true
}

// hashStates hashes a set of states whatever its order.
func hashStates(a any) uint64 {
	var h uint64
	for _, s := range a.(activityStates) {
		h += hashActivity(s)
	}
	return h
}

func describeStates(a any) string {
	ss := a.(activityStates)
	if len(ss) == 1 {
		return describeActivity(ss[0])
	}
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = describeActivity(s)
	}
	return "one of: " + strings.Join(parts, " | ")
}

// stepStates is the model's step over sets of states: every state the
// operation may leave from each state it may start from. It fails when no
// state explains the operation.
func stepStates(display bool) func(st, in, out any) (bool, any) {
	one := stepActivity(display)
	return func(st, in, out any) (bool, any) {
		var next activityStates
		if op := in.(activityInput).op; op.Kind == Confirm || op.Kind == Release {
			for _, s := range st.(activityStates) {
				if s.created && op.Input.User < len(s.users) {
					next = next.with(promotionsOf(stepLifecycle(s, op, out.(activityOutput)))...)
				}
			}
			return len(next) > 0, next
		}
		for _, s := range st.(activityStates) {
			if s.pooled {
				next = next.with(stepPooled(s, in.(activityInput), out.(activityOutput), display)...)
				continue
			}
			if ok, n := one(s, in, out); ok {
				next = next.with(n.(activityState).promotions()...)
			}
		}
		return len(next) > 0, next
	}
}

// promotions returns s and every state its line may reach by promotions
// when the activity is in pools: one party at a time, by the policy, in
// the activity's own free seats. Outside pools, s alone (promote gives the
// line its seats at once).
func (s activityState) promotions() []activityState {
	out := activityStates{s}
	if !s.pooled {
		return out
	}
	for i := 0; i < len(out); i++ {
		out = out.with(out[i].promotable()...)
	}
	return out
}

// promotable returns the states in which one more waiting party was
// promoted: strict, the head, if it fits the activity's own free seats;
// fill, any party that fits them and is smaller than every older party
// (else an older one would be the candidate first).
func (s activityState) promotable() []activityState {
	var out []activityState
	smallest := 0 // of the older parties
	for i, u := range s.queue {
		seats := s.users[u].seats
		if seats <= s.free() && (i == 0 || seats < smallest) {
			n := s.clone()
			n.users[u].status = pending
			n.queue = slices.Delete(n.queue, i, i+1)
			out = append(out, n)
		}
		if !s.fill {
			break
		}
		if i == 0 || seats < smallest {
			smallest = seats
		}
	}
	return out
}

// promotionsOf returns the promotions of every state of ss.
func promotionsOf(ss []activityState) activityStates {
	var out activityStates
	for _, s := range ss {
		out = out.with(s.promotions()...)
	}
	return out
}

// stepPooled is the step of an activity in pools, from state s: the
// states it may be in after the operation, each with the promotions that
// may follow.
func stepPooled(s activityState, in activityInput, o activityOutput, display bool) []activityState {
	op := in.op
	if op.Kind != history.CreateActivity && op.Input.User >= len(s.users) {
		return nil
	}
	u := op.Input.User
	switch op.Kind {
	case history.Signup:
		return signupPooled(s, u, max(op.Input.Seats, 1), op.Input.Code, op.Input.Roles, o)
	case history.CreateBlock:
		// One that fits the activity may find a pool without the seats.
		seats := max(op.Input.Seats, 1)
		var out []activityState
		for _, made := range []bool{s.free() >= seats, false} {
			if good, n := createBlockAs(s, op.Input, made, o); good {
				out = append(out, n)
			}
		}
		return promotionsOf(out)
	case history.ReduceSeats:
		return reducePooled(s, u, op.Input.Registration, op.Input.Seats, o)
	case history.SetCapacity:
		n := s.clone()
		n.capacity = op.Input.Capacity
		var out []activityState
		for _, q := range n.promotions() {
			if o.unknown || (ok(o.out, http.StatusOK) && sameCounts(q, o.out) && remainingFits(q, o.out)) {
				out = append(out, q)
			}
		}
		return promotionsOf(out)
	}
	good, n := stepActivity(display)(s, in, o)
	if !good {
		return nil
	}
	return n.(activityState).promotions()
}

// signupPooled is user u's signup for seats seats on an activity in pools:
// one that fits the activity may find a pool without the seats.
func signupPooled(s activityState, u, seats int, code string, roles []string, o activityOutput) []activityState {
	d := s.decide(u, seats, code, roles)
	options := []decision{d}
	if d == admit {
		options = append(options, full)
		if s.waitlist {
			options[1] = waitlist
		}
	}
	var out []activityState
	for _, d := range options {
		if good, n := signupAs(s, u, seats, code, roles, d, o); good {
			out = append(out, n)
		}
	}
	return promotionsOf(out)
}

// reducePooled is user u's reduction of registration id to seats seats on
// an activity in pools: a waiting party that shrank may be promoted by
// it, and is answered so, or not, if a pool has no seats for it.
func reducePooled(s activityState, u int, id string, seats int, o activityOutput) []activityState {
	h := s.users[u]
	if h.reg != id || seats >= h.seats {
		good, n := stepReduce(s, u, id, seats, o)
		if !good {
			return nil
		}
		return n.(activityState).promotions()
	}
	n := s.clone()
	if occupying(h.status) {
		n.giveBack(u, h.seats-seats)
	}
	n.users[u].seats = seats
	if o.unknown {
		return n.promotions()
	}
	r := o.out
	switch {
	case !ok(r, http.StatusOK) || r.Seats != seats:
		return nil
	case r.RegStatus == h.status:
		return n.promotions()
	case h.status == waitlisted && r.RegStatus == pending:
		var out []activityState
		for _, q := range n.promotions() {
			if q.users[u].status == pending {
				out = append(out, q)
			}
		}
		return out
	}
	return nil
}

// poolsNote notes an activity's pools.
func poolsNote(pools []string) string {
	if len(pools) == 0 {
		return ""
	}
	return ", in pools " + strings.Join(pools, " ")
}
