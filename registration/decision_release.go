package registration

import (
	"time"
)

func (d *decision) cancel(i int, c CancelCommand) error {
	r, err := d.named(c.RegistrationID)
	if err != nil || (!c.Caller.Admin && r.UserID != c.Caller.UserID) {
		d.outcomes[i] = Outcome{Err: RegistrationNotFound(c.RegistrationID)}
		return nil
	}
	reason := CancelUser
	if c.Caller.Admin {
		reason = CancelAdmin
	}
	switch {
	case r.Status.Occupying():
		r.CancelReason = &reason
		d.move(r, Cancelled, EventCancelled, c.Origin)
		d.release(r, r.Seats)
		delete(d.holders, r.UserID)
		d.holdInSeries(r, false)
		d.outcomes[i] = d.changedOutcome(r)
		return d.promote(c.Origin)
	case r.Status == Waitlisted:
		d.leaveLine(r)
		r.CancelReason = &reason
		d.move(r, Cancelled, EventCancelled, c.Origin)
		delete(d.holders, r.UserID)
		d.holdInSeries(r, false)
		d.outcomes[i] = d.changedOutcome(r)
		// Under PolicyStrict the new head may fit.
		return d.promote(c.Origin)
	default:
		d.outcomes[i] = d.unchangedOutcome(r)
	}
	return nil
}

// leaveLine takes a waitlisted registration off the list.
func (d *decision) leaveLine(r *Registration) {
	d.act.Waiting--
	if removeReg(&d.line, r) || removeReg(&d.tail, r) {
		return
	}
	// Behind the known head: one fewer unread.
	d.unread--
}

func removeReg(list *[]*Registration, r *Registration) bool {
	for k, q := range *list {
		if q == r {
			*list = append((*list)[:k:k], (*list)[k+1:]...)
			return true
		}
	}
	return false
}

func (d *decision) setStatus(i int, c StatusCommand, now time.Time) error {
	r, err := d.named(c.RegistrationID)
	if err != nil {
		d.outcomes[i] = Outcome{Err: err}
		return nil
	}
	switch {
	case c.To == AwaitingPayment && r.Status == Pending:
		// PostgreSQL keeps microseconds: the answer must equal what is
		// read back later.
		until := now.Add(time.Duration(d.act.HoldSeconds) * time.Second).UTC().Truncate(time.Microsecond)
		r.ExpiresAt = &until
		d.move(r, AwaitingPayment, EventStatusChanged, c.Origin)
	case c.To == Approved && (r.Status == Pending || r.Status == AwaitingPayment):
		d.move(r, Approved, EventStatusChanged, c.Origin)
	case c.To == Approved && r.Status == Expired:
		if id := d.holders[r.UserID]; id != "" {
			d.outcomes[i] = Outcome{Err: AlreadyRegistered(d.act.ID, id)}
			return nil
		}
		if err := d.seriesRefusal(r.UserID); err != nil {
			d.outcomes[i] = Outcome{Err: err}
			return nil
		}
		// A re-admission takes its seats or nothing: it never joins the
		// line.
		if c := d.counts(r.Seats); Admit(c) != AdmitSeat {
			d.outcomes[i] = Outcome{Err: ActivityFull(d.act.ID, c)}
			return nil
		}
		// It takes public seats: a block it once used keeps its own.
		r.BlockID = nil
		d.move(r, Approved, EventReadmitted, c.Origin)
		d.take(r.Seats)
		d.holders[r.UserID] = r.ID
		d.holdInSeries(r, true)
	default:
		d.outcomes[i] = Outcome{Err: InvalidTransition(*r, c.To)}
		return nil
	}
	d.outcomes[i] = d.changedOutcome(r)
	return nil
}

func (d *decision) expire(i int, c ExpireCommand, now time.Time) error {
	r, err := d.named(c.RegistrationID)
	if err != nil {
		d.outcomes[i] = Outcome{Err: err}
		return nil
	}
	if r.Status != AwaitingPayment || r.ExpiresAt == nil || r.ExpiresAt.After(now) {
		d.outcomes[i] = d.unchangedOutcome(r)
		return nil
	}
	d.move(r, Expired, EventExpired, c.Origin)
	d.release(r, r.Seats)
	delete(d.holders, r.UserID)
	d.holdInSeries(r, false)
	d.outcomes[i] = d.changedOutcome(r)
	return d.promote(c.Origin)
}

// reduce gives back some of a registration's seats: it keeps c.Seats.
func (d *decision) reduce(i int, c SeatsCommand) error {
	r, err := d.named(c.RegistrationID)
	if err != nil || (!c.Caller.Admin && r.UserID != c.Caller.UserID) {
		d.outcomes[i] = Outcome{Err: RegistrationNotFound(c.RegistrationID)}
		return nil
	}
	switch {
	case !r.Status.Active() || c.Seats > r.Seats || c.Seats < 1:
		d.outcomes[i] = Outcome{Err: SeatsNotReducible(*r, c.Seats)}
		return nil
	case c.Seats == r.Seats:
		d.outcomes[i] = d.unchangedOutcome(r)
		return nil
	}
	from := r.Seats
	if r.Status.Occupying() {
		d.release(r, from-c.Seats)
	}
	r.Seats = c.Seats
	status := r.Status
	d.record(r, EventSeatsChanged, &status, c.Origin)
	d.events[len(d.events)-1].SeatsFrom = &from
	// The answer is the registration as the command left it: promoted,
	// if it now fits.
	err = d.promote(c.Origin)
	d.outcomes[i] = d.changedOutcome(r)
	return err
}
