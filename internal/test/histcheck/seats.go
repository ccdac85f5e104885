package histcheck

import (
	"net/http"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// The seat rules of the activity model: a registration holds 1 to the
// activity's most seats, all or nothing, and the waiting list serves the
// parties by the activity's policy.

// policyFill is the waiting-list policy that serves every party that fits.
const policyFill = "fill"

func policyName(fill bool) string {
	if fill {
		return policyFill
	}
	return "strict"
}

// decision is what the activity decides for a signup of user u.
type decision int

const (
	admit decision = iota
	waitlist
	full
	already
	tooMany
	// fromBlock: seated from a block of its code or of one of its roles;
	// badCode: its code names no live block.
	fromBlock
	badCode
)

// decide decides user u's signup for seats seats with code ("": none)
// and roles. A signup that a block of its code or of one of its roles has
// room for takes its seats from the oldest such block, whoever waits;
// else it joins the end of the line and the policy's promotion decides:
// strict admits it only when nobody waits and seats are free, fill
// whenever seats are free.
func (s activityState) decide(u, seats int, code string, roles []string) decision {
	k, known := s.blockFor(code, roles, seats)
	switch {
	case s.users[u].status != "":
		return already
	case seats > s.maxSeats:
		return tooMany
	case !known:
		return badCode
	case k >= 0:
		return fromBlock
	case !s.canEverHold(seats):
		return full
	case s.free() >= seats && (len(s.queue) == 0 || s.fill):
		return admit
	case s.waitlist:
		return waitlist
	}
	return full
}

// canEverHold reports whether a party of seats fits the activity's
// capacity and its smallest pool's: a larger one is refused as full,
// waiting list or not. A capacity of 0 refuses no party (everyone waits).
func (s activityState) canEverHold(seats int) bool {
	holds := func(capacity int) bool { return capacity == 0 || seats <= capacity }
	return holds(s.capacity) && (!s.pooled || holds(s.poolSeats))
}

// promote gives the free seats to the line by the activity's policy
// (the caller cloned s): strict, to the head while it fits (a head that
// does not fit holds the line); fill, to every party that fits, oldest
// first (one that does not fit keeps its place). In pools, whose free
// seats the model does not know, it does nothing: the pooled states
// promote by promotions (pooled.go).
func (s *activityState) promote() {
	if s.pooled {
		return
	}
	if s.fill {
		var line []int
		for _, u := range s.queue {
			if s.users[u].seats <= s.free() {
				s.users[u].status = pending
				continue
			}
			line = append(line, u)
		}
		s.queue = line
		return
	}
	for len(s.queue) > 0 && s.users[s.queue[0]].seats <= s.free() {
		s.users[s.queue[0]].status = pending
		s.queue = s.queue[1:]
	}
}

// quiet reports whether the line has nothing to promote: under strict,
// anyone waiting means fewer seats are free than the head asks for;
// under fill, every party that waits asks for more seats than are free.
// Every step leaves the model quiet (outside pools).
func (s activityState) quiet() bool { return s.quietAt(s.free()) }

// quietAt reports whether the line has nothing to promote into free
// seats.
func (s activityState) quietAt(free int) bool {
	for i, u := range s.queue {
		if s.users[u].seats <= free && (s.fill || i == 0) {
			return false
		}
	}
	return true
}

// refusedWith reports whether a refusal as full of a party of seats,
// saying remaining seats were left, fits s: outside pools, remaining is
// its free seats; in pools, what a signup could get, fewer than the
// party asks for and no more than the activity's own free seats.
func (s activityState) refusedWith(remaining, seats int) bool {
	free := max(0, s.free())
	if !s.pooled {
		return remaining == free
	}
	return remaining >= 0 && remaining <= free && remaining < seats
}

// stepReduce is user u's reduction of registration id to seats seats:
// fewer seats free the rest, and the line takes them at once; the same
// number changes nothing; more, or a cancelled registration, are refused.
// The answer is the registration as the reduction left it: a waiting party
// that then fits may be answered waitlisted or pending.
func stepReduce(s activityState, u int, id string, seats int, o activityOutput) (bool, any) {
	r := o.out
	switch {
	case s.users[u].reg == id:
		h := s.users[u]
		switch {
		case seats > h.seats:
			return o.unknown || refused(r, "invalid_transition"), s
		case seats == h.seats:
			return o.unknown || (ok(r, http.StatusOK) && r.RegStatus == h.status && r.Seats == seats), s
		}
		n := s.clone()
		if occupying(h.status) {
			n.giveBack(u, h.seats-seats)
		}
		n.users[u].seats = seats
		n.promote()
		answered := r.RegStatus == h.status || r.RegStatus == n.users[u].status
		return o.unknown || (ok(r, http.StatusOK) && answered && r.Seats == seats), n
	case s.isClosed(id):
		return o.unknown || refused(r, "invalid_transition"), s
	}
	return o.unknown || (r.Status == http.StatusNotFound && r.Code == "not_found"), s
}

// heldSeats bounds the seats an operation may hold in the display tier
// before it reaches the authority (a signup's), or free at the authority
// before the display shows it (a cancel's or seat reduction's): what the
// client knew of the registration, else the activity's most seats.
func heldSeats(op history.Op, maxSeats int) int {
	held := op.Input.Held
	if held == 0 {
		held = maxSeats
	}
	switch op.Kind {
	case history.Signup:
		return max(op.Input.Seats, 1)
	case history.ReduceSeats:
		return max(0, held-max(op.Input.Seats, 1))
	}
	return held
}
