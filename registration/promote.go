package registration

import (
	"slices"
)

// adoptStray takes the waiting registrations the commands named, and
// that the read of the line did not hold, into the known part of the line
// at their places, for PolicyFill: one that shrank may now fit. No unread
// party of the same size is older and reachable in the batch (see
// LineNeed), so taking it in skips nobody. Under PolicyStrict the known
// line is a head without gaps, and they stay out of it.
func (d *decision) adoptStray() {
	if len(d.stray) == 0 {
		return
	}
	for _, r := range d.stray {
		if r.Status == Waitlisted {
			d.unread--
			d.line = append(d.line, r)
		}
	}
	d.stray = nil
	sortLine(d.line)
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
		d.line = d.promoteFitting(d.line, o)
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

// strictHead returns the head of the line that PolicyStrict serves next,
// nil when nobody waits.
func (d *decision) strictHead() (*Registration, error) {
	switch {
	case len(d.line) > 0:
		return d.line[0], nil
	case d.unread > 0:
		return nil, errShortLine
	case len(d.tail) > 0:
		return d.tail[0], nil
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

// promoteAcross gives the free seats to the lines of the activities ds:
// over and over, each activity's next promotion by its policy (the head
// under PolicyStrict, the oldest that fits under PolicyFill) is a
// candidate when it fits all its limits, and the candidate that joined
// first is admitted.
func (w *world) promoteAcross(ds []*decision, o Origin) error {
	for {
		var best *decision
		var pick *Registration
		for _, d := range ds {
			r, err := d.candidate()
			if err != nil {
				return err
			}
			if r != nil && (pick == nil || r.Joined < pick.Joined) {
				best, pick = d, r
			}
		}
		if best == nil {
			return nil
		}
		best.admitFromLine(pick, o)
	}
}

// candidate returns the registration the activity's policy would promote
// next into the seats free now, or nil.
func (d *decision) candidate() (*Registration, error) {
	if d.waiting() == 0 || !d.fits(1) {
		return nil, nil
	}
	if d.act.Policy == PolicyFill {
		d.adoptStray()
		for _, line := range [][]*Registration{d.line, d.tail} {
			for _, r := range line {
				if d.fits(r.Seats) {
					return r, nil
				}
			}
		}
		return nil, nil
	}
	r, err := d.strictHead()
	if err != nil || r == nil || !d.fits(r.Seats) {
		return nil, err
	}
	return r, nil
}

// admitFromLine takes r off the known line and admits it.
func (d *decision) admitFromLine(r *Registration, o Origin) {
	if !removeReg(&d.line, r) {
		removeReg(&d.tail, r)
	}
	d.admit(r, o)
}
