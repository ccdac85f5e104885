package histcheck

import (
	"net/http"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

func ok(o history.Output, status int) bool { return o.Status == status }

func refused(o history.Output, code string) bool {
	return o.Status == http.StatusConflict && o.Code == code
}

// stepActivity is the model's step. display: seat reads are steps too.
func stepActivity(display bool) func(st, in, out any) (bool, any) {
	return func(st, in, out any) (bool, any) {
		s := st.(activityState)
		op := in.(activityInput).op
		o := out.(activityOutput)
		if op.Kind == history.CreateActivity {
			if s.created {
				return false, s
			}
			return true, activityState{created: true, capacity: op.Input.Capacity, waitlist: op.Input.Waitlist,
				fill: op.Input.Policy == policyFill, maxSeats: max(op.Input.MaxSeats, 1), pooled: len(op.Input.Pools) > 0,
				poolSeats: in.(activityInput).poolSeats, series: op.Input.Series != "", window: op.Input.OpensAt != nil || op.Input.Queue != nil,
				queued: op.Input.Queue != nil, users: make([]holder, op.Input.Users)}
		}
		if !s.created || op.Input.User >= len(s.users) {
			return false, s
		}
		u := op.Input.User
		switch op.Kind {
		case history.CreateBlock:
			return createBlockAs(s, op.Input, s.free() >= max(op.Input.Seats, 1), o)
		case history.DeleteBlock:
			return stepDeleteBlock(s, op.Input.Block, o)
		case history.Signup:
			return stepSignup(s, u, max(op.Input.Seats, 1), op.Input.Code, op.Input.Roles, o)
		case history.Cancel:
			return stepCancel(s, u, op.Input.Registration, o)
		case history.SetStatus:
			return stepStatus(s, u, op.Input.Registration, op.Input.To, o)
		case history.ReduceSeats:
			return stepReduce(s, u, op.Input.Registration, op.Input.Seats, o)
		case history.SetCapacity:
			n := s.clone()
			n.capacity = op.Input.Capacity
			n.promote()
			if o.unknown {
				return true, n
			}
			return ok(o.out, http.StatusOK) && sameCounts(n, o.out) && remainingFits(n, o.out), n
		case history.ReadActivity:
			return ok(o.out, http.StatusOK) && sameCounts(s, o.out) && o.out.Waitlist == s.waitlist && remainingFits(s, o.out), s
		case history.ReadSeats:
			if !display {
				return true, s
			}
			return ok(o.out, http.StatusOK) && o.out.Taken <= s.taken()+in.(activityInput).allowance, s
		}
		return false, s
	}
}

func sameCounts(s activityState, o history.Output) bool {
	return o.Capacity == s.capacity && o.Taken == s.taken() && o.Waiting == len(s.queue) && o.Reserved == s.reserved()
}

// remainingFits reports whether the remaining an authoritative answer
// carries (if it carries one) fits state s: what a new signup could get,
// the activity's own free seats, or fewer when one of its pools has fewer
// left; and the line is quiet for it (strict: the head asks for more;
// fill: every waiting party asks for more), as every commit leaves it.
func remainingFits(s activityState, o history.Output) bool {
	if o.Remaining == nil {
		return true
	}
	r, free := *o.Remaining, max(0, s.free())
	if r < 0 || r > free || (!s.pooled && r != free) {
		return false
	}
	return s.quietAt(r)
}

// stepSignup is user u's signup for seats seats, with code ("": none)
// and the roles of its token.
func stepSignup(s activityState, u, seats int, code string, roles []string, o activityOutput) (bool, any) {
	return signupAs(s, u, seats, code, roles, s.decide(u, seats, code, roles), o)
}

// signupAs is user u's signup for seats seats with code and roles,
// decided d. In a
// series, any signup the activity would not refuse first (already
// registered, too many seats) may be refused at the user's limit.
func signupAs(s activityState, u, seats int, code string, roles []string, d decision, o activityOutput) (bool, activityState) {
	n := s
	if !o.unknown && s.series && d != already && d != tooMany && refused(o.out, "limit_reached") {
		return true, s
	}
	// The window and the admission token are decided before anything
	// else, and a refusal for them changes nothing.
	if !o.unknown && ((s.window && refused(o.out, "registration_closed")) ||
		(s.queued && o.out.Status == http.StatusForbidden && o.out.Code == "admission_required")) {
		return true, s
	}
	switch d {
	case fromBlock:
		k, _ := s.blockFor(code, roles, seats)
		n = s.clone()
		n.blocks[k].used += seats
		n.users[u] = holder{reg: unknownID, status: pending, seats: seats, block: n.blocks[k].serial}
	case admit:
		n = s.clone()
		n.users[u] = holder{reg: unknownID, status: pending, seats: seats}
	case waitlist:
		n = s.clone()
		n.users[u] = holder{reg: unknownID, status: waitlisted, seats: seats}
		n.queue = append(n.queue, u)
	}
	if o.unknown {
		return true, n
	}
	r := o.out
	switch {
	case (d == admit || d == fromBlock) && ok(r, http.StatusCreated) && r.RegStatus == pending && r.Registration != "" && r.Seats == seats:
		n.users[u].reg = r.Registration
		return n.seatedFrom(u, r.Block), n
	case d == waitlist && ok(r, http.StatusAccepted) && r.RegStatus == waitlisted && r.Position == len(s.queue)+1 && r.Seats == seats:
		n.users[u].reg = r.Registration
		return true, n
	case d == full && refused(r, "activity_full") && r.Remaining != nil && s.refusedWith(*r.Remaining, seats):
		return true, s
	case (d == tooMany || d == badCode) && r.Status == http.StatusBadRequest && r.Code == "invalid_request":
		return true, s
	case d == already && refused(r, "already_registered"):
		switch s.users[u].reg {
		case r.Registration:
			return true, s
		case unknownID:
			if s.isClosed(r.Registration) {
				return false, s
			}
			n = s.clone()
			n.users[u].reg = r.Registration
			return true, n
		}
	}
	return false, s
}

func stepCancel(s activityState, u int, id string, o activityOutput) (bool, any) {
	r := o.out
	switch {
	case s.users[u].reg == id:
		n := s.clone()
		n.close(u)
		return o.unknown || (ok(r, http.StatusOK) && r.RegStatus == cancelled && r.Seats == s.users[u].seats), n
	case s.isClosed(id):
		return o.unknown || (ok(r, http.StatusOK) && r.RegStatus == cancelled), s
	}
	return o.unknown || (r.Status == http.StatusNotFound && r.Code == "not_found"), s
}

func stepStatus(s activityState, u int, id, to string, o activityOutput) (bool, any) {
	r := o.out
	switch {
	case s.users[u].reg == id:
		from := s.users[u].status
		if (to == awaitingPayment && from == pending) || (to == approved && (from == pending || from == awaitingPayment)) {
			n := s.clone()
			n.users[u].status = to
			return o.unknown || (ok(r, http.StatusOK) && r.RegStatus == to && r.Seats == s.users[u].seats), n
		}
		return o.unknown || refused(r, "invalid_transition"), s
	case s.isClosed(id):
		return o.unknown || refused(r, "invalid_transition"), s
	}
	return o.unknown || (r.Status == http.StatusNotFound && r.Code == "not_found"), s
}
