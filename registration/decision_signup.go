package registration

import (
	"bytes"
)

func (d *decision) signup(i int, c SignupCommand) {
	if c.IdempotencyKey != "" {
		ref := IdempotencyRef{c.UserID, c.IdempotencyKey}
		if o, ok := d.st.Outcomes[ref]; ok {
			d.outcomes[i] = o.Replay(c.RequestHash)
			return
		}
		if j, ok := d.first[ref]; ok {
			first := d.outcomes[j]
			if !bytes.Equal(d.cmds[j].(SignupCommand).RequestHash, c.RequestHash) {
				d.outcomes[i] = Outcome{Err: idempotencyConflict(c.IdempotencyKey)}
				return
			}
			first.Replayed, first.Changed = true, false
			d.outcomes[i] = first
			return
		}
	}
	// A signup refused for its window or its admission is not an
	// Idempotency-Key's first outcome: the same request may succeed once
	// the activity opens or the user is admitted.
	if err := d.admitted(c); err != nil {
		d.outcomes[i] = Outcome{Err: err}
		return
	}
	if c.IdempotencyKey != "" {
		d.first[IdempotencyRef{c.UserID, c.IdempotencyKey}] = i
	}
	if id := d.holders[c.UserID]; id != "" {
		d.outcomes[i] = Outcome{Err: AlreadyRegistered(d.act.ID, id)}
		return
	}
	n := max(c.Seats, 1)
	if n > d.act.MaxSeats {
		d.outcomes[i] = Outcome{Err: TooManySeats(d.act, n)}
		return
	}
	if err := d.seriesRefusal(c.UserID); err != nil {
		d.outcomes[i] = Outcome{Err: err}
		return
	}
	b, err := d.blockFor(c, n)
	if err != nil {
		d.outcomes[i] = Outcome{Err: err}
		return
	}
	r := &Registration{
		ID: c.RegistrationID, ActivityID: d.act.ID, UserID: c.UserID, Seats: n, Metadata: c.Metadata,
		CreatedAt: d.st.At,
	}
	admission := AdmitSeat
	if b != nil {
		id := b.ID
		r.BlockID = &id
		d.useBlock(b, n)
	} else {
		admission = Admit(d.counts(n))
	}
	if admission != AdmitFull {
		d.useToken(c)
	}
	switch admission {
	case AdmitSeat:
		r.Status = Pending
		d.take(n)
		d.inserted[r.ID] = true
		d.record(r, EventCreated, nil, c.Origin)
	case AdmitWaitlist:
		r.Status = Waitlisted
		d.inserted[r.ID] = true
		// The join order is the order of the waitlisted events: record
		// sets WaitlistSeq to the event's seq.
		d.record(r, EventWaitlisted, nil, c.Origin)
		d.tail = append(d.tail, r)
		d.act.Waiting++
		pos := d.act.Waiting
		snapshot := *r
		snapshot.WaitlistPosition = &pos
		// The event's registration is as the change left it: in line at pos.
		d.events[len(d.events)-1].Registration.WaitlistPosition = &pos
		d.regs[r.ID] = r
		d.holders[c.UserID] = r.ID
		d.holdInSeries(r, true)
		d.outcomes[i] = Outcome{Registration: &snapshot, Changed: true}
		return
	default:
		d.outcomes[i] = Outcome{Err: ActivityFull(d.act.ID, d.counts(n))}
		return
	}
	d.regs[r.ID] = r
	d.holders[c.UserID] = r.ID
	d.holdInSeries(r, true)
	d.outcomes[i] = d.changedOutcome(r)
}
