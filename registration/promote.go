package registration

import "slices"

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

// adoptStray takes the waiting registrations the commands named, and
// that the read of the line did not hold, into the known part of the line
// at their places, for PolicyFill: one that shrank may now fit. No unread
// party of the same size is older and reachable in the batch (see
// QueueNeed), so taking it in skips nobody. Under PolicyStrict the known
// line is a head without gaps, and they stay out of it.
func (d *decision) adoptStray() {
	if len(d.stray) == 0 {
		return
	}
	for _, r := range d.stray {
		if r.Status == Waitlisted {
			d.unread--
			d.queue = append(d.queue, r)
		}
	}
	d.stray = nil
	sortLine(d.queue)
}

// promote gives the free seats to the line by the activity's policy:
// under PolicyStrict to the head while it fits, under PolicyFill to every
// waiting registration that fits, oldest first.
func (d *decision) promote(cause Origin) error {
	o := Origin{Actor: ActorSystem, RequestID: cause.RequestID}
	if len(d.pools) > 0 || len(d.left) > 0 {
		return d.w.promoteAcross(d.w.neighbours(d, append(slices.Clone(d.pools), d.left...)), o)
	}
	if d.act.Policy == PolicyFill {
		d.adoptStray()
		d.queue = d.promoteFitting(d.queue, o)
		d.tail = d.promoteFitting(d.tail, o)
		return nil
	}
	for d.fits(1) && d.waiting() > 0 {
		r, err := d.strictHead()
		if err != nil || r == nil || !d.fits(r.Seats) {
			return err
		}
		d.admitFromLine(r, o)
	}
	return nil
}

// strictHead returns the head of the line that PolicyStrict serves next:
// the oldest waiting party the activity and its pools can ever hold. A
// party larger than a capacity lowered below it is passed over: it keeps
// its place, and is served again once the capacity holds it. nil when
// nobody waits that can be held, as far as the line was read.
func (d *decision) strictHead() (*Registration, error) {
	c := d.counts(0)
	skipped := false
	for _, r := range d.queue {
		if c.CanEverHold(r.Seats) {
			return r, nil
		}
		skipped = true
	}
	if d.unread > 0 {
		if skipped {
			// The head that was read is all parties that cannot be held:
			// the next change reads the line again.
			return nil, nil
		}
		return nil, errShortQueue
	}
	for _, r := range d.tail {
		if c.CanEverHold(r.Seats) {
			return r, nil
		}
	}
	return nil, nil
}

// promoteFitting admits, oldest first, every registration of line that
// fits in the free seats, and returns the rest of the line.
func (d *decision) promoteFitting(line []*Registration, o Origin) []*Registration {
	rest := line[:0:0]
	for _, r := range line {
		if d.fits(r.Seats) {
			d.admit(r, o)
			continue
		}
		rest = append(rest, r)
	}
	return rest
}

// admit moves a waiting registration to pending.
func (d *decision) admit(r *Registration, o Origin) {
	d.act.Waiting--
	d.take(r.Seats)
	d.move(r, Pending, EventPromoted, o)
}
