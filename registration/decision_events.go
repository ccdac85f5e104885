package registration

// record appends the event of r moving from from (nil: created) to its
// current status, and marks r as changed.
func (d *decision) record(r *Registration, typ EventType, from *Status, o Origin) {
	d.seq++
	r.UpdatedAt = d.st.At
	if typ == EventWaitlisted {
		r.WaitlistSeq = d.seq
		r.Joined = d.w.join()
	}
	d.confirmedByGettingASeat(r, typ)
	snapshot := *r
	d.events = append(d.events, Event{
		ID: EventID(d.act.ID, d.seq), Seq: d.seq, ActivityID: d.act.ID, RegistrationID: r.ID, UserID: r.UserID,
		Type: typ, From: from, To: r.Status, Seats: r.Seats, Actor: o.Actor, RequestID: o.RequestID, At: d.st.At,
		BlockID: r.BlockID, Registration: &snapshot,
	})
	if !d.inserted[r.ID] && !d.updated[r.ID] {
		d.updated[r.ID] = true
		d.order = append(d.order, r.ID)
	}
}

// move changes r's status and records the event.
func (d *decision) move(r *Registration, to Status, typ EventType, o Origin) {
	from := r.Status
	r.Status = to
	if to != AwaitingPayment {
		r.ExpiresAt = nil
	}
	d.record(r, typ, &from, o)
}

func (d *decision) changedOutcome(r *Registration) Outcome {
	snapshot := *r
	return Outcome{Registration: &snapshot, Changed: true}
}

func (d *decision) unchangedOutcome(r *Registration) Outcome {
	snapshot := *r
	return Outcome{Registration: &snapshot}
}

// named returns the registration a command names, or not_found.
func (d *decision) named(id string) (*Registration, error) {
	r, ok := d.regs[id]
	if !ok {
		return nil, RegistrationNotFound(id)
	}
	return r, nil
}
