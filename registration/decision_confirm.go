package registration

import (
	"github.com/physiciansnet/capacityd"
)

// confirm records that a registration that holds a seat will come. A
// confirmed one is answered unchanged at any time; an unconfirmed one
// after the activity's confirm_by is confirmation_closed (its seat was,
// or is about to be, released); one without a seat has nothing to
// confirm.
func (d *decision) confirm(i int, c ConfirmCommand) {
	r, err := d.named(c.RegistrationID)
	if err != nil || (!c.Caller.Admin && r.UserID != c.Caller.UserID) {
		d.outcomes[i] = Outcome{Err: RegistrationNotFound(c.RegistrationID)}
		return
	}
	switch {
	case r.Status == Waitlisted:
		d.outcomes[i] = Outcome{Err: capacityd.Errorf(capacityd.EInvalidTransition,
			"registration %s is waitlisted: it holds no seat to confirm", r.ID)}
	case r.Status.Occupying() && r.ConfirmedAt != nil:
		d.outcomes[i] = d.unchangedOutcome(r)
	case d.act.ConfirmBy != nil && !d.st.At.Before(*d.act.ConfirmBy):
		d.outcomes[i] = Outcome{Err: capacityd.Errorf(capacityd.EConfirmationClosed,
			"registration %s was not confirmed by the activity's confirm_by (%s)", r.ID, d.act.ConfirmBy.UTC().Format("2006-01-02T15:04:05Z"))}
	case !r.Status.Occupying():
		d.outcomes[i] = Outcome{Err: capacityd.Errorf(capacityd.EInvalidTransition,
			"registration %s is %s: it holds no seat to confirm", r.ID, r.Status)}
	default:
		at := d.st.At
		r.ConfirmedAt = &at
		status := r.Status
		d.record(r, EventConfirmed, &status, c.Origin)
		d.outcomes[i] = d.changedOutcome(r)
	}
}

// confirmedByGettingASeat confirms a registration that gets its seat at
// or after the activity's confirm_by: there is no later moment at which
// it could confirm.
func (d *decision) confirmedByGettingASeat(r *Registration, typ EventType) {
	switch typ {
	case EventCreated, EventPromoted, EventReadmitted:
	default:
		return
	}
	if r.ConfirmedAt == nil && d.act.ConfirmBy != nil && !d.st.At.Before(*d.act.ConfirmBy) {
		at := d.st.At
		r.ConfirmedAt = &at
	}
}

// releaseByRule cancels the named registrations that the rule still
// releases, read under the lock: holding a seat, and unconfirmed (or
// without an accepted entry). Each is one registration.released event;
// then the freed seats promote the line, so the promotions' events come
// right after the releases'.
func (d *decision) releaseByRule(i int, c ReleaseCommand) error {
	released := 0
	for _, id := range c.RegistrationIDs {
		r, ok := d.regs[id]
		if !ok || !r.Status.Occupying() {
			continue
		}
		if (c.Reason == CancelUnconfirmed && r.ConfirmedAt != nil) || (c.Reason == CancelNoShow && r.CheckedIn) {
			continue
		}
		reason := c.Reason
		r.CancelReason = &reason
		d.move(r, Cancelled, EventReleased, c.Origin)
		d.events[len(d.events)-1].Reason = &reason
		d.release(r, r.Seats)
		delete(d.holders, r.UserID)
		d.holdInSeries(r, false)
		released++
	}
	d.outcomes[i] = Outcome{Changed: released > 0}
	if released == 0 {
		return nil
	}
	return d.promote(c.Origin)
}
